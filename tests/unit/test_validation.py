"""Tests for raftsched.cluster.domain.validation: every refused spec names the field and the bad value."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from raftsched.cluster.domain.errors import RaftschedError, ValidationError
from raftsched.cluster.domain.model import After, At, Cron, Every, JobSpec, RetryPolicy
from raftsched.cluster.domain.validation import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    MAX_ATTEMPTS,
    MAX_NAME_LEN,
    MIN_LEASE_TTL_MS,
    Limits,
    validate_queue,
    validate_retry,
    validate_spec,
)

pytestmark = pytest.mark.unit

BASE = JobSpec(name="nightly", schedule=Every(60_000), type="shell", payload=b'{"command": "true"}')


def spec(**changes: Any) -> JobSpec:
    return BASE._replace(**changes)


def retry(**changes: Any) -> RetryPolicy:
    return dataclasses.replace(RetryPolicy(), **changes)


# ------------------------------------------------------------------ accepted


@pytest.mark.parametrize(
    "good",
    [
        BASE,
        spec(schedule=At(0)),
        spec(schedule=After(0)),
        spec(schedule=Every(100)),
        spec(schedule=Cron("*/5 * * * *")),
        spec(schedule=Cron("0 9 * * MON-FRI", "Europe/Berlin")),
        spec(schedule=Cron("@daily", "")),
        spec(schedule=Cron("0 0 29 2 *")),  # leap days exist
        spec(name=""),
        spec(name="x" * MAX_NAME_LEN),
        spec(queue="a"),
        spec(queue="team-a/billing.v2:high_prio"),
        spec(queue="q" * 128),
        spec(type="http", payload=b'{"url": "https://example.com/hook"}'),
        spec(type="my.handlers:resize_image"),
        spec(type="report", payload=b""),  # a user's type: its payload is its handler's business
        spec(type="report", payload=b"x" * DEFAULT_MAX_PAYLOAD_BYTES),
        spec(lease_ttl_ms=MIN_LEASE_TTL_MS),
        spec(timeout_ms=0),
        spec(catchup_window_ms=0),
        spec(retry=retry(max_attempts=1)),
        spec(retry=retry(max_attempts=MAX_ATTEMPTS)),
        spec(retry=retry(initial_backoff_ms=0, max_backoff_ms=0)),
        spec(retry=retry(initial_backoff_ms=500, max_backoff_ms=500)),
        spec(retry=retry(multiplier=1.0, jitter=0.0)),
        spec(retry=retry(multiplier=100.0, jitter=1.0)),
    ],
)
def test_valid_specs_pass(good: JobSpec) -> None:
    validate_spec(good)


def test_payload_limit_comes_from_limits() -> None:
    validate_spec(spec(type="report", payload=b"x" * 10), Limits(max_payload_bytes=10))
    with pytest.raises(ValidationError, match="payload is 11 bytes, over the limit of 10 bytes"):
        validate_spec(spec(type="report", payload=b"x" * 11), Limits(max_payload_bytes=10))


# ------------------------------------------------------------------ refused


@pytest.mark.parametrize(
    "bad, match",
    [
        # names, queues, types
        (spec(name="n" * (MAX_NAME_LEN + 1)), f"job name is {MAX_NAME_LEN + 1} characters long; the limit is 256"),
        (spec(queue=""), "queue name is empty"),
        (spec(queue="   "), "queue name is empty"),
        (spec(queue="has space"), "queue name 'has space' is not valid"),
        (spec(queue="ünïcode"), "queue name 'ünïcode' is not valid"),
        (spec(queue="q" * 129), "queue name 'q+' is not valid: use 1-128"),
        (spec(queue="new\nline"), "queue name contains U\\+000A \\(LF\\) at position 3"),
        (spec(type=""), "job type '' is not valid"),
        (spec(type="rm -rf"), "job type 'rm -rf' is not valid"),
        # payload
        (spec(payload=b"x" * (DEFAULT_MAX_PAYLOAD_BYTES + 1)), f"payload is {DEFAULT_MAX_PAYLOAD_BYTES + 1} bytes"),
        # schedules
        (spec(schedule=At(-1)), "at_ms -1 is before 1970"),
        (spec(schedule=After(-5)), "after_ms -5 is a negative span"),
        (spec(schedule=Every(-1_000)), "every_ms -1000 is negative"),
        (spec(schedule=Every(0)), "every_ms 0 is zero"),
        (spec(schedule=Every(99)), "every_ms 99 is too short: the interval must be at least 100 ms"),
        (spec(schedule=Every(1.5)), "every_ms must be an integer number of milliseconds, got 1.5"),  # type: ignore[arg-type]
        (spec(schedule=Cron("")), "cron expression '' is empty"),
        (spec(schedule=Cron("* * *")), "cron expression '\\* \\* \\*' has 3 fields"),
        (spec(schedule=Cron("61 * * * *")), "invalid cron expression '61 \\* \\* \\* \\*'"),
        (spec(schedule=Cron("* * * * * * *")), "has 7 fields"),
        (spec(schedule=Cron("H * * * *")), "H \\(hashed\\) or R \\(random\\)"),
        (spec(schedule=Cron("@fortnightly")), "cron alias '@fortnightly' is not supported"),
        (spec(schedule=Cron("0 0 30 2 *")), "never fires"),
        (spec(schedule=Cron("0 * * * *", "Mars/Olympus_Mons")), "unknown time zone 'Mars/Olympus_Mons'"),
        (spec(schedule=Cron("0 * * * *", "../../etc/passwd")), "unknown time zone '../../etc/passwd'"),
        # retry policy
        (spec(retry=retry(max_attempts=0)), "retry.max_attempts 0 must be between 1 and 1000"),
        (spec(retry=retry(max_attempts=MAX_ATTEMPTS + 1)), "retry.max_attempts 1001"),
        (spec(retry=retry(initial_backoff_ms=-1)), "retry.initial_backoff is negative \\(-1 ms\\)"),
        (spec(retry=retry(max_backoff_ms=-1, initial_backoff_ms=0)), "retry.max_backoff is negative \\(-1 ms\\)"),
        (
            spec(retry=retry(initial_backoff_ms=5_000, max_backoff_ms=1_000)),
            "retry.max_backoff \\(1000 ms\\) is shorter than retry.initial_backoff \\(5000 ms\\)",
        ),
        (spec(retry=retry(multiplier=0.5)), "retry.multiplier 0.5 must be between 1 and 100"),
        (spec(retry=retry(multiplier=101.0)), "retry.multiplier 101.0"),
        (spec(retry=retry(multiplier=math.nan)), "retry.multiplier nan"),
        (spec(retry=retry(multiplier=math.inf)), "retry.multiplier inf"),
        (spec(retry=retry(jitter=-0.1)), "retry.jitter -0.1 must be between 0 and 1"),
        (spec(retry=retry(jitter=1.5)), "retry.jitter 1.5"),
        (spec(retry=retry(jitter=math.nan)), "retry.jitter nan"),
        # spans
        (spec(lease_ttl_ms=MIN_LEASE_TTL_MS - 1), "lease_ttl 99 ms is too short: give at least 100 ms"),
        (spec(lease_ttl_ms=-30_000), "lease_ttl -30000 ms is too short"),
        (spec(timeout_ms=-1), "timeout is negative \\(-1 ms\\)"),
        (spec(catchup_window_ms=-1), "catchup_window is negative \\(-1 ms\\)"),
    ],
)
def test_invalid_specs_name_the_field_and_value(bad: JobSpec, match: str) -> None:
    with pytest.raises(ValidationError, match=match) as info:
        validate_spec(bad)
    assert isinstance(info.value, RaftschedError)


def test_schedule_errors_become_validation_errors_with_their_cause() -> None:
    from raftsched.cluster.domain.schedule import ScheduleError

    with pytest.raises(ValidationError) as info:
        validate_spec(spec(schedule=Cron("0 * * * *", "Nowhere/City")))
    assert isinstance(info.value.__cause__, ScheduleError)
    assert "IANA" in str(info.value)


def test_validate_queue_alone() -> None:
    validate_queue("default")
    with pytest.raises(ValidationError, match="empty"):
        validate_queue("")


def test_validate_retry_alone() -> None:
    validate_retry(RetryPolicy())
    with pytest.raises(ValidationError, match="max_attempts"):
        validate_retry(RetryPolicy(max_attempts=-3))


# ------------------------------------------------------------------ characters that act on a terminal


@pytest.mark.parametrize(
    ("name", "named"),
    [
        ("evil\x1b[2J", "U\\+001B \\(ESC\\) at position 4"),
        ("ring\x07", "U\\+0007 \\(BEL\\) at position 4"),
        ("nul\x00", "U\\+0000 \\(NUL\\) at position 3"),
        ("two\nlines", "U\\+000A \\(LF\\) at position 3"),
        ("cr\r", "U\\+000D \\(CR\\) at position 2"),
        ("del\x7f", "U\\+007F \\(DEL\\) at position 3"),
        ("csi\x9b31m", "U\\+009B \\(CSI\\) at position 3"),
        ("invoice-\u202egnp.exe", "U\\+202E \\(RIGHT-TO-LEFT OVERRIDE\\) at position 8"),
        ("a\u2066b", "U\\+2066 \\(LEFT-TO-RIGHT ISOLATE\\) at position 1"),
        ("\u200fx", "U\\+200F \\(RIGHT-TO-LEFT MARK\\) at position 0"),
        ("x\u061c", "U\\+061C \\(ARABIC LETTER MARK\\) at position 1"),
    ],
)
def test_a_name_with_a_control_or_bidi_character_is_refused_naming_it(name: str, named: str) -> None:
    with pytest.raises(ValidationError, match=f"^name contains {named}"):
        validate_spec(spec(name=name))


@pytest.mark.parametrize("name", ["nightly report", "Grüße, 日本語 & <b>", "tab-free: a/b.c (1)", "עברית", "emoji 🚀"])
def test_printable_unicode_names_pass(name: str) -> None:
    validate_spec(spec(name=name))


def test_queue_and_type_names_with_control_characters_name_the_character() -> None:
    with pytest.raises(ValidationError, match="queue name contains U\\+001B \\(ESC\\) at position 1"):
        validate_spec(spec(queue="q\x1b"))
    with pytest.raises(ValidationError, match="job type contains U\\+202E"):
        validate_spec(spec(type="no\u202eop"))
