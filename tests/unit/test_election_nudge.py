"""A follower busy applying what its leader sent does not campaign when it is done (``RaftNode._still_hearing_the_leader``):
pysyncobj looks at the election deadline before it reads the heartbeats that came while it applied."""

from __future__ import annotations

import time
from typing import Any

import pytest

from raftsched.raft import adapter
from raftsched.raft.adapter import RaftNode
from raftsched.raft.membership import RaftMembership

pytestmark = pytest.mark.unit


class Replica:
    def __init__(self, leader: bool) -> None:
        self.leader = leader
        self._SyncObj__raftElectionDeadline = time.monotonic() + 0.8

    def _isLeader(self) -> bool:
        return self.leader

    def addOnTickCallback(self, callback: Any) -> None:
        pass


def _node(leader: bool) -> tuple[RaftNode, Replica]:
    replica = Replica(leader)
    node = RaftNode.__new__(RaftNode)
    node._replica = replica  # type: ignore[assignment]
    node._nudged = 0.0
    node.membership = RaftMembership(replica, 0.8)
    return node, replica


def test_a_follower_applying_a_long_backlog_keeps_its_election_timer_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    node, replica = _node(leader=False)
    clock = [1000.0]
    monkeypatch.setattr(adapter.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr("raftsched.raft.membership.time.monotonic", lambda: clock[0])
    replica._SyncObj__raftElectionDeadline = 1000.8  # heard from the leader just now
    for _ in range(3000):  # 3 s of applying, 1 ms an entry: three election timeouts
        clock[0] += 0.001
        node._still_hearing_the_leader()
    assert replica._SyncObj__raftElectionDeadline >= clock[0] + 0.7  # no campaign at the next tick


def test_the_timer_is_restarted_at_most_every_nudge_period_and_never_on_the_leader(monkeypatch: pytest.MonkeyPatch) -> None:
    restarts: list[float] = []
    clock = [1000.0]
    monkeypatch.setattr(adapter.time, "monotonic", lambda: clock[0])
    node, _ = _node(leader=False)
    monkeypatch.setattr(node.membership, "restart_election_timer", lambda: restarts.append(clock[0]))
    for _ in range(1000):  # a thousand entries, 0.5 ms each: 0.5 s
        clock[0] += 0.0005
        node._still_hearing_the_leader()
    assert len(restarts) == 5 and all(b - a >= adapter.ELECTION_NUDGE_S for a, b in zip(restarts, restarts[1:]))
    leader, _ = _node(leader=True)
    monkeypatch.setattr(leader.membership, "restart_election_timer", lambda: restarts.append(-1.0))
    leader._still_hearing_the_leader()
    assert -1.0 not in restarts and adapter.ELECTION_NUDGE_S == pytest.approx(0.1)


def test_entries_applied_before_the_node_is_built_are_fine() -> None:
    node = RaftNode.__new__(RaftNode)
    node._nudged = 0.0
    node._still_hearing_the_leader()  # no membership yet: nothing to do, nothing raised
