"""A leader that sends a follower entries again, from an earlier index, costs the follower nothing it held.

In-process RaftNodes (real sockets on loopback, real LMDB logs). The leader's
next index for one follower is moved back, on its own tick thread, as a
follower's ``reset`` answer moves it, while commands keep coming: the
follower must delete no entry (none conflicts: there is one leader, one
term), its log must never end before what it has applied, and every node
must end with the same log and state.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from raftsched.raft.adapter import RaftNode
from tests.integration.test_raft_port import journaled_nodes, leader_of

pytestmark = pytest.mark.integration

REWINDS = 40
#: how far back each rewind moves the leader's next index for the follower
BACK = 25


@pytest.fixture
def three(tmp_path: Path) -> Iterator[list[RaftNode]]:
    nodes = journaled_nodes(tmp_path)
    try:
        yield nodes
    finally:
        for n in nodes:
            n.stop()


def _log(node: RaftNode) -> list[tuple[int, int]]:
    return [(e[1], e[2]) for e in node._replica._SyncObj__raftLog[0:]]


def test_a_resend_from_an_earlier_index_deletes_no_entry_a_follower_holds(three: list[RaftNode]) -> None:
    leader = leader_of(three)
    follower = next(n for n in three if n is not leader)
    replica: Any = leader._replica
    (peer,) = [p for p in replica._SyncObj__otherNodes if p.address == follower.settings.self_address]

    deleted: list[int] = []
    journal = follower._replica._SyncObj__raftLog
    delete_from = journal.deleteEntriesFrom
    journal.deleteEntriesFrom = lambda at: (deleted.append(at), delete_from(at))[1]
    short: list[tuple[int, int]] = []  # (last log index, last applied) whenever the log ended before what was applied

    def watch() -> None:  # the follower's tick thread
        last, applied = follower._replica._SyncObj__getCurrentLogIndex(), follower._replica._SyncObj__raftLastApplied
        if last < applied:
            short.append((last, applied))

    follower._replica.addOnTickCallback(watch)
    rewinds = [0]
    rewound: list[int] = []

    def rewind() -> None:  # the leader's tick thread, as a ``reset`` answer from the follower would
        if rewinds[0] <= 0 or not replica._isLeader():
            return
        rewinds[0] -= 1
        nxt = replica._SyncObj__raftNextIndex.get(peer)
        if nxt and nxt > BACK + 2:
            replica._SyncObj__raftNextIndex[peer] = nxt - BACK
            rewound.append(nxt - BACK)

    replica.addOnTickCallback(rewind)
    stop = threading.Event()

    def propose() -> None:
        k = 0
        while not stop.is_set():
            leader.propose(b"c%d" % k, timeout=10)
            k += 1

    for k in range(100):
        leader.propose(b"warm%d" % k, timeout=10)
    proposer = threading.Thread(target=propose, daemon=True)
    proposer.start()
    try:
        for _ in range(REWINDS):
            rewinds[0] += 1
            time.sleep(0.05)
    finally:
        stop.set()
        proposer.join(timeout=15)
    assert len(rewound) >= REWINDS // 2, f"the leader's next index was moved back only {len(rewound)} times"

    target = leader.propose(b"last", timeout=10)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and min(n.applied_index for n in three) < leader.applied_index:
        time.sleep(0.05)
    assert {n.applied_index for n in three} == {leader.applied_index}
    assert deleted == [], f"the follower deleted entries it held with the leader's term, from {deleted[:5]}"
    assert short == [], f"the follower's log ended before what it had applied: {short[:5]}"
    assert {n._machine.n for n in three} == {target}  # type: ignore[attr-defined]
    logs = [_log(n) for n in three]
    assert logs[0] == logs[1] == logs[2]
