"""List calls read the state in bounded chunks, so a sparse filter never holds up Raft's apply."""

from __future__ import annotations

import random
from typing import Any, Callable

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import RejectedError, ValidationError
from raftsched.cluster.domain.model import Every, JobSpec, RunStatus
from raftsched.cluster.domain.results import Ok
from raftsched.cluster.domain.validation import Limits
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.reader import RecordReader
from raftsched.cluster.node import job_service as service_mod
from raftsched.cluster.node.clock import FakeClock
from raftsched.cluster.node.job_service import JobService
from raftsched.storage import OutputReader

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000


class CountingStore:
    """The part of Replica the list calls use, counting how much each read transaction examines."""

    def __init__(self, machine: JobStateMachine) -> None:
        self.machine = machine
        self.reads: list[tuple[bool, int]] = []  # (barrier, items examined)

    def read(self, fn: Callable[[JobStateMachine], Any], barrier: bool = True) -> Any:
        return fn(self.machine)

    def read_records(self, fn: Callable[[RecordReader], Any], barrier: bool = True) -> Any:
        examined = 0
        view = self.machine.view
        jobs_iter, runs_iter, job_runs_iter = view.iter_jobs, view.iter_runs, view.iter_job_runs

        def counted(it: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*a: Any) -> Any:
                nonlocal examined
                for item in it(*a):
                    examined += 1
                    yield item

            return wrapper

        view.iter_jobs, view.iter_runs = counted(jobs_iter), counted(runs_iter)  # type: ignore[method-assign]
        view.iter_job_runs = counted(job_runs_iter)  # type: ignore[method-assign]
        try:
            return fn(view)
        finally:
            view.iter_jobs, view.iter_runs, view.iter_job_runs = jobs_iter, runs_iter, job_runs_iter  # type: ignore[method-assign]
            self.reads.append((barrier, examined))


@pytest.fixture()
def world(monkeypatch: pytest.MonkeyPatch) -> tuple[JobService, CountingStore, JobStateMachine]:
    monkeypatch.setattr(service_mod, "SCAN_CHUNK", 7)
    m = JobStateMachine()
    for i in range(150):
        name = f"match-{i}" if i % 17 == 3 else f"other-{i}"
        queue = "q-a" if i % 2 else "q-b"
        spec = JobSpec(name=name, schedule=Every(60_000), queue=queue)
        assert isinstance(m.apply(c.encode(c.CreateJob(T0, f"j-{i:04d}", spec)), i + 1), Ok)
    store = CountingStore(m)
    return JobService(store, FakeClock(T0), Limits(), OutputReader()), store, m  # type: ignore[arg-type]


def _all_pages(list_page: Callable[[str], Any], ident: Callable[[Any], str] = lambda j: j.job_id) -> list[str]:
    ids, token = [], ""
    while True:
        page = list_page(token)
        ids += [ident(x) for x in page.items]
        token = page.next_token
        if not token:
            return ids


def test_a_sparse_filter_is_read_in_chunks_and_finds_everything(world: Any) -> None:
    svc, store, m = world
    page = svc.list_jobs(name_prefix="match-", page_size=100)
    want = sorted(j.job_id for j in m.jobs.values() if j.spec.name.startswith("match-"))
    assert [j.job_id for j in page.items] == want and page.next_token == ""
    assert len(store.reads) >= 150 // 7
    assert store.reads[0][0] is True and not any(barrier for barrier, _ in store.reads[1:])  # one barrier, first
    assert max(examined for _, examined in store.reads) <= 7 + 1  # never the whole table in one read transaction


@pytest.mark.parametrize("seed", range(5))
def test_chunked_pages_are_the_filtered_list_in_order(world: Any, seed: int) -> None:
    svc, _, m = world
    rnd = random.Random(seed)
    queue, prefix, size = rnd.choice(["", "q-a", "q-b"]), rnd.choice(["", "match-", "other-1"]), rnd.randint(1, 9)
    got = _all_pages(lambda token: svc.list_jobs(queue=queue, name_prefix=prefix, page_size=size, page_token=token))
    want = sorted(j.job_id for j in m.jobs.values() if (not queue or j.spec.queue == queue) and j.spec.name.startswith(prefix))
    assert got == want


def test_runs_of_a_job_page_through_chunks(world: Any) -> None:
    svc, _, m = world
    for k in range(1, 30):
        due = m.jobs["j-0003"].next_fire_ms
        assert isinstance(m.apply(c.encode(c.Fire(due, (("j-0003", due),), 0, 5_000)), 1000 + k), Ok)
    got = _all_pages(lambda token: svc.list_runs(job_id="j-0003", page_size=4, page_token=token), lambda r: r.run_id)
    assert got == [r.run_id for r in m.iter_job_runs("j-0003")] and len(got) == 29
    pending = _all_pages(lambda token: svc.list_runs(status=RunStatus.PENDING, page_size=5, page_token=token), lambda r: r.run_id)
    assert pending == sorted(got)
    with pytest.raises(RejectedError):
        svc.list_runs(job_id="j-missing")
    with pytest.raises(ValidationError):
        svc.list_runs(job_id="j-0003", page_token="not-a-token")


def test_runs_of_a_job_newest_first_page_through_chunks(world: Any) -> None:
    svc, _, m = world
    for k in range(1, 24):
        due = m.jobs["j-0005"].next_fire_ms  # a record read is a copy: read it again after each Fire
        assert isinstance(m.apply(c.encode(c.Fire(due, (("j-0005", due),), 0, 5_000)), 2000 + k), Ok)
    oldest_first = [r.run_id for r in m.iter_job_runs("j-0005")]
    got = _all_pages(
        lambda token: svc.list_runs(job_id="j-0005", page_size=4, page_token=token, newest_first=True), lambda r: r.run_id
    )
    assert got == oldest_first[::-1] and len(got) == 23
    first = svc.list_runs(job_id="j-0005", page_size=4, newest_first=True)
    with pytest.raises(ValidationError):  # a token is bound to its order: no mixing the two
        svc.list_runs(job_id="j-0005", page_size=4, page_token=first.next_token)
    with pytest.raises(ValidationError):
        svc.list_runs(newest_first=True)  # only a job's runs have an order by instant
