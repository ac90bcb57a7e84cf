"""Input validation of job specs, before anything is proposed to Raft.

``validate_spec`` raises ``ValidationError`` (INVALID_ARGUMENT) with a message
that names the field, the bad value and what is accepted — the payload of a
built-in type (``shell``, ``http``) included (``raftsched.cluster.domain.payloads``). Nothing invalid
ever reaches the log, so a rejected request changes no state. Names, queue
and type names hold no control or bidirectional character
(``raftsched.cluster.domain.unsafe_text``): the refusal names the character and where
it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.model import After, At, Cron, Every, JobSpec, Member, RetryPolicy, Schedule
from raftsched.cluster.domain.payloads import validate_payload
from raftsched.cluster.domain.schedule import ScheduleError, validate_schedule
from raftsched.cluster.domain.spec_codec import has_extras
from raftsched.cluster.domain.spec_extras import validate_extras
from raftsched.cluster.domain.unsafe_text import check_text

DEFAULT_MAX_PAYLOAD_BYTES = lim.DEFAULT_MAX_PAYLOAD_BYTES
MAX_NAME_LEN = lim.MAX_NAME_CHARS
DEFAULT_MAX_JOBS = lim.DEFAULT_MAX_JOBS
DEFAULT_MAX_PENDING_RUNS = lim.DEFAULT_MAX_PENDING_RUNS
_QUEUE_RE = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")
_TYPE_RE = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")
_NODE_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MIN_LEASE_TTL_MS = 100
MAX_ATTEMPTS = 1000


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits a node enforces that its config sets (the fixed ones are in ``raftsched.cluster.domain.limits``)."""

    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    #: jobs kept (deleted ones until purged): CreateJob over it is RESOURCE_EXHAUSTED
    max_jobs: int = DEFAULT_MAX_JOBS
    #: PENDING runs: TriggerJob over it is RESOURCE_EXHAUSTED, a due instant is recorded SKIPPED
    max_pending_runs: int = DEFAULT_MAX_PENDING_RUNS


def validate_queue(queue: str) -> None:
    if not queue.strip():
        raise ValidationError("queue name is empty: give a name such as 'default'")
    check_text("queue name", queue)
    if not _QUEUE_RE.match(queue):
        raise ValidationError(
            f"queue name {lim.shown(queue)} is not valid: use 1-128 letters, digits and the characters _ . : / -"
        )


def validate_type_name(job_type: str) -> None:
    check_text("job type", job_type)
    if not _TYPE_RE.match(job_type):
        raise ValidationError(
            f"job type {lim.shown(job_type)} is not valid: use 'shell', 'http' or a handler name of 1-128 letters, digits and _ . : / -"
        )


def validate_retry(retry: RetryPolicy) -> None:
    if not 1 <= retry.max_attempts <= MAX_ATTEMPTS:
        raise ValidationError(f"retry.max_attempts {retry.max_attempts} must be between 1 and {MAX_ATTEMPTS}")
    if retry.initial_backoff_ms < 0:
        raise ValidationError(f"retry.initial_backoff is negative ({retry.initial_backoff_ms} ms): give a positive span")
    if retry.max_backoff_ms < 0:
        raise ValidationError(f"retry.max_backoff is negative ({retry.max_backoff_ms} ms): give a positive span")
    if retry.max_backoff_ms < retry.initial_backoff_ms:
        raise ValidationError(
            f"retry.max_backoff ({retry.max_backoff_ms} ms) is shorter than retry.initial_backoff ({retry.initial_backoff_ms} ms)"
        )
    if not 1.0 <= retry.multiplier <= 100.0:
        raise ValidationError(f"retry.multiplier {retry.multiplier} must be between 1 and 100")
    if not 0.0 <= retry.jitter <= 1.0:
        raise ValidationError(f"retry.jitter {retry.jitter} must be between 0 and 1 (a fraction of the backoff)")


def _validate_span_bounds(spec: JobSpec) -> None:
    """No span may overflow a Timestamp once added to an instant (``raftsched.cluster.domain.limits``)."""
    r = spec.retry
    for field, value in (
        ("lease_ttl", spec.lease_ttl_ms),
        ("timeout", spec.timeout_ms),
        ("catchup_window", spec.catchup_window_ms),
        ("history_ttl", spec.history_ttl_ms),
        ("retry.initial_backoff", r.initial_backoff_ms),
        ("retry.max_backoff", r.max_backoff_ms),
    ):
        if isinstance(value, int) and value > lim.MAX_SPAN_MS:
            lim.check_span_ms(field, value)


