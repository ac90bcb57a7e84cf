"""Retention of run history, as Kubernetes CronJob's history limits — and then some.

* Count: a job keeps at most ``spec.history_limit`` finished runs (SUCCEEDED,
  CANCELLED, DEAD_LETTER, SKIPPED); when one more finishes, the oldest
  finished run is dropped at once, inside the same apply.
* Failures apart (as Kubernetes' ``failedJobsHistoryLimit``): a FAILED or
  DEAD_LETTER run that finished once the cluster used command format 3 (it
  has steps: ``run_history``) goes into an index of its own (``FAILED_RUNS``,
  counted in ``FAILED``) and counts against ``spec.failed_history_limit``
  only; ``history_limit`` then counts the other finished runs (SUCCEEDED,
  CANCELLED, SKIPPED: skips are many and must not push out a dead letter),
  so a burst of successes never prunes a failure. Runs that failed before
  the switch stay counted with the others.
* Time: a finished run is dropped ``spec.history_ttl_ms`` after it finished.
  Deadlines sit in an index ordered by time; the leader proposes
  ``PruneHistory(now)`` when the earliest one has passed, and the apply drops
  what is due (at most ``limit`` per entry, so no entry is long).
* Soft delete: a DELETED job stays readable, with its runs, until its own
  ``history_ttl_ms`` has passed since the deletion and its last run is gone;
  then the job record and its idempotency key go too.

Request ids past their 24 h (``request_rules``) go with each ``PruneHistory``
too. Active runs (PENDING, LEASED) are never dropped. Every dropped run is
reported as a ("pruned", run) event so the node can remove its stored output.
"""

from __future__ import annotations

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain import record_codec as rc
from raftsched.cluster.domain.model import TERMINAL_RUN_STATUSES, Job, JobStatus, Run, RunStatus
from raftsched.cluster.domain.results import Ok, Result
from raftsched.cluster.domain.state_base import StateBase
from raftsched.cluster.domain.state_store import Table

#: how long a deleted job whose runs are still active waits before it is looked at again
RECHECK_MS = 60_000
#: the finished statuses ``failed_history_limit`` keeps apart
FAILURES = frozenset({RunStatus.FAILED, RunStatus.DEAD_LETTER})


def kept_apart(run: Run) -> bool:
    """Whether a finished run counts against ``failed_history_limit``: a failure that finished once the cluster
    recorded histories (command format 3; such a run has steps). Decided from the record alone, so a restore
    from a snapshot body rebuilds the same index."""
    return run.status in FAILURES and bool(run.steps_raw)


