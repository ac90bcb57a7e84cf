"""What a node answers while a disk refuses writes (``raftsched.cluster.node.replica``, ``raftsched.cluster.node.disk_majority``):
its own disk — writes UNAVAILABLE naming it, nothing proposed, reads served from what it stored without a barrier
it could not apply; a majority of the members' disks — writes RESOURCE_EXHAUSTED naming the nodes and paths; and
the Raft adapter's words reach the node's health (``RaftNode.on_storage`` -> ``Fitness``)."""

from __future__ import annotations

from typing import Any, Callable

import grpc
import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import Overloaded, Unavailable
from raftsched.cluster.domain.model import Every, JobSpec
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.clock import FakeClock
from raftsched.cluster.node.disk_majority import DiskMajority
from raftsched.cluster.node.event_hub import EventHub
from raftsched.cluster.node.fitness import REPORT_STORAGE_OK, REPORT_UNFIT, STORAGE, Fitness
from raftsched.cluster.node.replica import Replica
from raftsched.rpc.server.errors import status_of

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000
FULL = "disk full: /var/lib/raftsched/n{} (0.0 MiB free): free space on its disk or grow it; the node resumes by itself"


class CountingRaft:
    """A one-node Raft that applies every proposal at once and counts what it was asked."""

    def __init__(self, machine: JobStateMachine) -> None:
        self.machine = machine
        self.proposed = 0
        self.fail_with: Exception | None = None

    def propose_many(self, proposals: list[tuple[bytes, int]], timeout: float) -> list[Any]:
        self.proposed += len(proposals)
        if self.fail_with is not None:
            return [self.fail_with for _ in proposals]
        out = []
        for data, _ in proposals:
            out.append(self.machine.apply(data, self.proposed))
            self.machine.commit()
        return out

    def propose_async(self, data: bytes, callback: Callable[[Any, int], None]) -> None:
        self.proposed += 1
        callback(None, 0)

    def is_leader(self) -> bool:
        return True


def _node() -> tuple[Replica, CountingRaft, Fitness, dict[str, tuple[float, dict[str, Any]]]]:
    machine = JobStateMachine()
    clock = FakeClock(T0)
    store = Replica(machine, clock, EventHub(clock.now_ms), 1.0)
    raft = CountingRaft(machine)
    store.attach(raft)
    fitness = Fitness()
    reports: dict[str, tuple[float, dict[str, Any]]] = {}
    members = ["r1", "r2", "r3"]
    disks = DiskMajority(fitness, lambda: members, lambda: dict(reports), lambda a: a.replace("r", "n"), monotonic=lambda: 100.0)
    store.disk_refusal = lambda: fitness.problems().get(STORAGE)
    store.disks_exhausted = disks.exhausted
    return store, raft, fitness, reports


def _create(name: str) -> c.CreateJob:
    return c.CreateJob(T0, name, JobSpec(name=name, schedule=Every(60_000), type="noop"))


def _says_full(reports: dict[str, tuple[float, dict[str, Any]]], address: str, heard_at: float = 99.0) -> None:
    node = address.replace("r", "")
    reports[address] = (heard_at, {REPORT_STORAGE_OK: False, REPORT_UNFIT: FULL.format(node)})


def test_a_node_that_cannot_write_proposes_nothing_and_serves_what_it_stored() -> None:
    store, raft, fitness, _ = _node()
    store.execute(_create("j1"))
    fitness.set(STORAGE, FULL.format(1))
    with pytest.raises(Unavailable) as refused:
        store.execute(_create("j2"))
    assert raft.proposed == 1 and FULL.format(1) in str(refused.value) and "another node" in str(refused.value)
    assert status_of(refused.value) == (grpc.StatusCode.UNAVAILABLE, str(refused.value))  # clients try another node
    proposed = raft.proposed
    assert store.read_records(lambda records: records.job("j1")) is not None  # no barrier: it could not apply one
    assert store.read(lambda m: m.job_counts) is not None and raft.proposed == proposed
    fitness.set(STORAGE, None)
    store.execute(_create("j2"))
    assert raft.proposed == proposed + 1


def test_while_a_majority_cannot_write_writes_are_resource_exhausted_naming_them() -> None:
    store, raft, fitness, reports = _node()
    _says_full(reports, "r2")
    store.execute(_create("j1"))  # one of three: writes go on
    _says_full(reports, "r3")
    with pytest.raises(Overloaded) as exhausted:
        store.execute(_create("j2"))
    message = str(exhausted.value)
    assert raft.proposed == 1 and "2 of the 3 members cannot write their disks" in message
    assert f"[n2] {FULL.format(2)}" in message and f"[n3] {FULL.format(3)}" in message
    assert status_of(exhausted.value) == (grpc.StatusCode.RESOURCE_EXHAUSTED, message)
    fitness.set(STORAGE, FULL.format(1))  # this node too: still RESOURCE_EXHAUSTED, naming it as well
    with pytest.raises(Overloaded, match=r"3 of the 3 members.*\[n1\] disk full: /var/lib/raftsched/n1"):
        store.execute(_create("j2"))


def test_a_write_that_did_not_commit_while_the_others_fill_up_is_resource_exhausted() -> None:
    store, raft, _, reports = _node()
    raft.fail_with = RuntimeError("the command did not commit in time (no leader or no quorum?)")
    with pytest.raises(Unavailable, match="did not commit in time"):
        store.execute(_create("j1"))
    _says_full(reports, "r2")
    _says_full(reports, "r3")
    answers = store.execute_each([1, 2], lambda i: _create(f"j{i}"))
    assert all(isinstance(a, Overloaded) for a in answers)


def test_only_fresh_reports_that_say_so_count_a_member_as_unable_to_write() -> None:
    fitness = Fitness()
    reports = {
        "r2": (99.0, {REPORT_STORAGE_OK: False, REPORT_UNFIT: FULL.format(2)}),
        "r3": (90.0, {REPORT_STORAGE_OK: False, REPORT_UNFIT: FULL.format(3)}),  # stale: down, not full
    }
    disks = DiskMajority(fitness, lambda: ["r1", "r2", "r3"], lambda: reports, lambda a: a, monotonic=lambda: 100.0)
    assert disks.unwritable() == [("r2", FULL.format(2))] and disks.exhausted() is None
    reports["r3"] = (99.5, {REPORT_STORAGE_OK: True, REPORT_UNFIT: ""})
    assert disks.exhausted() is None
    fitness.set(STORAGE, FULL.format(1))
    assert disks.exhausted() is not None and [n for n, _ in disks.unwritable()] == ["r1", "r2"]
