"""Retention of run history, as Kubernetes CronJob's history limits — and then some.

* Count: a job keeps at most ``spec.history_limit`` finished runs (SUCCEEDED,
  CANCELLED, DEAD_LETTER, SKIPPED); when one more finishes, the oldest
  finished run is dropped at once, inside the same apply.
* Time: a finished run is dropped ``spec.history_ttl_ms`` after it finished.
  Deadlines sit in an index ordered by time; the leader proposes
  ``PruneHistory(now)`` when the earliest one has passed, and the apply drops
  what is due (at most ``limit`` per entry, so no entry is long).
* Soft delete: a DELETED job stays readable, with its runs, until its own
  ``history_ttl_ms`` has passed since the deletion and its last run is gone;
  then the job record and its idempotency key go too.

Active runs (PENDING, LEASED) are never dropped. Every dropped run is
reported as a ("pruned", run) event so the node can remove its stored output.
"""

from __future__ import annotations

from cluster.domain import commands as c
from cluster.domain.model import TERMINAL_RUN_STATUSES, Job, JobStatus, Run
from cluster.domain.results import Ok, Result
from cluster.domain.state_base import StateBase

#: how long a deleted job whose runs are still active waits before it is looked at again
RECHECK_MS = 60_000


class RetentionRules(StateBase):
    """Mixed into ``JobStateMachine``."""

    def _retain(self, run: Run) -> None:
        """A run just became terminal: index its expiry and enforce the job's count limit."""
        job = self.jobs.get(run.job_id)
        ttl = job.spec.history_ttl_ms if job is not None else 0
        self.expiry.add((run.finished_ms + ttl, run.run_id))
        count = self.finished_count.get(run.job_id, 0) + 1
        self.finished_count[run.job_id] = count
        limit = job.spec.history_limit if job is not None else 0
        if job is not None and count > limit:
            self._drop_oldest_finished(job, count - limit)

    def _drop_oldest_finished(self, job: Job, how_many: int) -> None:
        keys = self.runs_by_job.get(job.job_id)
        if not keys:
            return
        victims = []
        for _, run_id in keys:
            run = self.runs[run_id]
            if run.status in TERMINAL_RUN_STATUSES:
                victims.append(run)
                if len(victims) >= how_many:
                    break
        for run in victims:
            self._drop_run(run)

    def _drop_run(self, run: Run) -> None:
        del self.runs[run.run_id]
        self.run_counts[run.status] -= 1
        keys = self.runs_by_job.get(run.job_id)
        if keys is not None:
            keys.discard((run.scheduled_ms, run.run_id))
            if not keys:
                del self.runs_by_job[run.job_id]
        job = self.jobs.get(run.job_id)
        ttl = job.spec.history_ttl_ms if job is not None else 0
        self.expiry.discard((run.finished_ms + ttl, run.run_id))
        left = self.finished_count.get(run.job_id, 1) - 1
        if left > 0:
            self.finished_count[run.job_id] = left
        else:
            self.finished_count.pop(run.job_id, None)
        self.events.append(("pruned", run))

    def _schedule_purge(self, job: Job, at_ms: int) -> None:
        self.purge.add((at_ms, job.job_id))

    def _purge_job(self, job: Job) -> None:
        del self.jobs[job.job_id]
        self.job_counts[job.status] -= 1
        if job.idempotency_key and self.idempotency.get(job.idempotency_key, ("",))[0] == job.job_id:
            del self.idempotency[job.idempotency_key]

    @c.handles(c.PruneHistory)
    def _prune(self, cmd: c.PruneHistory, index: int) -> Result:
        now, dropped, purged = self.now_ms, 0, 0
        while self.expiry and dropped < cmd.limit:
            expires, run_id = self.expiry[0]
            if expires > now:
                break
            run = self.runs.get(run_id)
            if run is None or run.status not in TERMINAL_RUN_STATUSES:  # a stale key (the TTL changed)
                self.expiry.pop(0)
                continue
            self._drop_run(run)
            if self.expiry and self.expiry[0] == (expires, run_id):  # dropped under another TTL's key
                self.expiry.pop(0)
            dropped += 1
        while self.purge and purged < cmd.limit:
            at, job_id = self.purge[0]
            if at > now:
                break
            self.purge.pop(0)
            job = self.jobs.get(job_id)
            if job is None or job.status is not JobStatus.DELETED:
                continue
            if self.runs_by_job.get(job_id):
                self.purge.add((now + RECHECK_MS, job_id))
                continue
            self._purge_job(job)
            purged += 1
        return Ok((dropped, purged))

    def next_prune_ms(self) -> int | None:
        heads = [idx[0][0] for idx in (self.expiry, self.purge) if idx]
        return min(heads) if heads else None

    def _rebuild_retention(self) -> None:
        """After a restore: the retention indexes are derived from the records."""
        for run in self.runs.values():
            if run.status in TERMINAL_RUN_STATUSES:
                job = self.jobs.get(run.job_id)
                ttl = job.spec.history_ttl_ms if job is not None else 0
                self.expiry.add((run.finished_ms + ttl, run.run_id))
                self.finished_count[run.job_id] = self.finished_count.get(run.job_id, 0) + 1
        for job in self.jobs.values():
            if job.status is JobStatus.DELETED:
                self.purge.add((job.updated_ms + job.spec.history_ttl_ms, job.job_id))
