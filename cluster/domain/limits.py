"""Every bound on what a request may carry, in one place: checked before anything is proposed to Raft.

A field over its limit is ``ValidationError`` (INVALID_ARGUMENT) whose message
names the field, its size and the limit. ``TABLE`` lists them for people: the
"Limits" table of docs/api.md and the proto comments are written from it (a
unit test keeps that page in step).

Spans and instants are bounded so that every value the cluster stores fits a
protobuf ``Duration``/``Timestamp`` and our int64 milliseconds, whatever is
added to it later (``now + after``, ``anchor + every``, ``now + lease_ttl``):
a job whose next fire time cannot be written back into a ``Timestamp`` would
break every listing that shows it.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Sized

from raftsched.cluster.domain.errors import ValidationError

# ----------------------------------------------------------------- strings (characters)

MAX_NAME_CHARS = 256
MAX_QUEUE_CHARS = 128
MAX_TYPE_CHARS = 128
MAX_ID_CHARS = 256  # job_id, run_id, executor_id and filters naming them
MAX_IDEMPOTENCY_KEY_CHARS = 256
MAX_LEASE_ID_CHARS = 32  # we issue "L<fencing token>"
MAX_CRON_CHARS = 256
MAX_TIMEZONE_CHARS = 64
MAX_ERROR_CHARS = 16_384  # CompleteRun.error: longer text is cut to this (with a note), not refused
MAX_LOG_URI_CHARS = 2048
MAX_PAGE_TOKEN_CHARS = 1024
MAX_NODE_ID_CHARS = 64  # AddNode/RemoveNode id: also a directory name under data_dir
MAX_ADDRESS_CHARS = 255  # AddNode raft, grpc and http addresses (host:port)

# ----------------------------------------------------------------- bytes (defaults; [scheduler] sets them)

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
#: quotas' defaults ([limits] in cluster.toml)
DEFAULT_MAX_JOBS = 10_000_000
DEFAULT_MAX_PENDING_RUNS = 10_000_000
DEFAULT_MAX_RESULT_BYTES = 1024 * 1024
#: RenewLease's LeaseRef.details: an attempt's heartbeat details, and all of one call's together
MAX_HEARTBEAT_DETAILS_BYTES = 64 * 1024
MAX_RENEW_DETAILS_BYTES = 1024 * 1024

# ----------------------------------------------------------------- repeated fields (items per call)

MAX_CREATE_BATCH = 1000  # CreateJobs.jobs
MAX_COMPLETE_BATCH = 1000  # CompleteRuns.runs
MAX_RENEW_BATCH = 10_000  # RenewLease.leases
MAX_ACQUIRE_QUEUES = 64  # AcquireLease.queues (a grant reads one index per queue and type)
MAX_ACQUIRE_TYPES = 64  # AcquireLease.types
MAX_WATCH_KINDS = 16  # WatchRuns.kinds

# ----------------------------------------------------------------- numbers

MAX_PAGE_SIZE = 1000  # larger page_size values are served as 1000 pages (AIP-158)
MAX_PREVIEW_COUNT = 1000  # larger counts are served as 1000 instants
MAX_WAIT_MS = 60_000  # AcquireLease.wait
#: run changes each node keeps in memory, so a WatchRuns stream can resume (``resume_after``) on any node,
#: and the most they may weigh (results and errors, roughly: a result may be up to 1 MiB)
WATCH_HISTORY = 20_000
WATCH_HISTORY_BYTES = 64 << 20

# ----------------------------------------------------------------- a run's history (command format 3)

#: attempts a run keeps (``Run.attempts``): beyond, the oldest are dropped and counted
MAX_RUN_ATTEMPTS_KEPT = 32
#: attempts of a run that keep their heartbeat details (the latest ones; older attempts keep only when they came)
MAX_ATTEMPTS_WITH_HEARTBEAT = 4
#: steps a run keeps (``ExplainRun``): the first ``RUN_STEPS_HEAD`` and the latest ones; those between are counted
MAX_RUN_STEPS = 64
RUN_STEPS_HEAD = 16
#: characters of an error kept in an attempt, and of a step's detail
MAX_ATTEMPT_ERROR_CHARS = 2048
MAX_STEP_DETAIL_CHARS = 512
#: how long a request_id is remembered (the same id again within it returns the first answer)
REQUEST_ID_TTL_MS = 24 * 3600 * 1000
MAX_REQUEST_ID_CHARS = 128
#: expired request ids dropped per applied PruneHistory entry
REQUEST_PRUNE_BATCH = 5000

# ----------------------------------------------------------------- time

#: the latest instant anything may name or reach: 9999-12-31T23:59:59.999Z, the end of a protobuf Timestamp
MAX_INSTANT_MS = 253_402_300_799_999
#: the longest span (after, every, lease_ttl, timeout, backoffs, windows, TTLs): 100 years of 365.25 days,
#: so ``now + span`` stays a valid Timestamp until the year 9899
MAX_SPAN_MS = 36_525 * 86_400 * 1000
#: what a protobuf Duration/Timestamp may hold (google/protobuf/duration.proto, timestamp.proto)
PB_MAX_DURATION_S = 315_576_000_000
PB_MIN_TIMESTAMP_S = -62_135_596_800
PB_MAX_TIMESTAMP_S = 253_402_300_799
PB_MAX_NANOS = 999_999_999


#: (field, limit, what happens over it) for docs/api.md and the proto comments
TABLE: tuple[tuple[str, str, str], ...] = (
    ("JobSpec.name", f"{MAX_NAME_CHARS} characters, no control or bidirectional character", "INVALID_ARGUMENT"),
    ("JobSpec.queue, AcquireLease.queues[], ListJobs/WatchRuns queue", f"{MAX_QUEUE_CHARS} characters of A-Z a-z 0-9 _ . : / -", "INVALID_ARGUMENT"),
    ("JobSpec.type", f"{MAX_TYPE_CHARS} characters of A-Z a-z 0-9 _ . : / -", "INVALID_ARGUMENT"),
    ("JobSpec.payload", "[scheduler] max_payload_bytes (default 1 MiB)", "INVALID_ARGUMENT"),
    ("CronSchedule.expression", f"{MAX_CRON_CHARS} characters", "INVALID_ARGUMENT"),
    ("CronSchedule.timezone", f"{MAX_TIMEZONE_CHARS} characters (an IANA name)", "INVALID_ARGUMENT"),
    ("JobSpec.at, PreviewSchedule.after", "1970-01-01 to 9999-12-31T23:59:59.999Z (a valid Timestamp)", "INVALID_ARGUMENT"),
    ("every span (after, every, lease_ttl, timeout, catchup_window, history_ttl, backoffs, CompleteRun.retry_after)", "100 years (a valid Duration)", "INVALID_ARGUMENT"),
    ("idempotency_key", f"{MAX_IDEMPOTENCY_KEY_CHARS} characters, no control or bidirectional character; per queue", "INVALID_ARGUMENT"),
    ("request_id (every mutating request)", f"{MAX_REQUEST_ID_CHARS} characters, no control or bidirectional character; remembered {REQUEST_ID_TTL_MS // 3_600_000} h", "INVALID_ARGUMENT"),
    ("Run.attempts, ExplainRun steps (kept per run)", f"{MAX_RUN_ATTEMPTS_KEPT} attempts (oldest dropped), {MAX_RUN_STEPS} steps (the first {RUN_STEPS_HEAD} and the latest); the rest counted", "attempts_dropped, steps_dropped"),
    ("job_id, run_id, executor_id (requests and filters)", f"{MAX_ID_CHARS} characters (an executor_id: no control or bidirectional character)", "INVALID_ARGUMENT"),
    ("ListJobs.name_prefix", f"{MAX_NAME_CHARS} characters", "INVALID_ARGUMENT"),
    ("lease_id", f"{MAX_LEASE_ID_CHARS} characters", "INVALID_ARGUMENT"),
    ("page_token", f"{MAX_PAGE_TOKEN_CHARS} characters, and only a token a node of this cluster issued for the same query", "INVALID_ARGUMENT"),
    ("page_size", f"{MAX_PAGE_SIZE} (larger is served as {MAX_PAGE_SIZE}); negative", "INVALID_ARGUMENT when negative"),
    ("PreviewSchedule.count", f"{MAX_PREVIEW_COUNT} (larger is served as {MAX_PREVIEW_COUNT}); negative", "INVALID_ARGUMENT when negative"),
    ("CreateJobs.jobs", f"{MAX_CREATE_BATCH} items, counted before any is read", "INVALID_ARGUMENT"),
    ("CompleteRuns.runs", f"{MAX_COMPLETE_BATCH} items, counted before any is read", "INVALID_ARGUMENT"),
    ("RenewLease.leases", f"{MAX_RENEW_BATCH} items", "INVALID_ARGUMENT"),
    ("RenewLease.leases[].details", f"{MAX_HEARTBEAT_DETAILS_BYTES // 1024} KiB each, {MAX_RENEW_DETAILS_BYTES >> 20} MiB in one call", "INVALID_ARGUMENT"),
    ("AcquireLease.queues", f"{MAX_ACQUIRE_QUEUES} items", "INVALID_ARGUMENT"),
    ("AcquireLease.types", f"{MAX_ACQUIRE_TYPES} items", "INVALID_ARGUMENT"),
    ("AcquireLease.max_runs / wait", f"1-999 runs / up to {MAX_WAIT_MS // 1000} s", "INVALID_ARGUMENT"),
    ("WatchRuns.kinds", f"{MAX_WATCH_KINDS} items", "INVALID_ARGUMENT"),
    ("WatchRuns.resume_after", f"within the node's last {WATCH_HISTORY:,} run changes (at most {WATCH_HISTORY_BYTES >> 20} MiB, kept in memory)", "OUT_OF_RANGE: watch again"),
    ("CompleteRun.result", "[scheduler] max_result_bytes (default 1 MiB)", "INVALID_ARGUMENT"),
    ("CompleteRun.error", f"{MAX_ERROR_CHARS} characters", "cut to the limit with a note (never refused: a completion must not be lost for its error text)"),
    ("CompleteRun.log_uri", f"{MAX_LOG_URI_CHARS} characters, inside the node's output store", "INVALID_ARGUMENT"),
    ("jobs kept (deleted ones until purged)", "[limits] max_jobs (default 10,000,000)", "RESOURCE_EXHAUSTED"),
    ("PENDING runs", "[limits] max_pending_runs (default 10,000,000)", "RESOURCE_EXHAUSTED (TriggerJob); a due instant is recorded SKIPPED"),
    ("open WatchRuns streams per node", "[limits] max_watch_streams (default 256)", "RESOURCE_EXHAUSTED"),
    ("waiting AcquireLease long polls per node", "[limits] max_long_polls (default 512)", "RESOURCE_EXHAUSTED"),
    ("AddNode/RemoveNode id", f"{MAX_NODE_ID_CHARS} characters of A-Z a-z 0-9 _ . -", "INVALID_ARGUMENT"),
    ("AddNode raft_address, grpc_address, http_address", f"{MAX_ADDRESS_CHARS} characters, host:port", "INVALID_ARGUMENT"),
)  # fmt: skip


def check_chars(field: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise ValidationError(f"{field} is {len(value)} characters long; the limit is {limit}")


def check_bytes(field: str, value: bytes, limit: int, hint: str = "") -> None:
    if len(value) > limit:
        raise ValidationError(f"{field} is {len(value)} bytes, over the limit of {limit} bytes{'; ' + hint if hint else ''}")


def check_count(field: str, items: Sized, limit: int, hint: str = "split the call") -> None:
    """Checked on the raw repeated field, before any item is converted."""
    if len(items) > limit:
        raise ValidationError(f"{field} has {len(items)} items; the limit is {limit}: {hint}")


def check_span_ms(field: str, value: int, minimum: int = 0) -> None:
    if value < minimum:
        raise ValidationError(f"{field} is {value} ms; it must be at least {minimum} ms")
    if value > MAX_SPAN_MS:
        raise ValidationError(f"{field} is {value} ms, over the limit of {MAX_SPAN_MS} ms (100 years)")


def check_instant_ms(field: str, value: int) -> None:
    if value < 0:
        raise ValidationError(f"{field} {value} is before 1970: use an instant >= 0 (ms since the Unix epoch)")
    if value > MAX_INSTANT_MS:
        raise ValidationError(f"{field} is after 9999-12-31T23:59:59.999Z (the latest instant a Timestamp can hold)")


def shown(value: object, limit: int = 200) -> str:
    """``repr(value)``, cut for an error message: a refusal never echoes megabytes back."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 30]}... ({len(text)} characters)"


def cut_error(error: str) -> str:
    """An executor's error text cut to ``MAX_ERROR_CHARS`` characters, with a note when it was cut."""
    if len(error) <= MAX_ERROR_CHARS:
        return error
    note = f" ... (cut: {len(error)} characters, the limit is {MAX_ERROR_CHARS})"
    return error[: MAX_ERROR_CHARS - len(note)] + note