def validate_schedule_bounds(schedule: Schedule) -> None:
    """Sizes and ranges of a schedule, checked before any parsing (a 500 KB cron is never parsed)."""
    if isinstance(schedule, Cron):
        if not isinstance(schedule.expression, str) or not isinstance(schedule.timezone, str):
            raise ValidationError("cron expression and timezone must be strings")
        lim.check_chars("cron expression", schedule.expression, lim.MAX_CRON_CHARS)
        lim.check_chars("cron timezone", schedule.timezone, lim.MAX_TIMEZONE_CHARS)
    elif isinstance(schedule, At) and isinstance(schedule.at_ms, int) and schedule.at_ms > lim.MAX_INSTANT_MS:
        lim.check_instant_ms("at", schedule.at_ms)
    elif isinstance(schedule, After) and isinstance(schedule.after_ms, int) and schedule.after_ms > lim.MAX_SPAN_MS:
        lim.check_span_ms("after", schedule.after_ms)
    elif isinstance(schedule, Every) and isinstance(schedule.every_ms, int) and schedule.every_ms > lim.MAX_SPAN_MS:
        lim.check_span_ms("every", schedule.every_ms)


def check_schedule(schedule: Schedule) -> None:
    """``validate_schedule`` after the bounds, as ``ValidationError``."""
    validate_schedule_bounds(schedule)
    try:
        validate_schedule(schedule)
    except ScheduleError as exc:
        raise ValidationError(str(exc)) from exc


def _validate_spans(spec: JobSpec) -> None:
    _validate_span_bounds(spec)
    if spec.lease_ttl_ms < MIN_LEASE_TTL_MS:
        raise ValidationError(
            f"lease_ttl {spec.lease_ttl_ms} ms is too short: give at least {MIN_LEASE_TTL_MS} ms "
            "(leave it unset for the default 30 s)"
        )
    if spec.timeout_ms < 0:
        raise ValidationError(f"timeout is negative ({spec.timeout_ms} ms): give a positive span, or 0 for none")
    if not 1 <= spec.history_limit <= 100_000:
        raise ValidationError(f"history_limit {spec.history_limit} must be between 1 and 100000 (0 for the default 1000)")
    if not 1 <= spec.failed_history_limit <= 100_000:
        raise ValidationError(
            f"failed_history_limit {spec.failed_history_limit} must be between 1 and 100000 (0 for the default 1000)"
        )
    if spec.history_ttl_ms < 1000:
        raise ValidationError(f"history_ttl {spec.history_ttl_ms} ms is too short: keep runs at least 1 s (unset: 7 days)")
    if spec.catchup_window_ms < 0:
        raise ValidationError(f"catchup_window is negative ({spec.catchup_window_ms} ms): give a positive span")


def validate_spec(spec: JobSpec, limits: Limits = Limits()) -> None:
    """Raise ``ValidationError`` if ``spec`` may not be stored."""
    if len(spec.name) > MAX_NAME_LEN:
        raise ValidationError(f"job name is {len(spec.name)} characters long; the limit is {MAX_NAME_LEN}")
    check_text("name", spec.name)
    validate_queue(spec.queue)
    validate_type_name(spec.type)
    if len(spec.payload) > limits.max_payload_bytes:
        raise ValidationError(
            f"payload is {len(spec.payload)} bytes, over the limit of {limits.max_payload_bytes} bytes; "
            "store large inputs elsewhere and pass a reference"
        )
    check_schedule(spec.schedule)
    validate_retry(spec.retry)
    _validate_spans(spec)
    if has_extras(spec):
        validate_extras(spec)
    validate_payload(spec.type, spec.payload)  # last: a spec with no schedule is told that first


def validate_node_id(node_id: str) -> None:
    """A member id: it names the node's directory under data_dir, so plain characters only."""
    lim.check_chars("id", node_id, lim.MAX_NODE_ID_CHARS)
    check_text("node id", node_id)
    if not _NODE_ID_RE.match(node_id) or node_id in (".", ".."):
        raise ValidationError(f"node id {lim.shown(node_id)} is not valid: use 1-64 characters of A-Z a-z 0-9 _ . -")


def validate_member(member: Member) -> None:
    """An AddNode request: its id and addresses (``host:port``; ``http`` may be empty)."""
    validate_node_id(member.node_id)
    for field, address, required in (
        ("raft_address", member.raft, True),
        ("grpc_address", member.grpc, True),
        ("http_address", member.http, False),
    ):
        if not address and not required:
            continue
        lim.check_chars(field, address, lim.MAX_ADDRESS_CHARS)
        check_text(field, address)
        host, _, port = address.rpartition(":")
        if not host.strip("[]") or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValidationError(f"{field} {lim.shown(address)} is not host:port (e.g. 10.0.0.4:7001)")
