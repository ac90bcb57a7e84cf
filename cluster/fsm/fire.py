"""The ``Fire`` handler: exactly-once firing of many jobs' due instants in one command.

Each item is ``(job_id, expected next_fire_ms)``: it applies only while the
job is ACTIVE and its next instant is still the expected one, so a fire
proposed twice (two leaders, a retried proposal) creates its runs once; a
stale item changes nothing and is counted. For a live item, the misfire
rules (``raftsched.cluster.domain.schedule.firing.plan``) decide each due instant:
fired (a PENDING run named by the job and instant), or skipped with a
record (consecutive skips for one reason are one record). Concurrency
FORBID skips an instant while a run is active, REPLACE cancels (or asks to
stop) the active ones; a cluster at its ``max_pending`` skips. The job's
cursor moves past every decided instant; a job with no next instant
completes. Cron instants follow the rules of the cluster's command format
(``raftsched.cluster.domain.schedule.legacy``), switched at the same entry on every node.
"""

from __future__ import annotations

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import ConcurrencyPolicy, Job, JobStatus, RunStatus, run_id_for
from raftsched.cluster.domain.results import FireReport, Ok, Result
from raftsched.cluster.domain.run_history import fired_detail
from raftsched.cluster.domain.schedule import job_schedule
from raftsched.cluster.domain.schedule.exceptions import jitter_ms, skip_reason
from raftsched.cluster.domain.schedule.firing import FireAt, Skip, Window, plan
from raftsched.cluster.fsm import job_info, jobs, runs
from raftsched.cluster.fsm.tx import Tx


def fire(tx: Tx, cmd: c.Fire) -> Result:
    created: list[str] = []
    skipped = stale = 0
    for job_id, expected in cmd.items:
        job = tx.job(job_id)
        if job is not None and job.status is JobStatus.PAUSED and _resume_due(tx, job, expected, cmd):
            jobs.resume_paused(tx, job, expected)
            if (
                job.status is not JobStatus.ACTIVE
                or job.next_fire_ms is None
                or job.next_fire_ms > tx.mem.now_ms + cmd.lookahead_ms
            ):
                continue
            expected = job.next_fire_ms
        if job is None or job.status is not JobStatus.ACTIVE or job.next_fire_ms != expected:
            stale += 1
            continue
        skipped += _fire_job(tx, job, cmd, created)
    return Ok(FireReport(created, skipped, stale))  # FireReport is frozen: build it once


def _resume_due(tx: Tx, job: Job, expected: int, cmd: c.Fire) -> bool:
    """Whether the item is a paused job's own instant to resume (``PauseJob.until``), and it has come."""
    info = job_info.load(tx, job)
    return bool(info.paused_until_ms) and info.paused_until_ms == expected and expected <= tx.mem.now_ms + cmd.lookahead_ms


def _fire_job(tx: Tx, job: Job, cmd: c.Fire, created: list[str]) -> int:
    """Fire or skip the job's due instants; append the new run ids; return how many were skipped."""
    spec = job.spec
    now = tx.mem.now_ms
    window = Window(now, cmd.lookahead_ms, cmd.misfire_threshold_ms, spec.catchup_window_ms, spec.misfire)
    assert job.next_fire_ms is not None
    jobs.unindex_due(tx, job)
    decisions, nxt = plan(job_schedule(spec, tx.mem.cluster_format), job.anchor_ms, job.next_fire_ms, window)
    pending_skip: Skip | None = None
    skipped = 0
    #: how many more runs its schedule may fire (``max_runs``; -1: no limit)
    room = spec.max_runs - job_info.read(tx, job.job_id).scheduled_runs if spec.max_runs else -1
    fired = 0
    excepted = bool(spec.skip_dates or spec.skip_windows)
    for d in decisions:
        if room >= 0 and fired >= room:  # its last run fired: the rest never will
            nxt = None
            break
        if excepted and isinstance(d, FireAt):
            why = skip_reason(spec, d.instant_ms)
            if why:
                d = Skip(d.instant_ms, d.instant_ms, 1, why)
        if isinstance(d, FireAt) and spec.concurrency is ConcurrencyPolicy.FORBID and runs.has_active(tx, job.job_id):
            d = Skip(d.instant_ms, d.instant_ms, 1, "the previous run is still active (concurrency FORBID)")
        if isinstance(d, FireAt) and runs.pending_full(tx, cmd.max_pending):
            d = Skip(d.instant_ms, d.instant_ms, 1, runs.pending_full_message(tx, cmd.max_pending))
        if isinstance(d, Skip):
            skipped += d.count
            if pending_skip is not None and pending_skip.reason == d.reason:
                pending_skip = Skip(pending_skip.instant_ms, d.last_ms, pending_skip.count + d.count, d.reason)
            else:
                if pending_skip is not None:
                    runs.record_skip(tx, job, pending_skip)
                pending_skip = d
            job.cursor_ms = d.last_ms
            continue
        if pending_skip is not None:
            runs.record_skip(tx, job, pending_skip)
            pending_skip = None
        if spec.concurrency is ConcurrencyPolicy.REPLACE:
            _replace_active(tx, job)
        offset = jitter_ms(job.job_id, d.instant_ms, spec.jitter_ms) if spec.jitter_ms else 0
        run = runs.new_run(tx, job, run_id_for(job.job_id, d.instant_ms), d.instant_ms, not_before_ms=d.instant_ms + offset)
        runs.step(tx, run, "fired", fired_detail(spec, d.instant_ms, now, cmd, tx.index, offset), cmd.node_id)
        created.append(run.run_id)
        job.fire_count += 1
        fired += 1
        job.cursor_ms = d.instant_ms
    if pending_skip is not None:
        runs.record_skip(tx, job, pending_skip)
    if spec.max_runs:
        job_info.fired(tx, job, fired)
        if fired >= room:
            nxt = None
    job.next_fire_ms = nxt
    if nxt is None:
        runs.set_job_status(tx, job, JobStatus.COMPLETED)
        job.updated_ms = now
    jobs.index_due(tx, job)
    return skipped


def _replace_active(tx: Tx, job: Job) -> None:
    for run_id in runs.active_ids(tx, job.job_id):
        run = runs.indexed_run(tx, run_id)
        if run.status is RunStatus.PENDING:
            runs.finish(tx, run, RunStatus.CANCELLED, "replaced by a newer run (concurrency REPLACE)")
        elif not run.cancel_requested:
            runs.request_cancel(tx, run, "a newer run replaces it (concurrency REPLACE)")
