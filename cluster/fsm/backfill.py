"""The ``BackfillJob`` handler (command format 5): runs for the past instants of a range that have none.

The instants are ``raftsched.cluster.domain.schedule.backfill``'s (the proposer's dry run computes the same);
an instant has a run when its own run exists and is not a SKIPPED record, or its backfilled run exists. Each
new run is PENDING and leasable at once, carries ``backfill`` (``RunExtra.BACKFILL``) and explains itself; a
retried backfill makes only the runs still missing.
"""

from __future__ import annotations

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import JobStatus, RunExtra, RunStatus, run_id_for, with_extra
from raftsched.cluster.domain.results import FailedPrecondition, InvalidArgument, NotFound, Ok, ResourceExhausted, Result
from raftsched.cluster.domain.schedule import job_schedule
from raftsched.cluster.domain.schedule.backfill import BackfillTooLarge, backfill_instants, backfill_run_id
from raftsched.cluster.fsm import runs
from raftsched.cluster.fsm.tx import Tx


def backfill(tx: Tx, cmd: c.BackfillJob) -> Result:
    job = tx.job(cmd.job_id)
    if job is None:
        return NotFound(f"job {cmd.job_id} not found")
    if job.status is JobStatus.DELETED:
        return FailedPrecondition(f"job {job.job_id} is deleted; it cannot be backfilled")
    if cmd.end_ms <= cmd.start_ms:
        return InvalidArgument("end_time is not after start_time: give a range [start_time, end_time)")

    def has_run(instant: int) -> bool:
        own = tx.run(run_id_for(job.job_id, instant))
        return (own is not None and own.status is not RunStatus.SKIPPED) or tx.run(
            backfill_run_id(job.job_id, instant)
        ) is not None

    schedule = job_schedule(job.spec, tx.mem.cluster_format)
    try:
        instants = backfill_instants(schedule, job.anchor_ms, job.cursor_ms, cmd.start_ms, cmd.end_ms, has_run)
    except BackfillTooLarge as exc:
        return InvalidArgument(str(exc))
    pending = tx.mem.run_counts[RunStatus.PENDING]
    if cmd.max_pending and pending + len(instants) > cmd.max_pending:
        return ResourceExhausted(
            f"backfilling {len(instants)} runs would take the cluster past its limit [limits] max_pending_runs = "
            f"{cmd.max_pending} ({pending} PENDING now): backfill a shorter range, or raise max_pending_runs"
        )
    made = []
    for instant in instants:
        run = runs.new_run(tx, job, backfill_run_id(job.job_id, instant), instant, not_before_ms=max(tx.mem.now_ms, instant))
        with_extra(run, RunExtra.BACKFILL, True)
        runs.step(tx, run, "backfilled", f"made by BackfillJob (entry {tx.index}) for a past instant that had no run")
        made.append(run)
    return Ok((instants, made))
