"""Job handlers: create, update, pause, resume, delete, trigger; and the due index every job change keeps.

* A job's ``cursor`` only grows: every instant at or before it was fired or
  skipped (``fire``). A new or rescheduled job is anchored at the machine's
  ``now``; its first instant is after the cursor.
* An ACTIVE job with a next instant has a ``DUE`` row (``index_due``):
  what the leader reads to fire, never a scan of all jobs.
* An idempotency key maps to the first job created under it, with its spec's
  fingerprint: the same key and spec again answers that job, another spec
  is ``AlreadyExists``.
* Delete is soft: the job stays readable until retention purges it
  (``retention``); its PENDING runs are cancelled, its LEASED runs asked to
  stop.
"""

from __future__ import annotations

from typing import Any

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import (
    RANKED_FORMAT,
    Job,
    JobSpec,
    JobStatus,
    Run,
    RunExtra,
    RunStatus,
    manual_run_id,
    with_extra,
)
from raftsched.cluster.domain.results import AlreadyExists, FailedPrecondition, NotFound, Ok, ResourceExhausted, Result
from raftsched.cluster.domain.schedule import first_fire, job_schedule, next_fire
from raftsched.cluster.domain.schedule.firing import skip_through
from raftsched.cluster.domain.spec_codec import spec_fingerprint
from raftsched.cluster.fsm import job_info, keys, layout, retention, runs
from raftsched.cluster.fsm.due import index_due, unindex_due
from raftsched.cluster.fsm.store import Table
from raftsched.cluster.fsm.tx import Tx

# ------------------------------------------------------------ helpers


def idempotency(tx: Tx, key: str) -> tuple[str, str] | None:
    """(job_id, spec fingerprint) stored under an idempotency key, or None."""
    raw = tx.get(Table.IDEMPOTENCY, keys.idem_key(key))
    if raw is None:
        return None
    stored, job_id, fingerprint = layout.decode_idem(raw)
    return (job_id, fingerprint) if stored == key else None


def _job_for_change(tx: Tx, job_id: str) -> Job | NotFound:
    job = tx.job(job_id)
    if job is None:
        return NotFound(f"job {job_id} not found")
    return job


def _pending_runs(tx: Tx, job: Job) -> list[Run]:
    found = [runs.indexed_run(tx, run_id) for run_id in runs.active_ids(tx, job.job_id)]
    return [run for run in found if run.status is RunStatus.PENDING]


def _active_runs(tx: Tx, job: Job) -> list[Run]:
    return [runs.indexed_run(tx, run_id) for run_id in runs.active_ids(tx, job.job_id)]


def _grant_terms(spec: JobSpec) -> tuple[Any, ...]:
    """What a job's spec says about how its active runs are indexed for grants (``runs.index_live``)."""
    return (spec.type, spec.priority, spec.concurrency_key, spec.concurrency_limit, spec.pending_ttl_ms)


def _skip_paused(tx: Tx, job: Job, through_ms: int) -> None:
    """Instants that came due while the job was paused (through ``through_ms``) are skipped, with a record."""
    first = job.next_fire_ms
    assert first is not None
    reason = "the job was paused when this instant came due"
    schedule = job_schedule(job.spec, tx.mem.cluster_format)
    skip, nxt = skip_through(schedule, job.anchor_ms, first, through_ms, reason)
    runs.record_skip(tx, job, skip)
    job.cursor_ms = max(job.cursor_ms, skip.last_ms)
    job.next_fire_ms = nxt


# ------------------------------------------------------------ handlers


