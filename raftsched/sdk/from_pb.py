"""The cluster's protobuf answers as the SDK's plain objects (``raftsched.sdk.objects``): the one place that reads them.

Unset Timestamps become ``None``; enum values their names without the enum's
prefix (``RUN_STATUS_SUCCEEDED`` -> ``"SUCCEEDED"``), a value this SDK does
not know its number as text; ``JobSpec`` fields without an attribute go to
``extra`` as JSON values, so a newer cluster's fields are still readable.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from google.protobuf import json_format

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.sdk import codec
from raftsched.sdk.durations import EPOCH
from raftsched.sdk.objects import (
    Attempt,
    Backfill,
    ClusterStatus,
    Explanation,
    ExplanationStep,
    Identity,
    Job,
    JobSpec,
    Member,
    RetryPolicy,
    Run,
    RunEvent,
    RunOutput,
    Schedule,
    ScheduledInstant,
)

#: the JobSpec fields ``JobSpec`` has attributes for (the others go to ``extra``)
_KNOWN_SPEC_FIELDS = frozenset(
    {"name", "queue", "type", "payload", "at", "after", "every", "cron", "retry", "lease_ttl", "timeout", "concurrency",
     "misfire", "catchup_window", "history_limit", "history_ttl", "failed_history_limit"}
)  # fmt: skip


def instant(ts: Any) -> dt.datetime | None:
    """A Timestamp as an aware UTC datetime; None when unset."""
    if not ts.seconds and not ts.nanos:
        return None
    return EPOCH + dt.timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)


def span(d: Any) -> dt.timedelta:
    """A Duration as a ``timedelta``."""
    return dt.timedelta(seconds=d.seconds, microseconds=d.nanos // 1000)


def _span_if(msg: Any, name: str) -> dt.timedelta | None:
    return span(getattr(msg, name)) if msg.HasField(name) else None


def enum_name(enum_type: Any, value: int, prefix: str) -> str:
    """``RUN_STATUS_FAILED`` as ``FAILED``; a value this code does not know as its number."""
    try:
        return str(enum_type.Name(value)).removeprefix(prefix)
    except ValueError:
        return str(value)


def schedule(spec: pb.JobSpec) -> Schedule:
    """A spec's schedule."""
    kind = spec.WhichOneof("schedule") or ""
    if kind == "every":
        return Schedule("every", every=span(spec.every))
    if kind == "after":
        return Schedule("after", after=span(spec.after))
    if kind == "at":
        return Schedule("at", at=instant(spec.at))
    if kind == "cron":
        return Schedule("cron", cron=spec.cron.expression, tz=spec.cron.timezone or "UTC")
    return Schedule(kind)


def job_spec(spec: pb.JobSpec) -> JobSpec:
    """A JobSpec as ``JobSpec``."""
    retry = None
    if spec.HasField("retry"):
        r = spec.retry
        retry = RetryPolicy(r.max_attempts, span(r.initial_backoff), span(r.max_backoff), r.multiplier, r.jitter)
    everything = json_format.MessageToDict(spec, preserving_proto_field_name=True)
    return JobSpec(
        name=spec.name,
        queue=spec.queue,
        type=spec.type,
        payload_bytes=bytes(spec.payload),
        schedule=schedule(spec),
        retry=retry,
        lease_ttl=_span_if(spec, "lease_ttl"),
        timeout=_span_if(spec, "timeout") or None,  # zero: no timeout
        concurrency=enum_name(pb.ConcurrencyPolicy, spec.concurrency, "CONCURRENCY_POLICY_"),
        misfire=enum_name(pb.MisfirePolicy, spec.misfire, "MISFIRE_POLICY_"),
        catchup_window=_span_if(spec, "catchup_window"),
        history_limit=spec.history_limit,
        history_ttl=_span_if(spec, "history_ttl"),
        failed_history_limit=spec.failed_history_limit,
        extra={k: v for k, v in everything.items() if k not in _KNOWN_SPEC_FIELDS},
    )


def job(j: pb.Job) -> Job:
    """A Job as ``Job``."""
    return Job(
        id=j.job_id,
        spec=job_spec(j.spec),
        status=enum_name(pb.JobStatus, j.status, "JOB_STATUS_"),
        next_fire_time=instant(j.next_fire_time),
        created_at=instant(j.created_at),
        updated_at=instant(j.updated_at),
        idempotency_key=j.idempotency_key,
        fire_count=j.fire_count,
        upcoming=tuple(t for t in (instant(ts) for ts in j.upcoming) if t is not None),
        pause_note=j.pause_note,
        paused_until=instant(j.paused_until),
        success_count=j.success_count,
        failure_count=j.failure_count,
        skipped_count=j.skipped_count,
        consecutive_failures=j.consecutive_failures,
        last_success_time=instant(j.last_success_time),
        last_failure_time=instant(j.last_failure_time),
        last_error=j.last_error,
    )


