"""Survivors always elect: in-process RaftNodes (our connection class, real sockets on loopback), with and
without a secret.

Followers exchange no Raft messages while a leader is up, so the connection between two of them can sit
idle for as long as that leader lives. When the leader dies, that connection is the only way the survivors
can elect: it must still be counted on both sides, or be found dead and dialled again, within seconds.
"""

from __future__ import annotations

import threading
import time
from typing import Iterator

import pytest

from raftsched.cluster.app.local_cluster import free_ports
from raftsched.raft.adapter import RaftNode, RaftSettings
from tests.integration.test_raft_port import SECRET, Counter

pytestmark = pytest.mark.integration

#: the contract: a new leader within 5 s of the old one's death, every time
ELECTION_BOUND_S = 5.0
#: and a restarted node back in agreement within 10 s
REJOIN_BOUND_S = 10.0


def _node(settings: RaftSettings) -> RaftNode:
    return RaftNode(settings, Counter(), threading.RLock())


def _start(addrs: list[str], password: str | None) -> list[RaftNode]:
    """Three nodes; only the one that dials both others may campaign at first (pysyncobj: the greater
    address dials), so it leads and the other two only ever talk to each other on their own link."""
    top = max(addrs)
    nodes = []
    for a in addrs:
        node = _node(RaftSettings(self_address=a, peer_addresses=tuple(x for x in addrs if x != a), password=password))
        node.membership.hold_elections(a != top)  # long before a first election timeout could pass
        nodes.append(node)
    return nodes


def _agreed_leader(nodes: list[RaftNode], timeout: float) -> RaftNode | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leaders = {n.leader_address() for n in nodes}
        if len(leaders) == 1:
            (address,) = leaders
            for n in nodes:
                if n.settings.self_address == address and n.is_leader():
                    return n
        time.sleep(0.02)
    return None


def _describe(nodes: list[RaftNode]) -> str:
    return "; ".join(
        f"{n.settings.self_address}: term {n.term}, leader {n.leader_address()}, "
        f"connected {[p for p in n.settings.peer_addresses if n.is_connected(p)]}"
        for n in nodes
    )


@pytest.fixture(params=["secret", "no-secret"])
def three(request: pytest.FixtureRequest) -> Iterator[list[RaftNode]]:
    addrs = [f"127.0.0.1:{p}" for p in free_ports(3)]
    nodes = _start(addrs, SECRET if request.param == "secret" else None)
    try:
        yield nodes
    finally:
        for n in nodes:
            n.stop()


@pytest.mark.parametrize("first", ["dialer", "listener"])
def test_survivors_of_a_long_lived_leader_elect_within_seconds(three: list[RaftNode], first: str) -> None:
    """``first``: which survivor campaigns first — the one that dials the other (its vote request is the first
    use of the idle link) or the one that listens (it hears the link close)."""
    nodes = list(three)
    leader = _agreed_leader(nodes, 15.0)
    assert leader is not None and leader.settings.self_address == max(n.settings.self_address for n in nodes)
    for n in nodes:
        n.membership.hold_elections(False)
    leader.propose(b"x", timeout=5)
    # longer than a connection's timeout: the followers' link to each other carried nothing meanwhile
    time.sleep(leader.settings.connection_timeout + 1.5)
    survivors = sorted((n for n in nodes if n is not leader), key=lambda n: n.settings.self_address)
    listener, dialer = survivors
    (listener if first == "dialer" else dialer).membership.hold_elections(True)  # it still votes
    leader.stop()
    died = time.monotonic()
    time.sleep(ELECTION_BOUND_S / 2)
    listener.membership.hold_elections(False)
    dialer.membership.hold_elections(False)
    new = _agreed_leader(survivors, ELECTION_BOUND_S - (time.monotonic() - died))
    assert new is not None, f"no leader {ELECTION_BOUND_S} s after the leader died: {_describe(survivors)}"
    assert new.propose(b"after", timeout=5) > 1

    # the dead node back under its address (in memory: a fresh log) agrees with the others within 10 s
    back = _node(leader.settings)
    three.append(back)
    everyone = [*survivors, back]
    assert _agreed_leader(everyone, REJOIN_BOUND_S) is not None, f"no agreement after the restart: {_describe(everyone)}"
