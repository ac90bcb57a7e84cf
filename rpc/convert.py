"""Protobuf <-> domain conversion: the one module that maps fields.

Unset (zero) durations and policies become the documented defaults here;
negative spans stay negative so that validation can name them. A Duration or
Timestamp outside what protobuf defines for it (seconds beyond +-10,000
years, nanos beyond +-999,999,999) is INVALID_ARGUMENT naming the field;
the domain's own, tighter bounds (``raftsched.cluster.domain.limits``) are checked by
validation. Going out, instants and spans are clamped to what a Timestamp or
Duration can hold, so a record can always be written back (never an error
of a read).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.idempotency_scope import user_key
from raftsched.cluster.domain.model import (
    DEFAULT_CATCHUP_WINDOW_MS,
    DEFAULT_FAILED_HISTORY_LIMIT,
    DEFAULT_HISTORY_LIMIT,
    DEFAULT_HISTORY_TTL_MS,
    DEFAULT_LEASE_TTL_MS,
    NO_INFO,
    After,
    At,
    Attempt,
    AttemptOutcome,
    ConcurrencyPolicy,
    Cron,
    Every,
    Job,
    JobSpec,
    JobStatus,
    MisfirePolicy,
    NotifyRule,
    RetryPolicy,
    Run,
    RunExtra,
    RunStatus,
    Schedule,
    TimeWindow,
)
from raftsched.cluster.domain.schedule.instants import job_upcoming
from raftsched.cluster.domain.spec_codec import has_extras
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb

if TYPE_CHECKING:  # only their attributes are read here: importing them loads the run history's commands
    from raftsched.cluster.node.explain import Explanation
    from raftsched.cluster.node.run_output import RunOutput

_DEFAULT_RETRY = RetryPolicy()


def dur_ms(d: Duration) -> int:
    return d.seconds * 1000 + d.nanos // 1_000_000


def ts_ms(t: Timestamp) -> int:
    return t.seconds * 1000 + t.nanos // 1_000_000


def span_in(d: Duration, field: str) -> int:
    """A request's Duration in ms; INVALID_ARGUMENT naming ``field`` if protobuf would not call it valid."""
    if abs(d.seconds) > lim.PB_MAX_DURATION_S or abs(d.nanos) > lim.PB_MAX_NANOS or d.seconds * d.nanos < 0:
        raise ValidationError(
            f"{field} is not a valid Duration (seconds {d.seconds}, nanos {d.nanos}): seconds must be within "
            f"+-{lim.PB_MAX_DURATION_S} and nanos within +-{lim.PB_MAX_NANOS}, of the same sign"
        )
    return dur_ms(d)


def instant_in(t: Timestamp, field: str) -> int:
    """A request's Timestamp in ms; INVALID_ARGUMENT naming ``field`` if protobuf would not call it valid."""
    if not lim.PB_MIN_TIMESTAMP_S <= t.seconds <= lim.PB_MAX_TIMESTAMP_S or not 0 <= t.nanos <= lim.PB_MAX_NANOS:
        raise ValidationError(
            f"{field} is not a valid Timestamp (seconds {t.seconds}, nanos {t.nanos}): it must lie between "
            "0001-01-01 and 9999-12-31T23:59:59.999999999Z"
        )
    return ts_ms(t)


def to_ts(ms: int, into: Timestamp) -> None:
    ms = min(max(ms, lim.PB_MIN_TIMESTAMP_S * 1000), lim.MAX_INSTANT_MS)
    into.seconds, rem = divmod(ms, 1000)
    into.nanos = rem * 1_000_000


def to_dur(ms: int, into: Duration) -> None:
    sign = -1 if ms < 0 else 1
    secs, rem = divmod(min(abs(ms), lim.PB_MAX_DURATION_S * 1000), 1000)
    into.seconds, into.nanos = sign * secs, sign * rem * 1_000_000


def schedule_from_pb(spec: pb.JobSpec) -> Schedule:
    kind = spec.WhichOneof("schedule")
    if kind == "at":
        return At(instant_in(spec.at, "spec.at"))
    if kind == "after":
        return After(span_in(spec.after, "spec.after"))
    if kind == "every":
        return Every(span_in(spec.every, "spec.every"))
    if kind == "cron":
        return Cron(spec.cron.expression, spec.cron.timezone or "UTC")
    raise ValidationError("the job spec has no schedule: set one of at, after, every or cron")


