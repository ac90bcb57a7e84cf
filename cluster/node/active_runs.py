"""WatchRuns ``include_existing``: the active runs, read a chunk at a time.

The state lock is held while Raft applies; a reader that held it for a copy
of every active run of a million-job cluster would stall replication. So the
active runs are walked by job id (the jobs' sorted index), one chunk of jobs
per hold of the lock, each job's active runs by scheduled time; a job with
more active runs than a chunk has its runs walked a chunk at a time from its
own run index. The first chunk is read after a read barrier; the later ones
on this node's state, which is only newer (a run that changes meanwhile is
also sent as a live change, so a watcher misses nothing).
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Iterator

from cluster.domain.model import ACTIVE_RUN_STATUSES, Run
from cluster.domain.state import JobStateMachine
from cluster.node.replicated_state import ReplicatedState

Accept = Callable[[Run], bool]
#: (runs found, the last job id examined, done, a job whose active runs exceed a chunk)
_Step = tuple[list[Run], str, bool, str]


def iter_active_runs(store: ReplicatedState, job_id: str, accept: Accept, limit: int, chunk: int) -> Iterator[Run]:
    """PENDING and LEASED runs that ``accept`` takes (of ``job_id``, or of every job), at most ``limit``."""
    if job_id:
        yield from _runs_of_job(store, job_id, accept, limit, chunk, barrier=True)
        return
    sent, cursor, first = 0, "", True
    while sent < limit:
        runs, cursor, done, big = store.read(partial(_jobs_step, after=cursor, accept=accept, chunk=chunk), barrier=first)
        first = False
        for run in runs[: limit - sent]:
            yield run
        sent += min(len(runs), limit - sent)
        if big and sent < limit:
            for run in _runs_of_job(store, big, accept, limit - sent, chunk, barrier=False):
                yield run
                sent += 1
        if done:
            return


def _jobs_step(m: JobStateMachine, after: str, accept: Accept, chunk: int) -> _Step:
    """One hold of the lock: the active runs of up to ``chunk`` jobs (or runs) after job id ``after``."""
    out: list[Run] = []
    examined = 0
    last = after
    for job in m.iter_jobs(after):
        last = job.job_id
        active = m.active_by_job.get(last)
        examined += 1
        if active:
            if len(active) > chunk:
                return out, last, False, last
            runs = sorted((m.runs[run_id] for run_id in active), key=lambda r: (r.scheduled_ms, r.run_id))
            out.extend(r for r in runs if accept(r))
            examined += len(active)
        if examined >= chunk:
            return out, last, False, ""
    return out, last, True, ""


def _runs_of_job(store: ReplicatedState, job_id: str, accept: Accept, limit: int, chunk: int, barrier: bool) -> Iterator[Run]:
    """One job's active runs by scheduled time, ``chunk`` of its run index per hold of the lock."""
    sent = 0
    cursor: tuple[int, str] | None = None

    def step(m: JobStateMachine, after: tuple[int, str] | None) -> tuple[list[Run], tuple[int, str] | None]:
        index = m.runs_by_job.get(job_id)
        keys = index.slice_after(after, chunk) if index is not None else []
        runs = [m.runs[run_id] for _, run_id in keys]
        return [r for r in runs if r.status in ACTIVE_RUN_STATUSES and accept(r)], (keys[-1] if len(keys) == chunk else None)

    while sent < limit:
        runs, cursor = store.read(partial(step, after=cursor), barrier=barrier)
        barrier = False
        for run in runs[: limit - sent]:
            yield run
        sent += min(len(runs), limit - sent)
        if cursor is None:
            return