class RetentionRules(StateBase):
    """Mixed into ``JobStateMachine``."""

    def _ttl(self, job_id: str) -> int:
        spec = self.uow.spec(job_id)
        return spec.history_ttl_ms if spec is not None else 0

    def _finished_count(self, job_id: str) -> int:
        return rc.decode_int(self.store.get(Table.FINISHED, rc.id_key(job_id)))

    def _set_finished_count(self, job_id: str, count: int) -> None:
        if count > 0:
            self.store.put(Table.FINISHED, rc.id_key(job_id), rc.encode_int(count))
        else:
            self.store.delete(Table.FINISHED, rc.id_key(job_id))

    def _failed_count(self, job_id: str) -> int:
        return rc.decode_int(self.store.get(Table.FAILED, rc.id_key(job_id)))

    def _set_failed_count(self, job_id: str, count: int) -> None:
        if count > 0:
            self.store.put(Table.FAILED, rc.id_key(job_id), rc.encode_int(count))
        else:
            self.store.delete(Table.FAILED, rc.id_key(job_id))

    def _retain(self, run: Run) -> None:
        """A run just became terminal: index its expiry and enforce the job's count limits."""
        spec = self.uow.spec(run.job_id)
        ttl = spec.history_ttl_ms if spec is not None else 0
        self.store.put(Table.EXPIRY, rc.timed_key(run.finished_ms + ttl, run.run_id), b"")
        count = self._finished_count(run.job_id) + 1
        self._set_finished_count(run.job_id, count)
        if spec is None:
            return
        if kept_apart(run):
            self.store.put(Table.FAILED_RUNS, rc.job_run_key(run.job_id, run.scheduled_ms, run.run_id), b"")
            failed = self._failed_count(run.job_id) + 1
            self._set_failed_count(run.job_id, failed)
            if failed > spec.failed_history_limit:
                self._drop_oldest_failed(run.job_id, failed - spec.failed_history_limit)
            return
        others = count - self._failed_count(run.job_id)
        if others > spec.history_limit:
            self._drop_oldest_finished(run.job_id, others - spec.history_limit)

    def _unretain(self, run: Run) -> None:
        """A finished run becomes active again (``RetryRun``): out of the retention indexes (undo ``_retain``)."""
        self.store.delete(Table.EXPIRY, rc.timed_key(run.finished_ms + self._ttl(run.job_id), run.run_id))
        self._set_finished_count(run.job_id, self._finished_count(run.job_id) - 1)
        self._unindex_failed(run)

    def _unindex_failed(self, run: Run) -> None:
        key = rc.job_run_key(run.job_id, run.scheduled_ms, run.run_id)
        if self.store.get(Table.FAILED_RUNS, key) is not None:
            self.store.delete(Table.FAILED_RUNS, key)
            self._set_failed_count(run.job_id, self._failed_count(run.job_id) - 1)

    def _drop_oldest_failed(self, job_id: str, how_many: int) -> None:
        prefix = rc.job_prefix(job_id)
        rows = self.store.scan(Table.FAILED_RUNS, prefix, rc.prefix_end(prefix), how_many)
        for key, _ in rows:
            run = self.uow.run(rc.job_run_from(key, len(prefix))[1])
            if run is not None:
                self._drop_run(run)

    def _drop_oldest_finished(self, job_id: str, how_many: int) -> None:
        """The oldest finished runs of the job that are not kept apart as failures (``FAILED_RUNS``)."""
        victims: list[Run] = []
        after: tuple[int, str] | None = None
        while len(victims) < how_many:
            keys = self._job_run_keys(job_id, after, 256)
            for scheduled_ms, run_id in keys:
                if self.store.get(Table.FAILED_RUNS, rc.job_run_key(job_id, scheduled_ms, run_id)) is not None:
                    continue
                run = self.uow.run(run_id)
                if run is not None and run.status in TERMINAL_RUN_STATUSES:
                    victims.append(run)
                    if len(victims) >= how_many:
                        break
            if len(keys) < 256:
                break
            after = keys[-1]
        for run in victims:
            self._drop_run(run)

    def _drop_run(self, run: Run) -> None:
        self.uow.runs.drop(run.run_id)
        self.run_counts[run.status] -= 1
        self._job_runs_discard(run)
        self.store.delete(Table.EXPIRY, rc.timed_key(run.finished_ms + self._ttl(run.job_id), run.run_id))
        self._set_finished_count(run.job_id, self._finished_count(run.job_id) - 1)
        self._unindex_failed(run)
        self.events.append(("pruned", run))

    def _schedule_purge(self, job: Job, at_ms: int) -> None:
        self.store.put(Table.PURGE, rc.timed_key(at_ms, job.job_id), b"")

    def _purge_job(self, job: Job) -> None:
        self.uow.jobs.drop(job.job_id)
        self.job_counts[job.status] -= 1
        key = job.idempotency_key
        if key and (self.idempotency.get(key) or ("",))[0] == job.job_id:
            self.store.delete(Table.IDEMPOTENCY, rc.idem_key(key))

    def _head(self, table: str) -> tuple[bytes, int, str] | None:
        rows = self.store.scan(table, limit=1)
        if not rows:
            return None
        when, ident = rc.timed_from(rows[0][0])
        return rows[0][0], when, ident

    @c.handles(c.PruneHistory)
    def _prune(self, cmd: c.PruneHistory, index: int) -> Result:
        now, dropped, purged = self.now_ms, 0, 0
        while dropped < cmd.limit:
            head = self._head(Table.EXPIRY)
            if head is None or head[1] > now:
                break
            key, _, run_id = head
            run = self.uow.run(run_id)
            if run is None or run.status not in TERMINAL_RUN_STATUSES:  # a stale key (the TTL changed)
                self.store.delete(Table.EXPIRY, key)
                continue
            self._drop_run(run)
            self.store.delete(Table.EXPIRY, key)  # dropped under another TTL's key: this one goes too
            dropped += 1
        while purged < cmd.limit:
            head = self._head(Table.PURGE)
            if head is None or head[1] > now:
                break
            key, _, job_id = head
            self.store.delete(Table.PURGE, key)
            job = self.uow.job(job_id)
            if job is None or job.status is not JobStatus.DELETED:
                continue
            if self._job_run_keys(job_id, None, 1):
                self._schedule_purge(job, now + RECHECK_MS)
                continue
            self._purge_job(job)
            purged += 1
        self.prune_requests(lim.REQUEST_PRUNE_BATCH)
        return Ok((dropped, purged))

    def next_prune_ms(self) -> int | None:
        heads = (self._head(Table.EXPIRY), self._head(Table.PURGE), self._head(Table.REQUEST_EXPIRY))
        known = [head[1] for head in heads if head is not None]
        return min(known) if known else None
