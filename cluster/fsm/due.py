"""The due index: what the leader reads to fire (``DUE``), never a scan of all jobs.

An ACTIVE job with a next instant has a row at that instant; a PAUSED job
with a ``paused_until`` (``PauseJob.until``) has a row at that instant, so
that the leader's ``Fire`` resumes it then (``raftsched.cluster.fsm.fire``).
"""

from __future__ import annotations

from raftsched.cluster.domain.model import Job, JobStatus
from raftsched.cluster.fsm import job_info, keys
from raftsched.cluster.fsm.store import Table
from raftsched.cluster.fsm.tx import Tx


def index_due(tx: Tx, job: Job) -> None:
    if job.status is JobStatus.ACTIVE:
        if job.next_fire_ms is not None:
            tx.put(Table.DUE, keys.timed_key(job.next_fire_ms, job.job_id), b"")
    elif job.status is JobStatus.PAUSED:
        until = job_info.read(tx, job.job_id).paused_until_ms
        if until:
            tx.put(Table.DUE, keys.timed_key(until, job.job_id), b"")


def unindex_due(tx: Tx, job: Job) -> None:
    """Undo ``index_due`` (call it before the job's status, next instant or pause change)."""
    if job.next_fire_ms is not None:
        tx.delete(Table.DUE, keys.timed_key(job.next_fire_ms, job.job_id))
    if job.status is JobStatus.PAUSED:
        until = job_info.read(tx, job.job_id).paused_until_ms
        if until:
            tx.delete(Table.DUE, keys.timed_key(until, job.job_id))
