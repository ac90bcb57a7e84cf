"""WatchRuns ``include_existing``: the active runs, read a chunk at a time.

The store keeps an index of the PENDING and LEASED runs ordered by job id,
then scheduled time (``Table.ACTIVE``), so the active runs of a
million-job cluster are walked in that order without looking at a job that
has none: one chunk of runs per read transaction (no lock Raft needs; a
short transaction keeps the state file from growing under it). The first
chunk is read after a read barrier; the later ones on this node's state,
which is only newer (a run that changes meanwhile is also sent as a live
change, so a watcher misses nothing).
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Iterator, Protocol, TypeVar

from raftsched.cluster.domain.model import ACTIVE_RUN_STATUSES, Run
from raftsched.cluster.fsm.reader import RecordReader

Accept = Callable[[Run], bool]
T = TypeVar("T")


class RecordReads(Protocol):
    def read_records(self, fn: Callable[[RecordReader], T], barrier: bool = True) -> T: ...


def iter_active_runs(store: RecordReads, job_id: str, accept: Accept, limit: int, chunk: int) -> Iterator[Run]:
    """PENDING and LEASED runs that ``accept`` takes (of ``job_id``, or of every job), at most ``limit``,
    by job, then scheduled time."""
    sent, after, first = 0, b"", True
    while sent < limit:
        runs, after, done = store.read_records(
            partial(_step, job_id=job_id, after=after, accept=accept, chunk=chunk), barrier=first
        )
        first = False
        for run in runs[: limit - sent]:
            yield run
        sent += min(len(runs), limit - sent)
        if done:
            return


def _step(r: RecordReader, job_id: str, after: bytes, accept: Accept, chunk: int) -> tuple[list[Run], bytes, bool]:
    """One read transaction: the runs of the next ``chunk`` keys of the active index after key ``after``."""
    keys = r.active_page(job_id, after, chunk)
    runs = (r.run(run_id) for _, run_id in keys)
    out = [run for run in runs if run is not None and run.status in ACTIVE_RUN_STATUSES and accept(run)]
    return out, keys[-1][0] if keys else after, len(keys) < chunk
