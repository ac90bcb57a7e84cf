"""Applying committed entries with one held back (``raftsched.raft.apply_hold``), against a stand-in for pysyncobj's replica:
a held entry keeps its callbacks and does not count as applied, nothing after it is applied, it is tried again
only when due, and then it and the rest are applied in order and answered once. A tick applies for its budget
and reads the log a chunk at a time. A snapshot from the leader that the disk cannot take yet is installed once
it can (``RaftNode._install``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pysyncobj import FAIL_REASON

from raftsched.raft import adapter
from raftsched.raft.apply_hold import ApplyHold, EntryHeld, apply_committed
from raftsched.raft.disk_trouble import DiskTrouble

pytestmark = pytest.mark.unit


class Replica:
    """pysyncobj's attributes ``apply_committed`` reads, with entries 1..n of term 1 all committed."""

    def __init__(self, entries: int, refuse: set[int]) -> None:
        self._SyncObj__raftCommitIndex = entries
        self._SyncObj__raftLastApplied = 0
        self._SyncObj__commandsWaitingCommit: dict[int, list[Any]] = {}
        self._SyncObj__conf = SimpleNamespace(appendEntriesUseBatch=True)
        self._log = [(b"e%d" % i, i, 1) for i in range(1, entries + 1)]
        self.refuse = refuse
        self.applied: list[int] = []

    def _SyncObj__getEntries(self, start: int, count: int) -> list[Any]:
        return self._log[start - 1 : start - 1 + count]

    def _SyncObj__doApplyCommand(self, command: bytes) -> int:
        index = self._SyncObj__raftLastApplied + 1
        if index in self.refuse:
            raise EntryHeld("disk full")
        self.applied.append(index)
        return index * 10


def test_a_held_entry_keeps_its_callbacks_and_nothing_after_it_is_applied() -> None:
    now = [0.0]
    hold = ApplyHold(monotonic=lambda: now[0], retry_every=1.0)
    replica = Replica(5, refuse={3})
    answers: list[tuple[Any, int]] = []
    for index in range(1, 6):
        replica._SyncObj__commandsWaitingCommit[index] = [(1, lambda r, e: answers.append((r, e)))]
    apply_committed(replica, hold)
    assert replica.applied == [1, 2] and replica._SyncObj__raftLastApplied == 2
    assert answers == [(10, FAIL_REASON.SUCCESS), (20, FAIL_REASON.SUCCESS)] and 3 in replica._SyncObj__commandsWaitingCommit
    hold.hold(3, None, kept=False)  # what the adapter does before it raises EntryHeld
    replica.refuse = set()
    now[0] = 0.5
    apply_committed(replica, hold)  # not due: nothing is tried
    assert replica.applied == [1, 2]
    now[0] = 1.0
    apply_committed(replica, hold)
    assert replica.applied == [1, 2, 3, 4, 5] and replica._SyncObj__raftLastApplied == 5
    assert [r for r, _ in answers] == [10, 20, 30, 40, 50] and not replica._SyncObj__commandsWaitingCommit


def test_an_entry_of_another_term_is_discarded_for_its_proposer() -> None:
    replica = Replica(1, refuse=set())
    answers: list[tuple[Any, int]] = []
    replica._SyncObj__commandsWaitingCommit[1] = [(2, lambda r, e: answers.append((r, e)))]
    apply_committed(replica, ApplyHold())
    assert answers == [(None, FAIL_REASON.DISCARDED)]


class Refused(Exception):
    storage_problem = "disk full: /d/state.mdb.new (0.0 MiB free): free space on its disk or grow it"


def test_a_snapshot_the_disk_cannot_take_yet_is_installed_once_it_can(monkeypatch: pytest.MonkeyPatch) -> None:
    node = adapter.RaftNode.__new__(adapter.RaftNode)
    node._disk, node._hold, node._stopping = DiskTrouble(), ApplyHold(), False
    heard: list[str | None] = []
    node._disk.on_change(heard.append)
    tries = {"n": 0}

    def load(path: str, snap: Any) -> None:
        tries["n"] += 1
        if tries["n"] < 3:
            raise Refused()

    slept: list[float] = []
    monkeypatch.setattr(node, "_load", load)
    monkeypatch.setattr(adapter.time, "sleep", slept.append)
    node._hold.hold(9, None, kept=False)
    node._install("raft.snapshot", None)  # type: ignore[arg-type]
    assert tries["n"] == 3 and len(slept) == 2 and all(s >= 0.5 for s in slept)
    assert heard == [None, Refused.storage_problem, None] and node._hold.held is None


class TimedReplica(Replica):
    """Each apply takes ``cost`` seconds of the clock ``now``; the log's reads are recorded."""

    def __init__(self, entries: int, now: list[float], cost: float) -> None:
        super().__init__(entries, refuse=set())
        self.now, self.cost = now, cost
        self.reads: list[tuple[int, int]] = []

    def _SyncObj__getEntries(self, start: int, count: int) -> list[Any]:
        self.reads.append((start, count))
        return super()._SyncObj__getEntries(start, count)

    def _SyncObj__doApplyCommand(self, command: bytes) -> int:
        self.now[0] += self.cost
        return super()._SyncObj__doApplyCommand(command)


def test_a_tick_applies_for_its_budget_and_leaves_the_rest_to_the_next() -> None:
    """A tick stops applying once it has spent its budget (after the entry in hand), so that it sends and polls in
    between; the entries left are applied, in order and each answered once, by the ticks after it."""
    now = [0.0]
    replica = TimedReplica(10, now, cost=0.03)
    hold = ApplyHold(monotonic=lambda: now[0], budget_s=0.1)
    answers: list[Any] = []
    for index in range(1, 11):
        replica._SyncObj__commandsWaitingCommit[index] = [(1, lambda r, e: answers.append(r))]
    apply_committed(replica, hold)
    assert replica.applied == [1, 2, 3, 4] and replica._SyncObj__raftLastApplied == 4 and answers == [10, 20, 30, 40]
    apply_committed(replica, hold)
    apply_committed(replica, hold)
    assert replica.applied == list(range(1, 11)) and answers == [10 * i for i in range(1, 11)]
    assert not replica._SyncObj__commandsWaitingCommit
    apply_committed(replica, hold)  # nothing left
    assert replica.applied == list(range(1, 11))


def test_a_long_catch_up_reads_the_log_a_chunk_at_a_time() -> None:
    now = [0.0]
    replica = TimedReplica(1000, now, cost=0.0)
    apply_committed(replica, ApplyHold(monotonic=lambda: now[0]))
    assert replica.applied == list(range(1, 1001))
    assert replica.reads == [(1, 256), (257, 256), (513, 256), (769, 232)]
    slow = TimedReplica(1000, now, cost=0.06)
    apply_committed(slow, ApplyHold(monotonic=lambda: now[0], budget_s=0.1))
    assert slow.applied == [1, 2] and slow.reads == [(1, 256)]  # what it did not get to is not read