def attempt(a: pb.Attempt) -> Attempt:
    """An Attempt, its heartbeat details decoded."""
    outcome = enum_name(pb.AttemptOutcome, a.outcome, "ATTEMPT_OUTCOME_") if a.outcome else None
    return Attempt(
        attempt=a.attempt,
        executor_id=a.executor_id,
        lease_id=a.lease_id,
        fencing_token=a.fencing_token,
        leased_at=instant(a.leased_at),
        finished_at=instant(a.finished_at),
        outcome=outcome,
        error=a.error,
        log_uri=a.log_uri,
        heartbeat=codec.decode(bytes(a.heartbeat_details)),
        heartbeat_at=instant(a.heartbeat_at),
    )


def run(r: pb.Run) -> Run:
    """A Run as ``Run``, with its attempts."""
    return Run(
        id=r.run_id,
        job_id=r.job_id,
        status=enum_name(pb.RunStatus, r.status, "RUN_STATUS_"),
        attempt=r.attempt,
        scheduled_time=instant(r.scheduled_time),
        fired_at=instant(r.fired_at),
        queue=r.queue,
        executor_id=r.executor_id,
        lease_id=r.lease_id,
        fencing_token=r.fencing_token,
        lease_expires_at=instant(r.lease_expires_at),
        started_at=instant(r.started_at),
        finished_at=instant(r.finished_at),
        result_bytes=bytes(r.result),
        error=r.error,
        log_uri=r.log_uri,
        manual=r.manual,
        cancel_requested=r.cancel_requested,
        not_before=instant(r.not_before),
        skipped_count=r.skipped_count,
        skipped_until=instant(r.skipped_until),
        attempts=tuple(attempt(a) for a in r.attempts),
        attempts_dropped=r.attempts_dropped,
        labels=dict(r.labels),
        backfill=r.backfill,
    )


def backfill(b: pb.BackfillJobResponse) -> Backfill:
    """A BackfillJobResponse as ``Backfill``."""
    return Backfill(tuple(t for t in (instant(ts) for ts in b.instants) if t is not None), tuple(run(r) for r in b.runs))


def explanation(e: pb.RunExplanation) -> Explanation:
    """A RunExplanation as ``Explanation``."""
    steps = tuple(ExplanationStep(instant(s.at), s.kind, s.detail, s.node_id) for s in e.steps)
    return Explanation(e.run_id, steps, run(e.run), e.steps_dropped)


def run_output(o: pb.RunOutput) -> RunOutput:
    """A RunOutput as ``RunOutput``."""
    return RunOutput(
        run_id=o.run_id,
        attempt=o.attempt,
        log=bytes(o.log),
        result_bytes=bytes(o.result),
        log_uri=o.log_uri,
        missing_reason=o.missing_reason,
        live=o.live,
        next_offset=o.next_offset,
        size=o.size,
        fencing_token=o.fencing_token,
        note=o.note,
    )


def run_event(e: pb.RunEvent) -> RunEvent:
    """A RunEvent as ``RunEvent``."""
    return RunEvent(e.kind, run(e.run), instant(e.observed_at))


def member(m: pb.Member) -> Member:
    """A Member (its clock offset only when measured)."""
    return Member(
        id=m.id,
        raft_address=m.raft_address,
        grpc_address=m.grpc_address,
        role=enum_name(pb.MemberRole, m.role, "MEMBER_ROLE_"),
        reachable=m.reachable,
        version=m.version,
        http_address=m.http_address,
        clock_offset=span(m.clock_offset) if m.clock_measured else None,
        clock_ok=m.clock_ok,
        storage_ok=m.storage_ok,
        clock_measured=m.clock_measured,
        unfit_reason=m.unfit_reason,
    )


def identity(me: pb.WhoAmIResponse) -> Identity:
    return Identity(me.tokens_required, me.name, tuple(me.roles), tuple(me.queues), tuple(me.types))


def cluster_status(s: pb.ClusterStatus) -> ClusterStatus:
    """A ClusterStatus, its run counts by status name."""
    counts = {f.name.upper(): getattr(s.runs, f.name) for f in s.runs.DESCRIPTOR.fields}
    return ClusterStatus(
        self_id=s.self_id,
        leader_id=s.leader_id,
        members=tuple(member(m) for m in s.members),
        term=s.term,
        commit_index=s.commit_index,
        applied_index=s.applied_index,
        last_snapshot_index=s.last_snapshot_index,
        has_quorum=s.has_quorum,
        runs=counts,
        jobs=s.jobs,
        pending_by_queue=dict(s.pending_by_queue),
        command_format=s.command_format,
        membership_change=s.membership_change,
    )


def preview(resp: pb.PreviewScheduleResponse) -> list[ScheduledInstant]:
    """PreviewSchedule's instants with their notes."""
    notes = list(resp.notes)
    out = []
    for i, ts in enumerate(resp.times):
        when = instant(ts)
        if when is not None:
            out.append(ScheduledInstant(when, notes[i] if i < len(notes) else ""))
    return out