def _retry_from_pb(spec: pb.JobSpec) -> RetryPolicy:
    if not spec.HasField("retry"):
        return _DEFAULT_RETRY
    r = spec.retry
    return RetryPolicy(
        max_attempts=r.max_attempts or _DEFAULT_RETRY.max_attempts,
        initial_backoff_ms=(
            span_in(r.initial_backoff, "spec.retry.initial_backoff")
            if r.HasField("initial_backoff")
            else _DEFAULT_RETRY.initial_backoff_ms
        ),
        max_backoff_ms=span_in(r.max_backoff, "spec.retry.max_backoff")
        if r.HasField("max_backoff")
        else _DEFAULT_RETRY.max_backoff_ms,
        multiplier=r.multiplier or _DEFAULT_RETRY.multiplier,
        jitter=r.jitter or _DEFAULT_RETRY.jitter,
    )


def _span(spec: pb.JobSpec, name: str, default: int) -> int:
    """Unset means the default; a span that is set is taken as it is (so an explicit 0 TTL is refused)."""
    return span_in(getattr(spec, name), f"spec.{name}") if spec.HasField(name) else default


_CONC = {
    pb.CONCURRENCY_POLICY_UNSPECIFIED: ConcurrencyPolicy.ALLOW,
    pb.CONCURRENCY_POLICY_ALLOW: ConcurrencyPolicy.ALLOW,
    pb.CONCURRENCY_POLICY_FORBID: ConcurrencyPolicy.FORBID,
    pb.CONCURRENCY_POLICY_REPLACE: ConcurrencyPolicy.REPLACE,
}
_CONC_PB = {v: k for k, v in _CONC.items() if k != pb.CONCURRENCY_POLICY_UNSPECIFIED}
_MISFIRE = {
    pb.MISFIRE_POLICY_UNSPECIFIED: MisfirePolicy.FIRE_ALL,
    pb.MISFIRE_POLICY_FIRE_ALL: MisfirePolicy.FIRE_ALL,
    pb.MISFIRE_POLICY_FIRE_ONCE: MisfirePolicy.FIRE_ONCE,
    pb.MISFIRE_POLICY_SKIP: MisfirePolicy.SKIP,
}
_MISFIRE_PB = {v: k for k, v in _MISFIRE.items() if k != pb.MISFIRE_POLICY_UNSPECIFIED}
JOB_STATUS_PB = {s: pb.JobStatus.Value(f"JOB_STATUS_{s.value}") for s in JobStatus}
JOB_STATUS_FROM_PB = {v: k for k, v in JOB_STATUS_PB.items()}
RUN_STATUS_PB = {s: pb.RunStatus.Value(f"RUN_STATUS_{s.value}") for s in RunStatus}
RUN_STATUS_FROM_PB = {v: k for k, v in RUN_STATUS_PB.items()}


def _enum(table: dict, value: int, field: str) -> object:
    if value not in table:
        raise ValidationError(f"{field} has an unknown value {value}")
    return table[value]


def spec_from_pb(spec: pb.JobSpec) -> JobSpec:
    return JobSpec(
        name=spec.name,
        schedule=schedule_from_pb(spec),
        queue=spec.queue or "default",
        type=spec.type or "shell",
        payload=bytes(spec.payload),
        retry=_retry_from_pb(spec),
        lease_ttl_ms=_span(spec, "lease_ttl", DEFAULT_LEASE_TTL_MS),
        timeout_ms=_span(spec, "timeout", 0),
        concurrency=_enum(_CONC, spec.concurrency, "concurrency"),  # type: ignore[arg-type]
        misfire=_enum(_MISFIRE, spec.misfire, "misfire"),  # type: ignore[arg-type]
        catchup_window_ms=_span(spec, "catchup_window", DEFAULT_CATCHUP_WINDOW_MS),
        history_limit=spec.history_limit or DEFAULT_HISTORY_LIMIT,
        history_ttl_ms=_span(spec, "history_ttl", DEFAULT_HISTORY_TTL_MS),
        failed_history_limit=spec.failed_history_limit or DEFAULT_FAILED_HISTORY_LIMIT,
        **extras_from_pb(spec),
    )


