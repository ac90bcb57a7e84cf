"""WatchRuns include_existing: every active run, read a chunk at a time (no read transaction reads more)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import ACTIVE_RUN_STATUSES, Every, JobSpec, Run
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.reader import RecordReader
from raftsched.cluster.node.active_runs import iter_active_runs

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000
CHUNK = 5


class ChunkStore:
    """Counts what each read transaction (one ``read_records``) touches: runs read out of the store."""

    def __init__(self, m: JobStateMachine) -> None:
        self.m = m
        self.holds: list[int] = []
        self.barriers: list[bool] = []

    def read_records(self, fn: Callable[[RecordReader], Any], barrier: bool = True) -> Any:
        touched = 0
        view = self.m.view
        real_run = view.run

        def counting(run_id: str) -> Any:
            nonlocal touched
            touched += 1
            return real_run(run_id)

        view.run = counting  # type: ignore[method-assign]
        try:
            answer = fn(view)
        finally:
            view.run = real_run  # type: ignore[method-assign]
        self.holds.append(touched)  # runs read out in this read transaction
        self.barriers.append(barrier)
        return answer


@pytest.fixture()
def machine() -> JobStateMachine:
    m = JobStateMachine()
    index = 0

    def apply(cmd: c.Command) -> None:
        nonlocal index
        index += 1
        m.apply(c.encode(cmd), index)

    for i in range(40):
        apply(c.CreateJob(T0, f"j-{i:03d}", JobSpec(name=f"n{i}", schedule=Every(60_000), queue=f"q{i % 2}")))
        for _ in range(i % 3):  # 0, 1 or 2 active runs
            apply(c.TriggerJob(T0, f"j-{i:03d}"))
    for _ in range(23):  # one job with more active runs than a chunk
        apply(c.TriggerJob(T0, "j-007"))
    apply(c.AcquireLeases(T0, "e", ("q1",), 3))  # some LEASED too
    return m


def _expected(m: JobStateMachine, accept: Callable[[Run], bool]) -> list[str]:
    runs = [r for r in m.runs.values() if r.status in ACTIVE_RUN_STATUSES and accept(r)]
    return [r.run_id for r in sorted(runs, key=lambda r: (r.job_id, r.scheduled_ms, r.run_id))]


def test_every_active_run_comes_out_and_no_hold_exceeds_a_chunk(machine: JobStateMachine) -> None:
    store = ChunkStore(machine)
    got = [r.run_id for r in iter_active_runs(store, "", lambda r: True, 10_000, CHUNK)]  # type: ignore[arg-type]
    assert got == _expected(machine, lambda r: True)
    assert len(got) > 60 and len(store.holds) > 10
    # a chunk of the index of active runs per read, whatever the jobs they belong to
    assert max(store.holds) <= CHUNK
    assert store.barriers[0] and not any(store.barriers[1:])


def test_filters_limit_and_one_job(machine: JobStateMachine) -> None:
    in_q1 = [r.run_id for r in iter_active_runs(ChunkStore(machine), "", lambda r: r.queue == "q1", 10_000, CHUNK)]  # type: ignore[arg-type]
    assert in_q1 == _expected(machine, lambda r: r.queue == "q1")
    assert len(list(iter_active_runs(ChunkStore(machine), "", lambda r: True, 7, CHUNK))) == 7  # type: ignore[arg-type]
    store = ChunkStore(machine)
    one = [r.run_id for r in iter_active_runs(store, "j-007", lambda r: True, 10_000, CHUNK)]  # type: ignore[arg-type]
    assert one == _expected(machine, lambda r: r.job_id == "j-007") and len(one) == 24
    assert max(store.holds) <= CHUNK and len(store.holds) >= 5
