"""Manual recovery of a run: ``RetryRun`` (command format 3).

A DEAD_LETTER, FAILED or CANCELLED run becomes PENDING again, leasable at
once, with a fresh attempt budget: its attempts so far stay in its history
and its attempt numbers go on (attempt 4 follows attempt 3, so each attempt's
output stays its own), but ``max_attempts`` counts from here
(``Run.budget_base``). It leaves the retention indexes (no longer finished)
and its explanation records the manual retry and who asked. Anything else —
PENDING, LEASED, SUCCEEDED, SKIPPED, or a run of a deleted job — is
``FailedPrecondition`` naming the status.
"""

from __future__ import annotations

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import JobStatus, RunStatus
from raftsched.cluster.domain.results import FailedPrecondition, NotFound, Ok, ResourceExhausted, Result
from raftsched.cluster.domain.state_base import StateBase

RETRYABLE = frozenset({RunStatus.DEAD_LETTER, RunStatus.FAILED, RunStatus.CANCELLED})


class RecoveryRules(StateBase):
    """Mixed into ``JobStateMachine``."""

    @c.handles(c.RetryRun)
    def _retry_run(self, cmd: c.RetryRun, index: int) -> Result:
        run = self.uow.run(cmd.run_id)
        if run is None:
            return NotFound(f"run {cmd.run_id} not found")
        if run.status not in RETRYABLE:
            return FailedPrecondition(
                f"run {run.run_id} is {run.status.value}; only DEAD_LETTER, FAILED or CANCELLED runs can be retried"
            )
        job = self.uow.job(run.job_id)
        if job is None or job.status is JobStatus.DELETED:
            return FailedPrecondition(f"run {run.run_id}'s job {run.job_id} is deleted; its runs cannot be retried")
        pending = self.run_counts[RunStatus.PENDING]
        if cmd.max_pending and pending >= cmd.max_pending:
            return ResourceExhausted(
                f"the cluster holds {pending} PENDING runs, its limit [limits] max_pending_runs = {cmd.max_pending}: "
                "add executors or raise max_pending_runs, then retry"
            )
        was = run.status
        self._unretain(run)
        self._set_status(run, RunStatus.PENDING)
        run.finished_ms = 0
        run.cancel_requested = False
        run.lease_expires_ms = 0
        run.not_before_ms = max(self.now_ms, run.scheduled_ms)  # fired early (look-ahead): never before its instant
        run.error = ""
        run.budget_base = run.attempt
        self._activate(run)
        who = f" by {cmd.requested_by!r}" if cmd.requested_by else ""
        self._step(
            run, "manual_retry",
            f"RetryRun{who} (entry {index}): {was.value} -> PENDING with a fresh budget of "
            f"{job.spec.retry.max_attempts} attempts (the next is attempt {run.attempt + 1})",
        )  # fmt: skip
        self.events.append(("retry_scheduled", run))
        return Ok(run)