def extras_from_pb(spec: pb.JobSpec) -> dict[str, Any]:
    """The spec's fields of command format 5 that are set (none for most specs)."""
    out: dict[str, Any] = {}
    for name in ("start_time", "end_time"):
        if spec.HasField(name):
            out[name.replace("_time", "_ms")] = instant_in(getattr(spec, name), f"spec.{name}")
    for name in ("jitter", "pending_ttl"):
        if spec.HasField(name):
            out[f"{name}_ms"] = span_in(getattr(spec, name), f"spec.{name}")
    if spec.skip_dates:
        out["skip_dates"] = tuple(spec.skip_dates)
    if spec.skip_windows:
        out["skip_windows"] = tuple(
            TimeWindow(instant_in(w.start, f"spec.skip_windows[{i}].start"), instant_in(w.end, f"spec.skip_windows[{i}].end"))
            for i, w in enumerate(spec.skip_windows)
        )
    if spec.extra_crons:
        out["extra_crons"] = tuple(Cron(c.expression, c.timezone or "UTC") for c in spec.extra_crons)
    if spec.labels:
        out["labels"] = tuple(sorted(spec.labels.items()))
    if spec.notify:
        out["notify"] = tuple(NotifyRule(tuple(r.events), r.url, r.secret_name) for r in spec.notify)
    for name in ("max_runs", "pause_after_failures", "trigger_on_create", "priority", "concurrency_key", "concurrency_limit"):
        value = getattr(spec, name)
        if value:
            out[name] = value
    return out


def spec_to_pb(s: JobSpec, out: pb.JobSpec) -> None:
    out.name, out.queue, out.type, out.payload = s.name, s.queue, s.type, s.payload
    sch = s.schedule
    if isinstance(sch, At):
        to_ts(sch.at_ms, out.at)
    elif isinstance(sch, After):
        to_dur(sch.after_ms, out.after)
    elif isinstance(sch, Every):
        to_dur(sch.every_ms, out.every)
    elif isinstance(sch, Cron):
        out.cron.expression, out.cron.timezone = sch.expression, sch.timezone
    r = s.retry
    out.retry.max_attempts, out.retry.multiplier, out.retry.jitter = r.max_attempts, r.multiplier, r.jitter
    to_dur(r.initial_backoff_ms, out.retry.initial_backoff)
    to_dur(r.max_backoff_ms, out.retry.max_backoff)
    to_dur(s.lease_ttl_ms, out.lease_ttl)
    to_dur(s.timeout_ms, out.timeout)
    to_dur(s.catchup_window_ms, out.catchup_window)
    out.history_limit = s.history_limit
    out.failed_history_limit = s.failed_history_limit
    to_dur(s.history_ttl_ms, out.history_ttl)
    out.concurrency = _CONC_PB[s.concurrency]
    out.misfire = _MISFIRE_PB[s.misfire]
    if has_extras(s):
        _extras_to_pb(s, out)


def _extras_to_pb(s: JobSpec, out: pb.JobSpec) -> None:
    if s.start_ms:
        to_ts(s.start_ms, out.start_time)
    if s.end_ms:
        to_ts(s.end_ms, out.end_time)
    if s.jitter_ms:
        to_dur(s.jitter_ms, out.jitter)
    if s.pending_ttl_ms:
        to_dur(s.pending_ttl_ms, out.pending_ttl)
    out.skip_dates.extend(s.skip_dates)
    for w in s.skip_windows:
        window = out.skip_windows.add()
        to_ts(w.start_ms, window.start)
        to_ts(w.end_ms, window.end)
    for c in s.extra_crons:
        out.extra_crons.add(expression=c.expression, timezone=c.timezone)
    out.labels.update(dict(s.labels))
    for r in s.notify:
        out.notify.add(events=list(r.events), url=r.url, secret_name=r.secret_name)
    out.max_runs, out.pause_after_failures, out.trigger_on_create = s.max_runs, s.pause_after_failures, s.trigger_on_create
    out.priority, out.concurrency_key, out.concurrency_limit = s.priority, s.concurrency_key, s.concurrency_limit


def job_to_pb(j: Job, out: pb.Job | None = None) -> pb.Job:
    out = out if out is not None else pb.Job()
    out.job_id, out.status, out.idempotency_key, out.fire_count = (
        j.job_id,
        JOB_STATUS_PB[j.status],
        user_key(j.idempotency_key),  # as the client sent it, without the queue it is stored under
        j.fire_count,
    )
    spec_to_pb(j.spec, out.spec)
    if j.next_fire_ms is not None and j.status is JobStatus.ACTIVE:
        to_ts(j.next_fire_ms, out.next_fire_time)
    for instant in job_upcoming(j):
        to_ts(instant, out.upcoming.add())
    to_ts(j.created_ms, out.created_at)
    to_ts(j.updated_ms, out.updated_at)
    info = j.info
    if info is not NO_INFO:
        out.success_count, out.failure_count, out.skipped_count = info.success_count, info.failure_count, info.skipped_count
        out.consecutive_failures, out.last_error = info.consecutive_failures, info.last_error
        if info.last_success_ms:
            to_ts(info.last_success_ms, out.last_success_time)
        if info.last_failure_ms:
            to_ts(info.last_failure_ms, out.last_failure_time)
        if j.status is JobStatus.PAUSED:
            out.pause_note = info.pause_note
            if info.paused_until_ms:
                to_ts(info.paused_until_ms, out.paused_until)
    return out


