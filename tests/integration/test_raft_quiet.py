"""A quiet cluster: its leader sends AppendEntries seldom and its nodes tick seldom; anything proposed still
leaves at once and commits everywhere. A busy leader's send carries what was proposed up to it.

In-process RaftNodes (real sockets on loopback, real LMDB logs) with long election timeouts, heartbeats every
2 s and ticks every 1.5 s while quiet, so that "seldom" and "at once" cannot be told apart by luck: every send
the leader makes and every tick of every node is counted.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from pysyncobj.monotonic import monotonic as raft_monotonic

from raftsched.raft.adapter import RaftNode
from raftsched.raft.heartbeats import quiet
from tests.helpers import wait_for
from tests.integration.test_raft_port import Counter, journaled_nodes, leader_of

pytestmark = pytest.mark.integration

IDLE_S = 2.0
QUIET_WAIT_S = 1.5


@pytest.fixture
def three(tmp_path: Path) -> Iterator[list[RaftNode]]:
    nodes = journaled_nodes(tmp_path, raft_min_timeout=6.0, raft_max_timeout=8.0, leader_fallback_timeout=10.0)
    for node in nodes:
        node._replica._idle_period = IDLE_S
        node._replica._quiet_wait = QUIET_WAIT_S
        node.peer_probes._interval = 600.0  # no probe wakes a tick thread early: only what the test looks at
    try:
        yield nodes
    finally:
        for n in nodes:
            n.stop()


class Sends:
    """The AppendEntries the leader sends, with the time of each."""

    def __init__(self, node: RaftNode) -> None:
        self.times: list[float] = []
        transport = node._replica._SyncObj__transport
        send = transport.send

        def counted(peer: Any, message: Any) -> Any:
            if isinstance(message, dict) and message.get("type") == "append_entries":
                self.times.append(time.monotonic())
            return send(peer, message)

        transport.send = counted

    def since(self, t: float) -> int:
        return sum(1 for x in self.times if x >= t)


class Ticks:
    """Every tick of a node (its tick thread calls back at the end of each)."""

    def __init__(self, node: RaftNode) -> None:
        self.count = 0
        node._replica.addOnTickCallback(self._tick)

    def _tick(self) -> None:
        self.count += 1


def _all_applied(nodes: list[RaftNode], index: int) -> bool:
    return min(n.applied_index for n in nodes) >= index


def test_a_quiet_leader_sends_seldom_and_a_proposal_still_leaves_at_once(three: list[RaftNode]) -> None:
    leader = leader_of(three)
    term = leader.term
    for k in range(20):
        leader.propose(b"warm%d" % k, timeout=10)
    wait_for(lambda: _all_applied(three, leader.applied_index), 10, "the warm-up entries were not applied everywhere")
    wait_for(lambda: quiet(leader._replica), 10, "the leader never found its log quiet")
    sends = Sends(leader)
    ticks = [Ticks(n) for n in three]

    began = time.monotonic()
    time.sleep(3 * IDLE_S)
    quiet_sends = sends.since(began)
    # 2 followers, a send each every IDLE_S: ~6; every append period (10 ms) it would be ~1,200
    assert 2 <= quiet_sends <= 12, f"{quiet_sends} AppendEntries in {3 * IDLE_S:.0f} s of a quiet log"
    counts = [t.count for t in ticks]
    # a tick per QUIET_WAIT_S, one per heartbeat or answer, a few for probes: ~15; every 5 ms it would be ~1,200
    assert max(counts) <= 60, f"ticks in {3 * IDLE_S:.0f} s of a quiet log, by node: {counts}"

    # right after a quiet heartbeat, the next one is IDLE_S away, and every tick thread may be waiting for
    # QUIET_WAIT_S: a proposal must wait for neither (waiting for the tick, each would come within 0.3 s one time
    # in five, all four one time in ~600)
    n = len(sends.times)
    wait_for(lambda: len(sends.times) > n, 3 * IDLE_S, "no heartbeat came")
    follower = next(x for x in three if x is not leader)
    for proposer in (leader, follower, leader, follower):
        asked = time.monotonic()
        proposer.propose(b"after-quiet", timeout=10)
        wait_for(lambda: _all_applied(three, leader.applied_index), 5.0, "a proposal was not applied everywhere", 0.01)
        took = time.monotonic() - asked
        assert took < 0.3, f"committed and applied everywhere {took:.2f} s after it was proposed"
        wait_for(lambda: quiet(leader._replica), 5, "the leader did not find its log quiet again")
    assert {n.term for n in three} == {term}, "an election happened while the leader was quiet"


def test_a_follower_that_comes_back_is_caught_up_by_a_quiet_leader(three: list[RaftNode]) -> None:
    leader = leader_of(three)
    follower = next(n for n in three if n is not leader)
    others = [n for n in three if n is not follower]
    for k in range(10):
        leader.propose(b"before%d" % k, timeout=10)
    wait_for(lambda: _all_applied(three, leader.applied_index), 10, "the first entries were not applied everywhere")
    settings, lock = follower.settings, threading.RLock()
    follower.stop()
    for k in range(30):
        leader.propose(b"while-away%d" % k, timeout=10)
    wait_for(lambda: quiet(leader._replica), 10, "the leader never found its log quiet without the follower")
    back = RaftNode(settings, Counter(), lock)
    three[three.index(follower)] = back  # the fixture stops it

    def caught_up() -> bool:
        return _all_applied(others + [back], leader.applied_index)

    wait_for(caught_up, 5 * IDLE_S, "the follower that came back was not caught up")
    assert back.commit_index == leader.commit_index


def test_a_proposal_queued_while_the_leader_is_busy_leaves_with_the_next_send(tmp_path: Path) -> None:
    """pysyncobj's tick sends, then appends what is queued: a proposal queued while the tick thread was busy (as a
    gRPC thread proposes while the tick applies) must go with the send that tick makes, not one period later."""
    period = 1.0
    nodes = journaled_nodes(
        tmp_path, raft_min_timeout=6.0, raft_max_timeout=8.0, leader_fallback_timeout=10.0, append_entries_period=period
    )
    try:
        for node in nodes:
            node._replica._idle_period = period  # the same period, quiet or not
            node.peer_probes._interval = 600.0
        leader = leader_of(nodes)
        replica: Any = leader._replica
        leader.propose(b"first", timeout=10)
        wait_for(lambda: _all_applied(nodes, leader.applied_index), 10, "the first entry was not applied everywhere")
        queue = replica._SyncObj__commandsQueue
        armed, busy = threading.Event(), threading.Event()
        released: list[float] = []

        def busy_tick() -> None:  # on the tick thread, after the tick appended what was queued
            if not armed.is_set():
                return
            armed.clear()
            busy.set()
            wait_for(lambda: len(queue._FastQueue__queue) > 0, 5, "the proposal was not queued", 0.001)
            # busy until the next send is due: the next tick sends first, with the proposal still in the queue
            time.sleep(max(0.0, replica._SyncObj__newAppendEntriesTime - raft_monotonic()) + 0.05)
            released.append(time.monotonic())

        replica.addOnTickCallback(busy_tick)
        took: list[float] = []
        for k in range(3):
            armed.set()
            wait_for(busy.is_set, 5, "the leader's tick thread did not come round", 0.001)
            busy.clear()
            leader.propose(b"queued-while-busy%d" % k, timeout=10)
            took.append(time.monotonic() - released[-1])
        # sent by the tick right after the busy one: committed a round trip later, not a period (1 s) later
        assert max(took) < 0.4, f"committed {[round(t, 2) for t in took]} s after the send was due: it missed the send"
    finally:
        for n in nodes:
            n.stop()


def test_a_proposal_to_a_leader_with_nothing_in_flight_leaves_at_once(tmp_path: Path) -> None:
    """Sends wait for the append period only while something is in flight (to batch what comes meanwhile): a
    proposal made when every entry is committed and acknowledged goes out at once, so one client's calls one after
    the other each take a round trip, not a period."""
    period = 1.0
    nodes = journaled_nodes(
        tmp_path, raft_min_timeout=6.0, raft_max_timeout=8.0, leader_fallback_timeout=10.0, append_entries_period=period
    )
    try:
        for node in nodes:
            node._replica._idle_period = 2 * period
            node.peer_probes._interval = 600.0
        leader = leader_of(nodes)
        took: list[float] = []
        for k in range(6):
            wait_for(lambda: quiet(leader._replica), 10, "the leader never found its log quiet", 0.001)
            asked = time.monotonic()
            leader.propose(b"one-after-the-other%d" % k, timeout=10)
            took.append(time.monotonic() - asked)
            wait_for(lambda: _all_applied(nodes, leader.applied_index), 10, "an entry was not applied everywhere", 0.001)
        assert max(took) < 0.3, f"commits took {[round(t, 2) for t in took]} s: a send waited for the period (1 s)"
    finally:
        for n in nodes:
            n.stop()
