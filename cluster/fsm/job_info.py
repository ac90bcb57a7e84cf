"""What apply keeps about a job beside its record (command format 5): the summary of its runs and its pause.

One row of ``JOB_INFO`` per job that has any (``JobInfo``): counts of runs
that succeeded, failed (FAILED, DEAD_LETTER, EXPIRED) and instants skipped,
the failures since the last success, the last success, failure and error,
how many runs its schedule fired (``max_runs``), and the note and instant
of a pause. Apply keeps it as runs end (``ran``) and instants are skipped
(``skipped``): a read never scans runs for it. A job paused by
``pause_after_failures`` gets a note saying so.

Kept only once the cluster uses command format 5 (``SCHEDULES_FORMAT``):
an older node would not, and every replica must hold the same state.
"""

from __future__ import annotations

import marshal
from typing import Any

from raftsched.cluster.domain.model import (
    NO_INFO,
    NOTIFY_TYPE,
    SCHEDULES_FORMAT,
    Job,
    JobInfo,
    Run,
    RunExtra,
    RunStatus,
    run_extra,
)
from raftsched.cluster.fsm import keys
from raftsched.cluster.fsm.layout import MARSHAL_VERSION
from raftsched.cluster.fsm.store import Table, TableStore
from raftsched.cluster.fsm.tx import Tx

#: the run statuses a job's summary counts as failures (and ``pause_after_failures`` counts in a row)
FAILURES = frozenset({RunStatus.FAILED, RunStatus.DEAD_LETTER, RunStatus.EXPIRED})
#: the longest error a summary keeps (the run keeps it whole)
MAX_ERROR_CHARS = 1024
#: how many fields a ``JobInfo`` has, and one made from all of them in order (``_make`` without its checks)
_FIELDS = len(JobInfo._fields)
_new_info = tuple.__new__


def kept(tx: Tx) -> bool:
    """Whether the cluster's format keeps job info."""
    return tx.mem.cluster_format >= SCHEDULES_FORMAT


def read_store(store: TableStore, job_id: str) -> JobInfo:
    raw = store.get(Table.JOB_INFO, keys.id_key(job_id))
    return NO_INFO if raw is None else decode(raw)


def decode(raw: bytes) -> JobInfo:
    return JobInfo(*marshal.loads(raw))


def encode(info: JobInfo) -> bytes:
    return marshal.dumps(tuple(info), MARSHAL_VERSION)


def read(tx: Tx, job_id: str) -> JobInfo:
    return read_store(tx.store, job_id) if kept(tx) else NO_INFO


def load(tx: Tx, job: Job) -> JobInfo:
    """The job's info, read into ``job.info`` too (what an answer with the job shows)."""
    job.info = info = read(tx, job.job_id)
    return info


def write(tx: Tx, job_id: str, info: JobInfo, job: Job | None = None) -> None:
    if job is not None:
        job.info = info
    key = keys.id_key(job_id)
    if info == NO_INFO:
        tx.delete(Table.JOB_INFO, key)
    else:
        tx.put(Table.JOB_INFO, key, encode(info))


def forget(tx: Tx, job_id: str) -> None:
    """A purged job's info goes with it."""
    tx.delete(Table.JOB_INFO, keys.id_key(job_id))


def ran(tx: Tx, run: Run) -> JobInfo | None:
    """A run ended in its status: counted in its job's summary. The new info, or None when nothing is counted."""
    status = run.status
    if not kept(tx) or run.skipped_count or (run.extra and run_extra(run, RunExtra.TYPE) == NOTIFY_TYPE):
        return None  # a notification's own end is not its job's
    if status is RunStatus.SUCCEEDED:  # the most common end, on every replica: counted on the stored fields
        key = keys.id_key(run.job_id)
        raw = tx.get(Table.JOB_INFO, key)
        t: tuple[Any, ...] = NO_INFO if raw is None else marshal.loads(raw)
        if len(t) != _FIELDS:
            t = tuple(JobInfo(*t))
        # success_count + 1, consecutive_failures 0, last_success_ms now (as ``_replace`` of those fields would)
        fields = (t[0] + 1, t[1], t[2], 0, tx.mem.now_ms) + t[5:]
        tx.put(Table.JOB_INFO, key, marshal.dumps(fields, MARSHAL_VERSION))
        return _new_info(JobInfo, fields)
    if status in FAILURES:
        info = read(tx, run.job_id)
        info = info._replace(
            failure_count=info.failure_count + 1,
            consecutive_failures=info.consecutive_failures + 1,
            last_failure_ms=tx.mem.now_ms,
            last_error=(run.error or f"the run ended {status.value}")[:MAX_ERROR_CHARS],
        )
    else:
        return None
    write(tx, run.job_id, info)
    return info


def skipped(tx: Tx, job_id: str, count: int) -> None:
    if kept(tx) and count > 0:
        info = read(tx, job_id)
        write(tx, job_id, info._replace(skipped_count=info.skipped_count + count))


def fired(tx: Tx, job: Job, count: int) -> None:
    """``count`` runs of its schedule fired (``max_runs`` counts them)."""
    if kept(tx) and count > 0:
        info = read(tx, job.job_id)
        write(tx, job.job_id, info._replace(scheduled_runs=info.scheduled_runs + count), job)
