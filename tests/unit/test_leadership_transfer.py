"""A leader that hands its leadership over (``RaftMembership.transfer_leadership``) starts the transfer at the first
tick a follower has its whole log: pysyncobj refuses a transfer to a follower that lags (REQUEST_DENIED), and under
load the leader's log moves on between most ticks, so a single try a second could be refused for seconds."""

from __future__ import annotations

from typing import Any

import pytest
from pysyncobj import FAIL_REASON

from raftsched.raft import membership
from raftsched.raft.membership import RaftMembership

pytestmark = pytest.mark.unit


class Replica:
    """pysyncobj's side: a leader whose followers lag for the first ``lagging`` tries."""

    def __init__(self, lagging: int) -> None:
        self.lagging = lagging
        self.leader = True
        self.tries: list[tuple[float, str | None]] = []
        self.sent: list[str | None] = []
        self.clock = [1000.0]

    def _isLeader(self) -> bool:
        return self.leader

    def addOnTickCallback(self, callback: Any) -> None:
        pass

    def transferLeadership(self, node: str | None, callback: Any) -> None:
        self.tries.append((self.clock[0], node))
        if not self.leader:
            callback(None, FAIL_REASON.NOT_LEADER)
        elif len(self.tries) <= self.lagging:
            callback(None, FAIL_REASON.REQUEST_DENIED)  # no follower has the whole log at this tick
        else:
            self.sent.append(node)
            callback(None, FAIL_REASON.SUCCESS)


def _ticks(m: RaftMembership, replica: Replica, n: int, every_s: float = 0.005) -> None:
    for _ in range(n):
        replica.clock[0] += every_s
        m.on_tick()


@pytest.fixture
def replica(monkeypatch: pytest.MonkeyPatch) -> Replica:
    r = Replica(lagging=30)
    monkeypatch.setattr(membership.time, "monotonic", lambda: r.clock[0])
    return r


def test_a_refused_transfer_is_tried_again_on_each_tick_until_a_follower_has_the_log(replica: Replica) -> None:
    m = RaftMembership(replica, 0.8)
    m.transfer_leadership()
    m.on_tick()
    assert len(replica.tries) == 1 and replica.sent == []  # refused once: not again within the same tick
    _ticks(m, replica, 100)
    assert replica.sent == [None] and len(replica.tries) == 31  # sent at the first tick it could be: 150 ms, not 30 s
    tried_at = [t for t, _ in replica.tries]
    assert all(b > a for a, b in zip(tried_at, tried_at[1:]))  # one try a tick
    _ticks(m, replica, 100)
    assert len(replica.tries) == 31  # nothing more once it was sent


def test_tries_stop_after_their_time_or_when_this_node_no_longer_leads(replica: Replica) -> None:
    replica.lagging = 10_000
    m = RaftMembership(replica, 0.8)
    m.transfer_leadership("n2:4321", tries_s=0.5)
    _ticks(m, replica, 400)  # 2 s of ticks
    assert replica.sent == [] and 95 <= len(replica.tries) <= 102  # about 0.5 s of ticks, then it waits to be asked
    assert {node for _, node in replica.tries} == {"n2:4321"}
    before = len(replica.tries)
    m.transfer_leadership()
    _ticks(m, replica, 3)
    replica.leader = False  # another node leads: the refusals stop with the next try
    _ticks(m, replica, 50)
    assert len(replica.tries) - before == 4


def test_other_calls_queued_by_a_call_run_on_the_next_tick() -> None:
    r = Replica(lagging=0)
    m = RaftMembership(r, 0.8)
    ran: list[str] = []

    def first() -> None:
        ran.append("first")
        with m._lock:
            m._calls.append(lambda: ran.append("second"))

    with m._lock:
        m._calls.append(first)
    m.on_tick()
    assert ran == ["first"]
    m.on_tick()
    assert ran == ["first", "second"]