def create_job(tx: Tx, cmd: c.CreateJob) -> Result:
    # the spec's fingerprint is read only to compare with a kept one (a JSON encoding and a SHA-256: not worth it
    # for the common create, with neither an idempotency key nor a job under its id)
    fingerprint = cmd.fingerprint or (spec_fingerprint(cmd.spec) if cmd.idempotency_key else "")
    if cmd.idempotency_key:
        known = idempotency(tx, cmd.idempotency_key)
        if known is not None:
            known_id, known_fp = known
            if known_fp == fingerprint:
                return Ok(tx.job(known_id))
            return AlreadyExists(
                f"idempotency key {cmd.idempotency_key!r} was already used for job {known_id} with a "
                "different spec; use a new key for a new job"
            )
    existing = tx.job(cmd.job_id)
    if existing is not None:  # the same proposal applied twice
        if spec_fingerprint(existing.spec) == (fingerprint or spec_fingerprint(cmd.spec)):
            return Ok(existing)
        return AlreadyExists(f"job {cmd.job_id} already exists")
    mem = tx.mem
    kept = sum(mem.job_counts.values())
    if cmd.max_jobs and kept >= cmd.max_jobs:
        return ResourceExhausted(
            f"the cluster keeps {kept} jobs, its limit [limits] max_jobs = {cmd.max_jobs} "
            "(deleted jobs count until purged): delete jobs or raise max_jobs"
        )
    anchor = mem.now_ms
    nxt = first_fire(job_schedule(cmd.spec, mem.cluster_format), anchor)
    cursor = anchor if nxt is None else min(anchor, nxt - 1)
    status = JobStatus.ACTIVE if nxt is not None else JobStatus.COMPLETED
    job = Job(cmd.job_id, cmd.spec, status, anchor, cursor, nxt, anchor, anchor, cmd.idempotency_key)
    tx.add_job(job)
    mem.job_counts[job.status] += 1
    if cmd.idempotency_key:
        key = cmd.idempotency_key
        tx.put(Table.IDEMPOTENCY, keys.idem_key(key), layout.encode_idem(key, job.job_id, fingerprint))
    index_due(tx, job)
    if cmd.spec.trigger_on_create and job_info.kept(tx):
        run = runs.new_run(tx, job, manual_run_id(job.job_id, tx.index, tx.pos), mem.now_ms, manual=True)
        runs.step(tx, run, "triggered", f"a run on create (trigger_on_create, entry {tx.index})")
    return Ok(job)


def update_job(tx: Tx, cmd: c.UpdateJob) -> Result:
    job = _job_for_change(tx, cmd.job_id)
    if isinstance(job, NotFound):
        return job
    if job.status is JobStatus.DELETED:
        return FailedPrecondition(f"job {job.job_id} is deleted; create a new job instead")
    now = tx.mem.now_ms
    unindex_due(tx, job)
    old = job_schedule(job.spec, tx.mem.cluster_format)
    schedule = job_schedule(cmd.spec, tx.mem.cluster_format)
    if old != schedule:
        job.anchor_ms = now
        nxt = first_fire(schedule, job.anchor_ms)
        if nxt is not None and nxt <= job.cursor_ms:
            nxt = next_fire(schedule, job.cursor_ms, job.anchor_ms)
        job.next_fire_ms = nxt
        if job.status is JobStatus.COMPLETED and nxt is not None:
            runs.set_job_status(tx, job, JobStatus.ACTIVE)
        elif job.status is JobStatus.ACTIVE and nxt is None:
            runs.set_job_status(tx, job, JobStatus.COMPLETED)
    if tx.mem.cluster_format >= RANKED_FORMAT and _grant_terms(job.spec) != _grant_terms(cmd.spec):
        # the active runs are indexed by how their job's runs are granted: move them to the new terms, as a
        # replica that restarts indexes them (``JobStateMachine.load``)
        moved = _active_runs(tx, job)
        for run in moved:
            runs.unindex_live(tx, run)
        job.spec = cmd.spec
        for run in moved:
            runs.index_live(tx, run)
    else:
        retyped = _pending_runs(tx, job) if job.spec.type != cmd.spec.type else []
        for run in retyped:  # PENDING runs are indexed by their job's type: move them to the new one
            runs.unindex_pending(tx, run)
        job.spec = cmd.spec
        for run in retyped:
            runs.index_pending(tx, run)
    job.updated_ms = now
    index_due(tx, job)
    job_info.load(tx, job)
    return Ok(job)