_RUN_TIMES = (
    ("fired_ms", "fired_at"),
    ("lease_expires_ms", "lease_expires_at"),
    ("started_ms", "started_at"),
    ("finished_ms", "finished_at"),
    ("skipped_until_ms", "skipped_until"),
)


def run_to_pb(r: Run, out: pb.Run | None = None, labels: dict[str, str] | None = None) -> pb.Run:
    """``labels``: its job's (a run carries them)."""
    out = out if out is not None else pb.Run()
    if labels:
        out.labels.update(labels)
    out.run_id, out.job_id, out.queue = r.run_id, r.job_id, r.queue
    out.attempt, out.status = r.attempt, RUN_STATUS_PB[r.status]
    out.executor_id, out.lease_id, out.fencing_token = r.executor_id, r.lease_id, r.fencing_token
    out.result, out.error, out.log_uri = r.result, r.error, r.log_uri
    out.manual, out.skipped_count, out.cancel_requested = r.manual, r.skipped_count, r.cancel_requested
    to_ts(r.scheduled_ms, out.scheduled_time)
    to_ts(r.not_before_ms, out.not_before)
    for attr, name in _RUN_TIMES:
        ms = getattr(r, attr)
        if ms:
            to_ts(ms, getattr(out, name))
    if r.attempts_raw:
        for a in r.attempts:
            attempt_to_pb(a, out.attempts.add())
        out.attempts_dropped = r.attempts_dropped
    if r.extra:
        extra = dict(r.extra)
        out.backfill = bool(extra.get(RunExtra.BACKFILL))
        out.payload = extra.get(RunExtra.PAYLOAD, b"")
    return out


_OUTCOME_PB = {
    "": pb.ATTEMPT_OUTCOME_UNSPECIFIED,
    AttemptOutcome.SUCCEEDED.value: pb.ATTEMPT_OUTCOME_SUCCEEDED,
    AttemptOutcome.FAILED.value: pb.ATTEMPT_OUTCOME_FAILED,
    AttemptOutcome.LEASE_EXPIRED.value: pb.ATTEMPT_OUTCOME_LEASE_EXPIRED,
    AttemptOutcome.CANCELLED.value: pb.ATTEMPT_OUTCOME_CANCELLED,
}


def attempt_to_pb(a: Attempt, out: pb.Attempt) -> pb.Attempt:
    out.attempt, out.executor_id, out.lease_id, out.fencing_token = a.attempt, a.executor_id, a.lease_id, a.fencing_token
    out.outcome, out.error, out.log_uri = _OUTCOME_PB.get(a.outcome, pb.ATTEMPT_OUTCOME_UNSPECIFIED), a.error, a.log_uri
    to_ts(a.leased_at_ms, out.leased_at)
    if a.finished_at_ms:
        to_ts(a.finished_at_ms, out.finished_at)
    if a.heartbeat_details:
        out.heartbeat_details = a.heartbeat_details
        to_ts(a.heartbeat_at_ms, out.heartbeat_at)
    return out


def explanation_to_pb(e: Explanation) -> pb.RunExplanation:
    out = pb.RunExplanation(run_id=e.run_id, steps_dropped=e.steps_dropped)
    for step in e.steps:
        entry = out.steps.add(kind=step.kind, detail=step.detail, node_id=step.node_id)
        to_ts(step.at_ms, entry.at)
    run_to_pb(e.run, out.run)
    return out


def run_output_to_pb(o: RunOutput) -> pb.RunOutput:
    return pb.RunOutput(
        run_id=o.run_id,
        attempt=o.attempt,
        log=o.log,
        result=o.result,
        log_uri=o.log_uri,
        missing_reason=o.missing_reason,
        live=o.live,
        next_offset=o.next_offset,
        size=o.size,
        fencing_token=o.fencing_token,
        note=o.note,
    )
