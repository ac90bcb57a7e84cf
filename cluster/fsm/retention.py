"""Retention of run history, as Kubernetes CronJob's history limits — and then some.

* Count: a job keeps at most ``spec.history_limit`` finished runs (SUCCEEDED,
  CANCELLED, DEAD_LETTER, SKIPPED); when one more finishes, the oldest
  finished run is dropped at once, inside the same apply.
* Failures apart (as Kubernetes' ``failedJobsHistoryLimit``): a FAILED or
  DEAD_LETTER run that finished once the cluster used command format 3 (it
  has steps: ``run_history``) goes into an index of its own (``FAILED_RUNS``,
  counted in ``FAILED``) and counts against ``spec.failed_history_limit``
  only (``raftsched.cluster.domain.retention.kept_apart``); ``history_limit``
  then counts the other finished runs (SUCCEEDED, CANCELLED, SKIPPED: skips
  are many and must not push out a dead letter), so a burst of successes
  never prunes a failure. Runs that failed before the switch stay counted
  with the others.
* Time: a finished run is dropped ``spec.history_ttl_ms`` after it finished.
  Deadlines sit in an index ordered by time; the leader proposes
  ``PruneHistory(now)`` when the earliest one has passed, and the apply drops
  what is due (at most ``limit`` per entry, so no entry is long).
* Soft delete: a DELETED job stays readable, with its runs, until its own
  ``history_ttl_ms`` has passed since the deletion and its last run is gone;
  then the job record and its idempotency key go too.

Request ids past their 24 h (``requests``) go with each ``PruneHistory``
too. Active runs (PENDING, LEASED) are never dropped. Every dropped run is
reported as a ("pruned", run) event so the node can remove its stored output.
"""

from __future__ import annotations

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.model import TERMINAL_RUN_STATUSES, Job, JobSpec, JobStatus, Run
from raftsched.cluster.domain.results import Ok, Result
from raftsched.cluster.domain.retention import RECHECK_MS, kept_apart
from raftsched.cluster.fsm import job_info, keys, layout, requests
from raftsched.cluster.fsm.store import Table
from raftsched.cluster.fsm.tx import Tx


def _ttl(tx: Tx, job_id: str) -> int:
    spec = tx.spec(job_id)
    return spec.history_ttl_ms if spec is not None else 0


def _count(tx: Tx, table: str, job_id: str) -> int:
    return layout.decode_int(tx.get(table, keys.id_key(job_id)))


def _set_count(tx: Tx, table: str, job_id: str, count: int) -> None:
    if count > 0:
        tx.put(table, keys.id_key(job_id), layout.encode_int(count))
    else:
        tx.delete(table, keys.id_key(job_id))


def retain(tx: Tx, run: Run, spec: JobSpec | None) -> None:
    """A run just became terminal: index its expiry and enforce the job's count limits (``spec``: its job's, None
    if the job is gone)."""
    ttl = spec.history_ttl_ms if spec is not None else 0
    tx.put(Table.EXPIRY, keys.timed_key(run.finished_ms + ttl, run.run_id), b"")
    stored = _count(tx, Table.FINISHED, run.job_id)
    count = stored + 1
    if spec is None or kept_apart(run):
        _set_count(tx, Table.FINISHED, run.job_id, count)
        if spec is None:
            return
        tx.put(Table.FAILED_RUNS, keys.job_run_key(run.job_id, run.scheduled_ms, run.run_id), b"")
        failed = _count(tx, Table.FAILED, run.job_id) + 1
        _set_count(tx, Table.FAILED, run.job_id, failed)
        if failed > spec.failed_history_limit:
            _drop_oldest_failed(tx, run.job_id, failed - spec.failed_history_limit, ttl)
        return
    if count > spec.history_limit:  # (else its runs other than failures kept apart are within it: none is read)
        apart = _count(tx, Table.FAILED, run.job_id)
        others = count - apart
        if others > spec.history_limit:
            # a job at its limit: one in, one out, and its count written only if it changed (as a rule it does not)
            count -= _drop_oldest_finished(tx, run.job_id, others - spec.history_limit, ttl, apart > 0)
    if count != stored:
        _set_count(tx, Table.FINISHED, run.job_id, count)


def unretain(tx: Tx, run: Run) -> None:
    """A finished run becomes active again (``RetryRun``): out of the retention indexes (undo ``retain``)."""
    tx.delete(Table.EXPIRY, keys.timed_key(run.finished_ms + _ttl(tx, run.job_id), run.run_id))
    _set_count(tx, Table.FINISHED, run.job_id, _count(tx, Table.FINISHED, run.job_id) - 1)
    _unindex_failed(tx, run)


def _unindex_failed(tx: Tx, run: Run) -> None:
    key = keys.job_run_key(run.job_id, run.scheduled_ms, run.run_id)
    if tx.get(Table.FAILED_RUNS, key) is not None:
        tx.delete(Table.FAILED_RUNS, key)
        _set_count(tx, Table.FAILED, run.job_id, _count(tx, Table.FAILED, run.job_id) - 1)


