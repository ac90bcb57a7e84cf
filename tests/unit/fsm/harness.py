"""The harness of the state machine's unit tests (``tests/unit/fsm/``): a machine fed through encode and apply.

Every command goes through ``encode`` and ``JobStateMachine.apply`` (the
path a Raft entry takes) with an explicit ``now_ms``. No network, no clock,
no sleeps. A module that imports ``store_kind`` runs each of its tests
against both stores: the in-memory one and an LMDB environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import Every, Job, JobSpec, MisfirePolicy, Run, RunStatus, Schedule
from raftsched.cluster.domain.results import FireReport, Ok, Rejected, Result
from raftsched.cluster.domain.spec_codec import job_to_plain, run_to_plain
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.store import MemoryStore, Table, TableStore, iter_table
from raftsched.storage.lmdb_state import LmdbTableStore

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SEC = 1_000
MIN = 60 * SEC


_new_store: Callable[[], TableStore] = MemoryStore


@pytest.fixture(autouse=True, params=["memory", "lmdb"])
def store_kind(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Every test here runs against both stores: the in-memory one and an LMDB environment."""
    global _new_store
    opened: list[LmdbTableStore] = []

    def lmdb_store() -> TableStore:
        opened.append(LmdbTableStore(str(tmp_path / f"state-{len(opened)}.mdb"), map_size=1 << 30))
        return opened[-1]

    _new_store = lmdb_store if request.param == "lmdb" else MemoryStore
    yield request.param
    _new_store = MemoryStore
    for store in opened:
        store.close()


def new_machine() -> JobStateMachine:
    return JobStateMachine(_new_store())


def spec(schedule: Schedule, name: str = "job", **kw: Any) -> JobSpec:
    return JobSpec(name=name, schedule=schedule, type="noop", **kw)


class Harness:
    """A machine fed through encode/apply, with a Raft-like growing index."""

    def __init__(self) -> None:
        self.m = new_machine()
        self.index = 0

    def apply(self, cmd: c.Command) -> Result:
        self.index += 1
        return self.m.apply(c.encode(cmd), self.index)

    def ok(self, cmd: c.Command) -> Any:
        result = self.apply(cmd)
        assert isinstance(result, Ok), result
        return result.value

    def rejected(self, cmd: c.Command, kind: type[Rejected]) -> Rejected:
        result = self.apply(cmd)
        assert type(result) is kind, result
        assert result.message
        return result

    def create(self, job_id: str, schedule: Schedule, now: int = T0, key: str = "", **kw: Any) -> Any:
        return self.ok(c.CreateJob(now, job_id, spec(schedule, **kw), key))

    def fire(
        self,
        now: int,
        items: list[tuple[str, int]] | None = None,
        lookahead: int = 0,
        threshold: int = 5_000,
    ) -> FireReport:
        """Fire ``items``, or (like the leader) whatever ``due_jobs`` returns at ``now + lookahead``."""
        if items is None:
            items = self.m.due_jobs(now + lookahead, 10_000)
        report = self.ok(c.Fire(now, tuple(items), lookahead, threshold))
        assert isinstance(report, FireReport)
        return report

    def job(self, job_id: str) -> Any:
        return self.m.jobs[job_id]

    def runs(self, job_id: str) -> list[Run]:
        return list(self.m.iter_job_runs(job_id))

    def run_times(self, job_id: str, status: RunStatus | None = None) -> list[int]:
        return [r.scheduled_ms for r in self.runs(job_id) if status is None or r.status is status]


def on_format(fmt: int) -> Harness:
    """A harness whose cluster switched to command format ``fmt`` (its first entry)."""
    h = Harness()
    h.ok(c.SetClusterFormat(T0, fmt))
    return h


def dump(m: JobStateMachine) -> dict[str, Any]:
    """Everything observable about a machine, indexes included, as plain values: the records, every stored
    index (each table's rows but the small state's, which is below as values) and the in-memory indexes."""
    return {
        "now": m.now_ms,
        "applied": m.applied_index,
        "jobs": {k: job_to_plain(j) for k, j in m.jobs.items()},
        "runs": {k: run_to_plain(r) for k, r in m.runs.items()},
        "tables": {t: list(iter_table(m.store, t)) for t in Table.ALL if t != Table.META},
        "pending": {q: list(v) for q, v in m.pending.items() if v},
        "pending_by_type": {q: list(v) for q, v in m.pending_by_type.items() if v},
        "idempotency": dict(m.idempotency.items()),
        "leases": dict(m.leases),
        "lease_deadlines": list(m.lease_deadlines),
        "counts": (dict(m.run_counts), dict(m.job_counts)),
        "members": dict(m.members),
        "membership": (dict(m.roster), m.member_change, dict(m.removed_members), m.cluster_format, dict(m.member_rafts)),
    }


def same(a: Any, b: Any) -> bool:
    """Two answers name the same record with the same fields (records come back detached: compare values)."""
    plain = job_to_plain if isinstance(a, Job) else run_to_plain
    return type(a) is type(b) and plain(a) == plain(b)


def lease(h: Harness, run_id: str, executor: str = "ex-1") -> Run:
    """Lease ``run_id`` with a committed AcquireLeases (it must be the oldest leasable run of its queue)."""
    run = h.m.runs[run_id]
    grants = h.ok(c.AcquireLeases(max(h.m.now_ms, run.not_before_ms), executor, (run.queue,), 1))
    assert [g.run.run_id for g in grants] == [run_id]
    run = h.m.runs[run_id]
    assert run.status is RunStatus.LEASED
    return run


def active_ids(m: JobStateMachine, job_id: str) -> set[str]:
    """Ids of ``job_id``'s PENDING and LEASED runs, from the machine's index of active runs."""
    return {r.run_id for r in m.active_runs(job_id)}


def complete(h: Harness, run: Run, succeeded: bool, now: int | None = None) -> Any:
    return h.ok(c.CompleteRun(now or h.m.now_ms, run.lease_id, run.fencing_token, succeeded, b"out", "", "file:///log"))


def late_fire(policy: MisfirePolicy, catchup: int = 24 * 3600 * SEC) -> Harness:
    """Every 1 s from T0, first fired at T0 + 10 s with a 500 ms misfire threshold."""
    h = Harness()
    h.create("j1", Every(SEC), misfire=policy, catchup_window_ms=catchup)
    h.fire(T0 + 10 * SEC, threshold=500)
    return h
