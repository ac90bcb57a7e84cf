"""The Raft port against a hostile client: real pysyncobj servers (two in-process RaftNodes, with our
connection class) and real sockets on loopback.

Before a peer authenticates, the node reads at most a few KiB from it and
never decompresses or unpickles what it sends; a huge announced length, a
forged frame, a pickle in the clear or a silent connection is dropped, and
the node goes on committing.
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
import threading
import time
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import pytest

from raftsched.cluster.app.local_cluster import free_ports
from raftsched.raft.adapter import RaftNode, RaftSettings
from raftsched.raft.cipher import HELLO_SIZE, MAGIC, RaftCipher
from raftsched.raft.connection import PRE_AUTH_LIMIT
from raftsched.raft.snapshotter import BytesCopy

pytestmark = pytest.mark.integration

SECRET = "the cluster's long shared secret"


class Counter:
    def __init__(self) -> None:
        self.n = 0

    committed_index = 0

    def apply(self, data: bytes, index: int, pos: int) -> int:
        self.n += 1
        return self.n

    def commit(self) -> None:
        pass

    def open_copy(self) -> BytesCopy:
        return BytesCopy(b"")

    def install(self, source: BinaryIO, size: int) -> None:
        source.read(size)

    def restore(self, data: bytes) -> None:
        pass

    def has_room(self) -> bool:
        return True

    def full_message(self) -> str:
        return ""


def start_nodes(password: str | None, count: int = 2) -> list[RaftNode]:
    addrs = [f"127.0.0.1:{p}" for p in free_ports(count)]
    nodes = []
    for a in addrs:
        settings = RaftSettings(self_address=a, peer_addresses=tuple(x for x in addrs if x != a), password=password)
        nodes.append(RaftNode(settings, Counter(), threading.RLock()))
    return nodes


def journaled_nodes(folder: Path, count: int = 3, **tuning: Any) -> list[RaftNode]:
    """``count`` nodes on loopback, each with its Raft log in ``folder`` (not fsynced); ``tuning``: more
    ``RaftSettings`` fields."""
    addrs = [f"127.0.0.1:{p}" for p in free_ports(count)]
    return [
        RaftNode(
            RaftSettings(
                self_address=a,
                peer_addresses=tuple(x for x in addrs if x != a),
                journal_file=str(folder / f"log-{k}"),
                journal_fsync=False,
                **tuning,
            ),  # fmt: skip
            Counter(),
            threading.RLock(),
        )
        for k, a in enumerate(addrs)
    ]


def leader_of(nodes: list[RaftNode], timeout: float = 15.0) -> RaftNode:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leaders = [n for n in nodes if n.is_leader()]
        if len(leaders) == 1:
            return leaders[0]
        time.sleep(0.05)
    raise AssertionError("no leader")


@pytest.fixture()
def secured() -> Iterator[list[RaftNode]]:
    nodes = start_nodes(SECRET)
    try:
        leader_of(nodes)
        yield nodes
    finally:
        for n in nodes:
            n.stop()


@pytest.fixture()
def open_cluster() -> Iterator[list[RaftNode]]:
    nodes = start_nodes(None)
    try:
        leader_of(nodes)
        yield nodes
    finally:
        for n in nodes:
            n.stop()


def raft_port(node: RaftNode) -> tuple[str, int]:
    host, port = node.settings.self_address.rsplit(":", 1)
    return host, int(port)


def dropped(sock: socket.socket, timeout: float = 6.0, keep_sending: bytes = b"") -> bool:
    """True once the node has closed the connection (EOF or reset), within ``timeout``."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if keep_sending:
                sock.send(keep_sending)
            if sock.recv(65536) == b"":
                return True
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


def still_commits(nodes: list[RaftNode]) -> None:
    leader = leader_of(nodes)
    before = leader.propose(b"after the attack", timeout=5)
    assert leader.propose(b"and again", timeout=5) == before + 1


def hello_exchange(node: RaftNode) -> tuple[socket.socket, bytes]:
    sock = socket.create_connection(raft_port(node), timeout=5)
    theirs = b""
    while len(theirs) < HELLO_SIZE:
        chunk = sock.recv(HELLO_SIZE - len(theirs))
        assert chunk, "the node closed before sending its hello"
        theirs += chunk
    assert theirs.startswith(MAGIC)
    return sock, theirs


def test_a_huge_announced_length_is_dropped_and_the_node_keeps_serving(secured: list[RaftNode]) -> None:
    for node in secured:
        sock, _ = hello_exchange(node)
        sock.sendall(MAGIC + os.urandom(32) + struct.pack(">I", 2**31 - 1) + b"\x00" * 1024)
        assert dropped(sock, keep_sending=b"\x00" * 65536), "a 2 GiB announcement was not dropped"
        sock.close()
    still_commits(secured)