def _drop_oldest_failed(tx: Tx, job_id: str, how_many: int, ttl: int) -> None:
    prefix = keys.job_prefix(job_id)
    rows = tx.scan(Table.FAILED_RUNS, prefix, keys.prefix_end(prefix), how_many)
    for key, _ in rows:
        run = tx.run(keys.job_run_from(key, len(prefix))[1], keep=False)
        if run is not None:
            _drop_run(tx, run, ttl)


#: the most keys of a job's runs read at once while looking for its oldest finished ones
_PAGE = 256


def _drop_oldest_finished(tx: Tx, job_id: str, how_many: int, ttl: int, any_apart: bool = True) -> int:
    """Drop the oldest finished runs of the job that are not kept apart as failures (``FAILED_RUNS``); how many it
    dropped. The job's count of finished runs is the caller's to write; ``ttl``: the job's ``history_ttl_ms``. ``any_apart=False``: the job keeps no
    failure apart (its ``FAILED`` count is 0), so no run is looked up there.

    The oldest of a job's runs are finished as a rule (active runs are its newest; failures kept apart are
    few), so the first page asks for barely more keys than it needs — a job at its limit drops one run per
    completion, and reading a full page of its thousand runs for it would cost more than the rest of the
    completion — and each further page four times as many, up to ``_PAGE``."""
    victims: list[Run] = []
    after: tuple[int, str] | None = None
    size = min(_PAGE, how_many + 2)
    while len(victims) < how_many:
        page = tx.job_keys(Table.JOB_RUNS, job_id, after, size)
        for scheduled_ms, run_id in page:
            if any_apart and tx.get(Table.FAILED_RUNS, keys.job_run_key(job_id, scheduled_ms, run_id)) is not None:
                continue
            run = tx.run(run_id, keep=False)
            if run is not None and run.status in TERMINAL_RUN_STATUSES:
                victims.append(run)
                if len(victims) >= how_many:
                    break
        if len(page) < size:
            break
        after = page[-1]
        size = min(_PAGE, size * 4)
    for run in victims:
        _drop_run(tx, run, ttl, counted=False)
    return len(victims)


def _drop_run(tx: Tx, run: Run, ttl: int, counted: bool = True) -> None:
    """Forget a finished run (``ttl``: its job's ``history_ttl_ms``, which placed its row in ``EXPIRY``).
    ``counted=False``: one the caller found outside ``FAILED_RUNS``, whose job's count of finished runs the caller
    writes."""
    tx.drop_run(run.run_id)
    tx.mem.run_counts[run.status] -= 1
    tx.delete(Table.JOB_RUNS, keys.job_run_key(run.job_id, run.scheduled_ms, run.run_id))
    tx.delete(Table.EXPIRY, keys.timed_key(run.finished_ms + ttl, run.run_id))
    if counted:
        _set_count(tx, Table.FINISHED, run.job_id, _count(tx, Table.FINISHED, run.job_id) - 1)
        _unindex_failed(tx, run)
    tx.events.append(("pruned", run))


def schedule_purge(tx: Tx, job: Job, at_ms: int) -> None:
    """Look at a DELETED job again at ``at_ms`` (``prune``)."""
    tx.put(Table.PURGE, keys.timed_key(at_ms, job.job_id), b"")


def _purge_job(tx: Tx, job: Job) -> None:
    tx.drop_job(job.job_id)
    job_info.forget(tx, job.job_id)
    tx.mem.job_counts[job.status] -= 1
    key = job.idempotency_key
    if key:
        raw = tx.get(Table.IDEMPOTENCY, keys.idem_key(key))
        if raw is not None:
            stored, job_id, _ = layout.decode_idem(raw)
            if stored == key and job_id == job.job_id:
                tx.delete(Table.IDEMPOTENCY, keys.idem_key(key))


def head(tx: Tx, table: str) -> tuple[bytes, int, str] | None:
    """The first row of a timed index: its key, instant and id."""
    rows = tx.scan(table, limit=1)
    if not rows:
        return None
    when, ident = keys.timed_from(rows[0][0])
    return rows[0][0], when, ident


def prune(tx: Tx, cmd: c.PruneHistory) -> Result:
    now, dropped, purged = tx.mem.now_ms, 0, 0
    while dropped < cmd.limit:
        first = head(tx, Table.EXPIRY)
        if first is None or first[1] > now:
            break
        key, _, run_id = first
        run = tx.run(run_id, keep=False)
        if run is None or run.status not in TERMINAL_RUN_STATUSES:  # a stale key (the TTL changed)
            tx.delete(Table.EXPIRY, key)
            continue
        _drop_run(tx, run, _ttl(tx, run.job_id))
        tx.delete(Table.EXPIRY, key)  # dropped under another TTL's key: this one goes too
        dropped += 1
    while purged < cmd.limit:
        first = head(tx, Table.PURGE)
        if first is None or first[1] > now:
            break
        key, _, job_id = first
        tx.delete(Table.PURGE, key)
        job = tx.job(job_id)
        if job is None or job.status is not JobStatus.DELETED:
            continue
        if tx.job_keys(Table.JOB_RUNS, job_id, None, 1):
            schedule_purge(tx, job, now + RECHECK_MS)
            continue
        _purge_job(tx, job)
        purged += 1
    requests.prune_requests(tx, lim.REQUEST_PRUNE_BATCH)
    return Ok((dropped, purged))
