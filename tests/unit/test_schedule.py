"""Tests for raftsched.cluster.domain.schedule: next-instant arithmetic, validation, cron under DST."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched.cluster.domain.model import After, At, Cron, Every, Schedule
from raftsched.cluster.domain.schedule import (
    MIN_EVERY_MS,
    ScheduleError,
    first_fire,
    next_fire,
    upcoming,
    validate_schedule,
)

pytestmark = pytest.mark.unit


def utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> int:
    """Milliseconds since the epoch of a UTC wall time."""
    return int(datetime(y, mo, d, h, mi, s, tzinfo=timezone.utc).timestamp()) * 1000


MIN = 60_000
HOUR = 60 * MIN
DAY = 24 * HOUR


def fires_between(schedule: Schedule, start_ms: int, end_ms: int) -> list[int]:
    """Every instant in (start_ms, end_ms)."""
    out: list[int] = []
    cursor = start_ms
    while True:
        nxt = next_fire(schedule, cursor, 0)
        if nxt is None or nxt >= end_ms:
            return out
        out.append(nxt)
        cursor = nxt


# ------------------------------------------------------------ at / after / every

T0 = utc(2026, 1, 1)


@pytest.mark.parametrize(
    "schedule, after_ms, anchor_ms, expected",
    [
        # at: fires once, strictly after
        (At(T0 + 500), T0, 0, T0 + 500),
        (At(T0 + 500), T0 + 499, 0, T0 + 500),
        (At(T0 + 500), T0 + 500, 0, None),  # exactly on the instant -> none left
        (At(T0 + 500), T0 + 10_000, 0, None),
        (At(0), -1, 0, 0),
        # after: anchor + span, once
        (After(5_000), T0, T0, T0 + 5_000),
        (After(5_000), T0 + 4_999, T0, T0 + 5_000),
        (After(5_000), T0 + 5_000, T0, None),
        (After(0), T0 - 1, T0, T0),
        (After(0), T0, T0, None),
        # every: anchored arithmetic, k >= 1
        (Every(1_000), T0, T0, T0 + 1_000),
        (Every(1_000), T0 - 50_000, T0, T0 + 1_000),  # before the anchor: still k = 1
        (Every(1_000), T0 + 999, T0, T0 + 1_000),
        (Every(1_000), T0 + 1_000, T0, T0 + 2_000),  # exactly on an instant -> the next
        (Every(1_000), T0 + 1_001, T0, T0 + 2_000),
        (Every(7_000), T0 + 7_000 * 1_000_000 + 3, T0, T0 + 7_000 * 1_000_001),
        (Every(333), 10**15, 1, 1 + 333 * ((10**15 - 1) // 333 + 1)),
        (Every(MIN_EVERY_MS), 0, 0, MIN_EVERY_MS),
    ],
)
def test_next_fire_simple(schedule: Schedule, after_ms: int, anchor_ms: int, expected: int | None) -> None:
    assert next_fire(schedule, after_ms, anchor_ms) == expected


@pytest.mark.parametrize(
    "schedule, anchor_ms, expected",
    [
        (At(T0), T0 + HOUR, T0),  # a past 'at' fires as soon as possible
        (At(T0 + HOUR), T0, T0 + HOUR),
        (After(0), T0, T0),
        (After(90_000), T0, T0 + 90_000),
        (Every(5_000), T0, T0 + 5_000),
        (Cron("0 * * * *"), T0, T0 + HOUR),  # strictly after the anchor
        (Cron("0 * * * *"), T0 + 1, T0 + HOUR),
        (Cron("0 * * * *"), T0 - 1, T0),
    ],
)
def test_first_fire(schedule: Schedule, anchor_ms: int, expected: int) -> None:
    assert first_fire(schedule, anchor_ms) == expected


def test_every_long_span_is_anchored() -> None:
    every, anchor = 86_399_999, 123_456_789
    after = anchor + 40 * 365 * DAY + 17
    n = next_fire(Every(every), after, anchor)
    assert n is not None and (n - anchor) % every == 0 and after < n <= after + every


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "schedule",
    [
        At(0),
        At(T0),
        After(0),
        After(10**12),
        Every(MIN_EVERY_MS),
        Every(DAY),
        Cron("* * * * *"),
        Cron("*/5 * * * * 30"),  # 6 fields: seconds LAST (croniter's convention)
        Cron("0 9 * * MON-FRI", "Europe/Berlin"),
        Cron("0 12 29 2 *"),
        Cron("0 0 * 2 5#5"),  # 5th Friday of February: only some leap years
        Cron("0 12 L * *"),
        Cron("@daily", "Asia/Kolkata"),
        Cron("0 0 * * *", ""),  # empty zone means UTC
        Cron("30 2 * * *", "America/New_York"),
    ],
)
def test_valid_schedules(schedule: Schedule) -> None:
    validate_schedule(schedule)


@pytest.mark.parametrize(
    "schedule, fragments",
    [
        (At(-1), ["-1", "at_ms"]),
        (At(1.5), ["1.5", "integer"]),  # type: ignore[arg-type]
        (After(-5), ["-5", "negative span"]),
        (Every(0), ["every_ms 0", "zero", str(MIN_EVERY_MS)]),
        (Every(-3), ["-3", "negative", str(MIN_EVERY_MS)]),
        (Every(MIN_EVERY_MS - 1), [str(MIN_EVERY_MS - 1), str(MIN_EVERY_MS)]),
        (Every(True), ["True", "integer"]),  # type: ignore[arg-type]
        (Cron("0 0 30 2 *"), ["'0 0 30 2 *'", "never fires"]),
        (Cron("0 0 31 4,6,9,11 *"), ["'0 0 31 4,6,9,11 *'", "never fires"]),
        (Cron("* * * *"), ["'* * * *'", "4 fields", "5 fields"]),
        (Cron("* * * * * * *"), ["7 fields"]),
        (Cron("0 0 * * * 2030"), ["'0 0 * * * 2030'", "invalid"]),  # 6th field is seconds
        (Cron("61 * * * *"), ["'61 * * * *'", "invalid"]),
        (Cron("*/0 * * * *"), ["'*/0 * * * *'"]),
        (Cron("foo bar baz qux quux"), ["'foo bar baz qux quux'"]),
        (Cron("R * * * *"), ["'R * * * *'", "random"]),
        (Cron("H * * * *"), ["'H * * * *'", "hashed"]),
        (Cron("@reboot"), ["'@reboot'", "@daily"]),
        (Cron(""), ["''", "empty"]),
        (Cron("   "), ["empty"]),
        (Cron("* * * * *", "Mars/Base"), ["unknown time zone 'Mars/Base'", "IANA", "Europe/Berlin"]),
        (Cron("* * * * *", "utc"), ["'utc'", "IANA"]),
        (Cron("* * * * *", "../etc"), ["'../etc'"]),
        (Cron("* * * * *", "America"), ["'America'"]),
        ("every day", ["'every day'"]),
    ],
)
def test_invalid_schedules(schedule: Schedule, fragments: list[str]) -> None:
    with pytest.raises(ScheduleError) as info:
        validate_schedule(schedule)
    assert isinstance(info.value, ValueError)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_next_fire_of_impossible_cron_is_none() -> None:
    assert next_fire(Cron("0 0 30 2 *"), T0, T0) is None
    assert upcoming(Cron("0 0 30 2 *"), T0, T0, 3) == []


# ----------------------------------------------------------------- cron in UTC


@pytest.mark.parametrize(
    "expression, after_ms, expected",
    [
        ("*/5 * * * *", utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 0, 5)),
        ("*/5 * * * *", utc(2026, 1, 1, 0, 4, 59), utc(2026, 1, 1, 0, 5)),
        ("*/5 * * * *", utc(2026, 1, 1, 0, 5) - 1, utc(2026, 1, 1, 0, 5)),
        ("*/5 * * * *", utc(2026, 1, 1, 0, 5) + 1, utc(2026, 1, 1, 0, 10)),
        ("0 0 * * *", utc(2026, 12, 31, 23, 59), utc(2027, 1, 1)),
        ("0 9 * * MON", utc(2026, 1, 1), utc(2026, 1, 5, 9)),  # 2026-01-01 is a Thursday
        ("0 0 1 * *", utc(2026, 1, 31), utc(2026, 2, 1)),
        ("0 12 L 2 *", utc(2026, 1, 1), utc(2026, 2, 28, 12)),
        ("0 12 29 2 *", utc(2026, 1, 1), utc(2028, 2, 29, 12)),
        ("0 0 29 2 *", utc(2097, 1, 1), utc(2104, 2, 29)),  # 2100 is not a leap year
        ("0 12 * * * 30", utc(2026, 1, 1), utc(2026, 1, 1, 12, 0, 30)),  # seconds last
        ("* * * * * *", utc(2026, 1, 1) + 1, utc(2026, 1, 1, 0, 0, 1)),
        ("@hourly", utc(2026, 1, 1, 5, 30), utc(2026, 1, 1, 6)),
        ("0 0 1 1 *", utc(1960, 6, 1), utc(1961, 1, 1)),  # before the epoch
    ],
)
def test_cron_utc(expression: str, after_ms: int, expected: int) -> None:
    assert next_fire(Cron(expression, "UTC"), after_ms, 0) == expected
    assert next_fire(Cron(expression, ""), after_ms, 0) == expected


def test_cron_fixed_offset_zone() -> None:
    # Asia/Kolkata is UTC+05:30 with no DST
    assert next_fire(Cron("0 9 * * *", "Asia/Kolkata"), utc(2026, 6, 1), 0) == utc(2026, 6, 1, 3, 30)


# ------------------------------------------------------------------ cron + DST

NY = "America/New_York"
BERLIN = "Europe/Berlin"
LORD_HOWE = "Australia/Lord_Howe"


@pytest.mark.parametrize(
    "expression, zone, day_start, day_end, expected",
    [
        # NY spring forward 2026-03-08 02:00 EST -> 03:00 EDT: 02:30 is skipped
        ("30 2 * * *", NY, utc(2026, 3, 8, 5), utc(2026, 3, 9, 4), [utc(2026, 3, 8, 7)]),
        ("30 2 * * *", NY, utc(2026, 3, 9, 4), utc(2026, 3, 10, 4), [utc(2026, 3, 9, 6, 30)]),
        ("30 2 * * *", NY, utc(2026, 3, 7, 5), utc(2026, 3, 8, 5), [utc(2026, 3, 7, 7, 30)]),
        # NY fall back 2026-11-01 02:00 EDT -> 01:00 EST: 01:30 happens twice, fires at the first
        ("30 1 * * *", NY, utc(2026, 11, 1, 4), utc(2026, 11, 2, 5), [utc(2026, 11, 1, 5, 30)]),
        ("30 1 * * *", NY, utc(2026, 11, 2, 5), utc(2026, 11, 3, 5), [utc(2026, 11, 2, 6, 30)]),
        # Berlin spring forward 2026-03-29 02:00 CET -> 03:00 CEST
        ("30 2 * * *", BERLIN, utc(2026, 3, 28, 23), utc(2026, 3, 29, 22), [utc(2026, 3, 29, 1)]),
        # Berlin fall back 2026-10-25 03:00 CEST -> 02:00 CET: first 02:30 is 00:30 UTC
        ("30 2 * * *", BERLIN, utc(2026, 10, 24, 22), utc(2026, 10, 25, 23), [utc(2026, 10, 25, 0, 30)]),
        # Lord Howe spring forward 2026-10-04 02:00 +10:30 -> 02:30 +11: a 30-minute gap
        ("15 2 * * *", LORD_HOWE, utc(2026, 10, 3, 13), utc(2026, 10, 4, 13), [utc(2026, 10, 3, 15, 30)]),
        ("45 2 * * *", LORD_HOWE, utc(2026, 10, 3, 13), utc(2026, 10, 4, 13), [utc(2026, 10, 3, 15, 45)]),
        # Lord Howe fall back 2026-04-05 02:00 +11 -> 01:30 +10:30: first 01:45 only
        ("45 1 * * *", LORD_HOWE, utc(2026, 4, 4, 13), utc(2026, 4, 5, 13), [utc(2026, 4, 4, 14, 45)]),
    ],
)
def test_cron_dst_daily(expression: str, zone: str, day_start: int, day_end: int, expected: list[int]) -> None:
    assert fires_between(Cron(expression, zone), day_start, day_end) == expected


def test_skipped_wall_times_collapse_into_the_gap_end() -> None:
    # a job with specific hours: 02:00, 02:15, 02:30, 02:45 (skipped) and 03:00 EDT all fire at 07:00 UTC, once
    fires = fires_between(Cron("*/15 1-3 * * *", NY), utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 8, 1))
    assert fires == [
        utc(2026, 3, 8, 6, 45),
        utc(2026, 3, 8, 7),
        utc(2026, 3, 8, 7, 15),
        utc(2026, 3, 8, 7, 30),
        utc(2026, 3, 8, 7, 45),
    ]


def test_clock_following_job_has_no_instants_in_a_skipped_hour() -> None:
    # hour field '*': 02:00-02:45 do not exist; 03:00 EDT (07:00 UTC) fires as itself
    fires = fires_between(Cron("*/15 * * * *", NY), utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 8, 1))
    assert fires == [utc(2026, 3, 8, 6, 45)] + [utc(2026, 3, 8, 7) + k * 15 * MIN for k in range(5)]


@pytest.mark.parametrize(
    "zone, day_start, day_end, repeat_start, repeat_end, expected_day_count",
    [
        # NY: local 2026-03-08 is 23 hours, 2026-11-01 is 25 hours (01:00-02:00 twice)
        (NY, utc(2026, 3, 8, 5), utc(2026, 3, 9, 4), None, None, 23 * 4),
        (NY, utc(2026, 11, 1, 4), utc(2026, 11, 2, 5), utc(2026, 11, 1, 5), utc(2026, 11, 1, 7), 25 * 4),
        # Berlin: 02:00-03:00 twice on 2026-10-25
        (BERLIN, utc(2026, 3, 28, 23), utc(2026, 3, 29, 22), None, None, 23 * 4),
        (BERLIN, utc(2026, 10, 24, 22), utc(2026, 10, 25, 23), utc(2026, 10, 25, 0), utc(2026, 10, 25, 2), 25 * 4),
    ],
)
def test_quarter_hourly_across_transitions(
    zone: str,
    day_start: int,
    day_end: int,
    repeat_start: int | None,
    repeat_end: int | None,
    expected_day_count: int,
) -> None:
    fires = fires_between(Cron("*/15 * * * *", zone), day_start - 1, day_end)
    assert all(a < b for a, b in zip(fires, fires[1:]))
    assert len(set(fires)) == len(fires) == expected_day_count
    assert all(f % (15 * MIN) == 0 for f in fires)
    if repeat_start is not None and repeat_end is not None:
        # the two passes of the repeated hour span two UTC hours; the job follows the clock through both
        in_repeat = [f for f in fires if repeat_start <= f < repeat_end]
        assert in_repeat == [repeat_start + k * 15 * MIN for k in range(8)]


@pytest.mark.parametrize(
    "expression, zone, after_ms, expected",
    [
        # after_ms inside the second pass of NY's repeated hour (06:00-07:00 UTC): a clock-following
        # job fires on in the second pass
        ("*/15 * * * *", NY, utc(2026, 11, 1, 6, 10), utc(2026, 11, 1, 6, 15)),
        ("*/15 * * * *", NY, utc(2026, 11, 1, 6), utc(2026, 11, 1, 6, 15)),
        ("*/15 * * * *", NY, utc(2026, 11, 1, 7) - 1, utc(2026, 11, 1, 7)),
        ("* * * * * *", NY, utc(2026, 11, 1, 6, 59, 58), utc(2026, 11, 1, 6, 59, 59)),
        ("* * * * * *", NY, utc(2026, 11, 1, 6, 0, 1), utc(2026, 11, 1, 6, 0, 2)),
        # ... a job with specific hours does not: its repeated wall times fired in the first pass
        ("30 1 * * *", NY, utc(2026, 11, 1, 6, 10), utc(2026, 11, 2, 6, 30)),
        ("* 1 * * * *", NY, utc(2026, 11, 1, 6, 59, 58), utc(2026, 11, 2, 6)),
        # early in the second pass: thousands of repeated wall seconds are jumped over, not walked
        ("* 1,2 * * * *", NY, utc(2026, 11, 1, 6, 0, 1), utc(2026, 11, 1, 7)),
        # inside the first pass
        ("*/15 * * * *", NY, utc(2026, 11, 1, 5, 10), utc(2026, 11, 1, 5, 15)),
        ("*/15 * * * *", NY, utc(2026, 11, 1, 5, 45), utc(2026, 11, 1, 6)),
        ("*/15 1,2 * * *", NY, utc(2026, 11, 1, 5, 45), utc(2026, 11, 1, 7)),
        # Lord Howe's 30-minute repeat (15:00-15:30 UTC second pass on 2026-04-04)
        ("*/10 * * * *", LORD_HOWE, utc(2026, 4, 4, 15, 5), utc(2026, 4, 4, 15, 10)),
        ("*/10 1,2 * * *", LORD_HOWE, utc(2026, 4, 4, 15, 5), utc(2026, 4, 4, 15, 30)),
        # at the gap end itself
        ("30 2 * * *", NY, utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)),
        ("30 2 * * *", NY, utc(2026, 3, 8, 7) - 1, utc(2026, 3, 8, 7)),
    ],
)
def test_cron_dst_next_fire(expression: str, zone: str, after_ms: int, expected: int) -> None:
    assert next_fire(Cron(expression, zone), after_ms, 0) == expected


def test_cron_next_fire_is_cheap() -> None:
    s = Cron("*/15 * * * *", NY)
    start = time.perf_counter()
    for i in range(500):
        next_fire(s, utc(2026, 5, 1) + i * 7 * MIN, 0)
    assert (time.perf_counter() - start) / 500 < 0.005  # typically ~0.1 ms; generous for CI


# -------------------------------------------------------------------- upcoming


@pytest.mark.parametrize(
    "schedule, count, expected_len",
    [
        (Cron("*/15 * * * *", NY), 200, 200),
        (Cron("0 0 29 2 *"), 5, 5),
        (Every(250), 50, 50),
        (At(T0 + 1), 10, 1),  # stops early when the schedule ends
        (At(T0 - 1), 10, 0),
        (After(10), 10, 1),
        (Every(250), 0, 0),
    ],
)
def test_upcoming(schedule: Schedule, count: int, expected_len: int) -> None:
    out = upcoming(schedule, T0, T0, count)
    assert len(out) == expected_len
    assert all(x > T0 for x in out)
    assert all(a < b for a, b in zip(out, out[1:]))


def test_upcoming_matches_repeated_next_fire() -> None:
    s = Cron("0 */6 * * *", BERLIN)
    out = upcoming(s, utc(2026, 3, 28), 0, 10)
    cursor, walked = utc(2026, 3, 28), []
    for _ in range(10):
        cursor = next_fire(s, cursor, 0)
        walked.append(cursor)
    assert out == walked


# --------------------------------------------------------------------- property

ZONES = ["UTC", NY, BERLIN, LORD_HOWE, "Asia/Kolkata", "Australia/Sydney", "America/Santiago"]
EXPRESSIONS = [
    "* * * * *",
    "*/15 * * * *",
    "30 2 * * *",
    "30 1 * * *",
    "0 * * * *",
    "15,45 1-3 * * *",
    "0 0 * * 0",
    "0 12 29 2 *",
    "*/7 2 * * *",
    "0 2 1 * *",
    "*/20 * * * * 15",
    "59 23 L * *",
    "* 2 * * *",
    "*/7 */3 * * *",
    "0 12 * * 5L",
    "*/10 * 1 * 1#2",
    "30 0-2 */3 * 0#1,6L",
]
# instants near the 2026 transitions of the zones above, to hit gaps and repeats
TRANSITIONS = [
    utc(2026, 3, 8, 7),
    utc(2026, 11, 1, 6),
    utc(2026, 3, 29, 1),
    utc(2026, 10, 25, 1),
    utc(2026, 10, 3, 15, 30),
    utc(2026, 4, 4, 15),
    utc(2026, 4, 4, 16),
    utc(2026, 10, 3, 16),
    utc(2026, 4, 5, 3),
    utc(2026, 9, 6, 4),
]

every_schedules = st.builds(Every, st.integers(MIN_EVERY_MS, 10 * DAY))
cron_schedules = st.builds(Cron, st.sampled_from(EXPRESSIONS), st.sampled_from(ZONES))
instants = st.one_of(
    st.integers(utc(2000, 1, 1), utc(2040, 1, 1)),
    st.builds(lambda t, d: t + d, st.sampled_from(TRANSITIONS), st.integers(-3 * HOUR, 3 * HOUR)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=st.one_of(every_schedules, cron_schedules), after_ms=instants, anchor_ms=instants, data=st.data())
def test_next_fire_skips_nothing(schedule: Schedule, after_ms: int, anchor_ms: int, data: st.DataObject) -> None:
    n = next_fire(schedule, after_ms, anchor_ms)
    assert n is not None and n > after_ms
    if isinstance(schedule, Every):
        assert (n - anchor_ms) % schedule.every_ms == 0
    else:
        assert n % 1000 == 0
    probes = {after_ms, n - 1} | set(data.draw(st.lists(st.integers(after_ms, n - 1), max_size=5)))
    for x in probes:
        assert next_fire(schedule, x, anchor_ms) == n
    assert next_fire(schedule, n, anchor_ms) > n  # type: ignore[operator]