def test_a_stream_of_bytes_without_authenticating_is_cut_at_the_limit(secured: list[RaftNode]) -> None:
    sock, _ = hello_exchange(secured[0])
    sock.sendall(MAGIC + os.urandom(32) + struct.pack(">I", 4000))  # within the pre-auth frame limit...
    sent = 0
    sock.settimeout(0.2)
    try:
        while sent < 64 * PRE_AUTH_LIMIT:  # ...then far more than it announced, and more than the limit
            sent += sock.send(b"\x01" * 1024)
    except (socket.timeout, ConnectionResetError, BrokenPipeError):
        pass
    assert dropped(sock)
    sock.close()
    still_commits(secured)


def test_a_pickle_from_an_unauthenticated_peer_is_never_unpickled(secured: list[RaftNode], tmp_path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self) -> Any:
            return (os.system, (f"touch {marker}",))

    payload = zlib.compress(pickle.dumps(Exploit()))
    for prefix in (b"", MAGIC + os.urandom(32)):  # pysyncobj's framing in the clear, and after a well-formed hello
        sock, _ = hello_exchange(secured[0])
        sock.sendall(prefix + struct.pack(">I", len(payload)) + payload)
        assert dropped(sock)
        sock.close()
    time.sleep(0.5)
    assert not marker.exists(), "the node unpickled bytes from an unauthenticated peer"
    still_commits(secured)


def test_a_peer_with_another_secret_is_dropped(secured: list[RaftNode]) -> None:
    sock, theirs = hello_exchange(secured[0])
    handshake = RaftCipher("not the cluster's secret at all").handshake(initiator=True)
    sock.sendall(handshake.hello)
    frame = handshake.complete(theirs).seal(zlib.compress(pickle.dumps(os.urandom(32))))
    sock.sendall(struct.pack(">I", len(frame)) + frame)
    assert dropped(sock)
    sock.close()
    still_commits(secured)


def test_a_silent_connection_is_dropped_after_its_timeout(secured: list[RaftNode]) -> None:
    sock, _ = hello_exchange(secured[0])  # then nothing
    started = time.monotonic()
    assert dropped(sock, timeout=secured[0].settings.connection_timeout + 4)
    assert time.monotonic() - started >= secured[0].settings.connection_timeout - 1
    sock.close()


def test_without_a_secret_a_huge_length_is_still_dropped(open_cluster: list[RaftNode]) -> None:
    sock = socket.create_connection(raft_port(open_cluster[0]), timeout=5)
    sock.sendall(struct.pack(">I", 2**31 - 1) + b"\x00" * 1024)
    assert dropped(sock, keep_sending=b"\x00" * 65536)
    sock.close()
    still_commits(open_cluster)


def test_nodes_with_different_secrets_never_form_a_cluster() -> None:
    addrs = [f"127.0.0.1:{p}" for p in free_ports(2)]
    nodes = [
        RaftNode(RaftSettings(self_address=a, peer_addresses=(b,), password=pw), Counter(), threading.RLock())
        for a, b, pw in ((addrs[0], addrs[1], SECRET), (addrs[1], addrs[0], SECRET + " but different"))
    ]
    try:
        time.sleep(4)
        assert not any(n.is_leader() for n in nodes)
        assert not any(n.is_connected(other) for n, other in zip(nodes, reversed(addrs)))
    finally:
        for n in nodes:
            n.stop()


def test_a_node_without_the_secret_is_refused_and_told_why(caplog: pytest.LogCaptureFixture) -> None:
    addrs = [f"127.0.0.1:{p}" for p in free_ports(2)]
    nodes = [
        RaftNode(RaftSettings(self_address=a, peer_addresses=(b,), password=pw), Counter(), threading.RLock())
        for a, b, pw in ((addrs[0], addrs[1], SECRET), (addrs[1], addrs[0], None))
    ]
    try:
        # each node dials the other; the one without the secret learns why once the other's dial reaches it (on a
        # busy machine that can take a few reconnection rounds)
        began = time.monotonic()
        while time.monotonic() < began + 15 and (
            time.monotonic() < began + 3 or "the peer has a secret_file and this node has none" not in caplog.text
        ):
            assert not any(n.is_leader() for n in nodes)
            time.sleep(0.2)
        assert not any(n.is_leader() for n in nodes)
        assert "the peer has a secret_file and this node has none" in caplog.text
    finally:
        for n in nodes:
            n.stop()