def pause_job(tx: Tx, cmd: c.PauseJob) -> Result:
    job = _job_for_change(tx, cmd.job_id)
    if isinstance(job, NotFound):
        return job
    if job.status is JobStatus.PAUSED and not (cmd.note or cmd.until_ms):
        job_info.load(tx, job)
        return Ok(job)
    if job.status not in (JobStatus.ACTIVE, JobStatus.PAUSED):
        return FailedPrecondition(f"job {job.job_id} is {job.status.value}; only an ACTIVE job can be paused")
    pause(tx, job, cmd.note, cmd.until_ms)
    return Ok(job)


def pause(tx: Tx, job: Job, note: str, until_ms: int) -> None:
    """The job pauses (or stays paused with a new note and end), until ``until_ms`` (0: until resumed)."""
    unindex_due(tx, job)
    if job.status is not JobStatus.PAUSED:
        runs.set_job_status(tx, job, JobStatus.PAUSED)
    job.updated_ms = tx.mem.now_ms
    if job_info.kept(tx):
        info = job_info.read(tx, job.job_id)
        job_info.write(tx, job.job_id, info._replace(pause_note=note, paused_until_ms=until_ms), job)
    index_due(tx, job)


def resume_job(tx: Tx, cmd: c.ResumeJob) -> Result:
    job = _job_for_change(tx, cmd.job_id)
    if isinstance(job, NotFound):
        return job
    if job.status is JobStatus.ACTIVE:
        job_info.load(tx, job)
        return Ok(job)
    if job.status is not JobStatus.PAUSED:
        return FailedPrecondition(f"job {job.job_id} is {job.status.value}; only a PAUSED job can be resumed")
    resume_paused(tx, job)
    return Ok(job)


def resume_paused(tx: Tx, job: Job, until_ms: int = 0) -> None:
    """A PAUSED job fires again from now (or from ``until_ms``, the end of its pause, when that came first): the
    instants that came due while it was paused are skipped."""
    unindex_due(tx, job)
    now = tx.mem.now_ms
    runs.set_job_status(tx, job, JobStatus.ACTIVE)
    job.updated_ms = now
    info = job_info.read(tx, job.job_id)
    if info.pause_note or info.paused_until_ms:
        job_info.write(tx, job.job_id, info._replace(pause_note="", paused_until_ms=0), job)
    else:
        job.info = info
    through = min(now, until_ms - 1) if until_ms else now
    if job.next_fire_ms is not None and job.next_fire_ms <= through:
        _skip_paused(tx, job, through)
    if job.next_fire_ms is None:
        runs.set_job_status(tx, job, JobStatus.COMPLETED)
    index_due(tx, job)


def delete_job(tx: Tx, cmd: c.DeleteJob) -> Result:
    job = _job_for_change(tx, cmd.job_id)
    if isinstance(job, NotFound):
        return job
    if job.status is JobStatus.DELETED:
        return Ok(job)
    now = tx.mem.now_ms
    unindex_due(tx, job)
    runs.set_job_status(tx, job, JobStatus.DELETED)
    job.updated_ms = now
    retention.schedule_purge(tx, job, now + job.spec.history_ttl_ms)
    for run_id in runs.active_ids(tx, job.job_id):
        run = runs.indexed_run(tx, run_id)
        if run.status is RunStatus.PENDING:
            runs.finish(tx, run, RunStatus.CANCELLED, "the job was deleted")
        elif not run.cancel_requested:  # LEASED: its executor learns it at the next renewal
            runs.request_cancel(tx, run, "the job was deleted")
    job_info.load(tx, job)
    return Ok(job)


def trigger_job(tx: Tx, cmd: c.TriggerJob) -> Result:
    job = _job_for_change(tx, cmd.job_id)
    if isinstance(job, NotFound):
        return job
    if job.status is JobStatus.DELETED:
        return FailedPrecondition(f"job {job.job_id} is deleted; it cannot be triggered")
    if runs.pending_full(tx, cmd.max_pending):
        return ResourceExhausted(runs.pending_full_message(tx, cmd.max_pending))
    run = runs.new_run(tx, job, manual_run_id(job.job_id, tx.index, tx.pos), tx.mem.now_ms, manual=True)
    if cmd.payload:
        with_extra(run, RunExtra.PAYLOAD, cmd.payload)
    runs.step(tx, run, "triggered", f"a manual run requested with TriggerJob (entry {tx.index})")
    return Ok(run)
