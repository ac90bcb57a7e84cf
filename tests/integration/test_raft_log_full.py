"""A full Raft log is a clear, quick refusal: real RaftNodes (pysyncobj, LMDB journals, sockets on loopback)
whose log map is made tiny. Proposals fail at once with a message naming the size and ``[raft]
max_log_bytes``, on the node that receives them and, forwarded by a follower, on the leader; nothing
stalls and the tick thread goes on (the node still answers)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from raftsched.cluster.app.local_cluster import free_ports
from raftsched.raft.adapter import ProposalError, RaftNode, RaftSettings
from tests.integration.test_raft_port import Counter, leader_of

pytestmark = pytest.mark.integration

SMALL = 4 << 20
BIG = 1 << 30
COMMAND = b"c" * 60_000


#: what a proposer is told to retry (``raftsched.raft.adapter``): a moment without a leader while the log fills is not the
#: refusal these tests wait for
_RETRY = ("MISSING_LEADER", "LEADER_CHANGED", "DISCARDED")


def _fill_until_refused(node: RaftNode) -> ProposalError:
    for _ in range(200):
        started = time.monotonic()
        try:
            node.propose(COMMAND, timeout=5)
        except ProposalError as exc:
            if exc.reason in _RETRY:
                time.sleep(0.2)
                continue
            assert time.monotonic() - started < 1.0, "the refusal should be at once, not a timeout"
            return exc
    raise AssertionError("a 4 MiB log took 12 MB of commands")


def test_a_full_log_refuses_proposals_at_once(tmp_path: Path) -> None:
    (addr,) = [f"127.0.0.1:{p}" for p in free_ports(1)]
    settings = RaftSettings(
        self_address=addr, peer_addresses=(), journal_file=str(tmp_path / "raft.lmdb"), journal_map_size=SMALL
    )
    node = RaftNode(settings, Counter(), threading.RLock())
    try:
        leader_of([node])
        error = _fill_until_refused(node)
        assert error.reason == "LOG_FULL"
        assert f"[raft] max_log_bytes = {SMALL} bytes" in str(error) and "nothing was written" in str(error)
        applied = node.applied_index
        node.propose(b"a small command still fits", timeout=5)  # the node goes on serving
        assert node.applied_index == applied + 1
        with pytest.raises(ProposalError, match="max_log_bytes"):
            node.propose(COMMAND, timeout=5)
    finally:
        node.stop()


def test_a_full_leader_refuses_what_a_follower_forwards(tmp_path: Path) -> None:
    addrs = [f"127.0.0.1:{p}" for p in free_ports(2)]
    nodes = []
    for i, (a, size) in enumerate(zip(addrs, (SMALL, BIG))):
        settings = RaftSettings(
            self_address=a,
            peer_addresses=tuple(x for x in addrs if x != a),
            journal_file=str(tmp_path / f"n{i}" / "raft.lmdb"),
            journal_map_size=size,
            raft_min_timeout=0.3 if size == SMALL else 3.0,  # the small-map node becomes the leader
            raft_max_timeout=0.5 if size == SMALL else 4.0,
        )
        nodes.append(RaftNode(settings, Counter(), threading.RLock()))
    try:
        leader = leader_of(nodes)
        assert leader is nodes[0], "the node with the small map should lead"
        error = _fill_until_refused(nodes[1])  # proposed on the follower, forwarded, refused by the leader
        assert error.reason == "LOG_FULL" and "max_log_bytes" in str(error)
        assert nodes[1]._journal is not None and nodes[1]._journal.has_room(len(COMMAND))  # the follower had room
    finally:
        for n in nodes:
            n.stop()
