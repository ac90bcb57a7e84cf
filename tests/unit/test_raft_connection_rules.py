"""The rules ``raftsched.raft.connection`` and ``raftsched.raft.peer_probe`` keep for pysyncobj's transport (written down in
``raft/connection.py``'s docstring), one test each, on real loopback sockets and a poller that records what
each connection asks to be told of."""

from __future__ import annotations

import socket
import time
from typing import Any, Callable

import pytest
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import CONNECTION_STATE

import raftsched.raft.connection
from raftsched.raft.connection import RaftConnection
from raftsched.raft.peer_probe import ANSWER, PROBE, PeerProbes

pytestmark = pytest.mark.unit

READ, WRITE, ERROR = POLL_EVENT_TYPE.READ, POLL_EVENT_TYPE.WRITE, POLL_EVENT_TYPE.ERROR


class Poller:
    """Records each descriptor's interest; events are delivered by the test."""

    def __init__(self) -> None:
        self.masks: dict[int, int] = {}
        self.callbacks: dict[int, Callable[[int, int], None]] = {}

    def subscribe(self, fd: int, callback: Callable[[int, int], None], mask: int) -> None:
        self.masks[fd], self.callbacks[fd] = mask, callback

    def unsubscribe(self, fd: int) -> None:
        self.masks.pop(fd, None)
        self.callbacks.pop(fd, None)

    def fire(self, fd: int, event: int) -> None:
        self.callbacks[fd](fd, event)


@pytest.fixture()
def listener() -> Any:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


def _accept(listener: socket.socket) -> socket.socket:
    listener.settimeout(5)
    sock, _ = listener.accept()
    return sock


def test_a_dial_made_again_inside_disconnect_keeps_its_write_interest(listener: socket.socket) -> None:
    """The stuck link: sending on a dead connection drops it, pysyncobj's callback dials again on the same
    object at once, and the new dial must still be told when it completes (a write event)."""
    poller = Poller()
    conn = RaftConnection(poller, timeout=0.1)
    port = listener.getsockname()[1]

    def dial_again() -> None:  # what TCPTransport._onDisconnected does for the side that dials
        conn.connect("127.0.0.1", port)

    conn.setOnDisconnectedCallback(dial_again)
    assert conn.connect("127.0.0.1", port)
    first_fd, first_socket = conn.fileno(), conn._sock
    assert first_fd is not None
    poller.fire(first_fd, WRITE)  # the first dial completes
    assert conn.state == CONNECTION_STATE.CONNECTED
    peer = _accept(listener)
    peer.close()  # the peer goes away, and nothing was read for longer than the timeout
    time.sleep(0.15)
    for _ in range(3):  # writing into a closed connection fails on the first or second send
        conn.send({"type": "request_vote"})
        if conn._sock is not first_socket:
            break
    assert conn._sock is not first_socket, "the dead connection was never dropped"
    assert conn.state == CONNECTION_STATE.CONNECTING
    assert poller.masks[conn.fileno()] & WRITE, "the new dial cannot learn that it completed"
    _accept(listener).close()
    conn.disconnect()


def _established(listener: socket.socket, timeout: float) -> tuple[RaftConnection, socket.socket, Poller]:
    poller = Poller()
    conn = RaftConnection(poller, timeout=timeout)
    assert conn.connect("127.0.0.1", listener.getsockname()[1])
    fd = conn.fileno()
    assert fd is not None
    poller.fire(fd, WRITE)
    return conn, _accept(listener), poller


def _swept_after(conn: RaftConnection, seconds: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(raftsched.raft.connection, "_last_log", [0.0])
    time.sleep(seconds)
    conn.sweep()


def test_without_a_secret_a_link_that_never_carries_a_message_is_dropped(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn, peer, _ = _established(listener, timeout=0.1)
    try:
        conn.sweep()
        assert conn.state == CONNECTION_STATE.CONNECTED  # within its bound
        _swept_after(conn, 0.15, monkeypatch)
        assert conn.state == CONNECTION_STATE.DISCONNECTED
    finally:
        peer.close()


def test_a_dial_that_never_completes_is_dropped_without_a_secret_too(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = RaftConnection(Poller(), timeout=0.1)
    assert conn.connect("127.0.0.1", listener.getsockname()[1])  # no write event is ever delivered
    _swept_after(conn, 0.15, monkeypatch)
    assert conn.state == CONNECTION_STATE.DISCONNECTED


def _deliver(conn: RaftConnection, poller: Poller, peer: socket.socket, message: Any, sender: RaftConnection) -> list:
    """Have ``peer`` send ``message`` framed as ``sender`` would, and deliver it to ``conn``."""
    got: list = []
    conn.setOnMessageReceivedCallback(got.append)
    sender._queue_frame(raftsched.raft.connection.zlib.compress(raftsched.raft.connection.pickle.dumps(message), 3))
    peer.sendall(bytes(sender._wbuf))
    sender._wbuf.clear()
    time.sleep(0.05)
    fd = conn.fileno()
    assert fd is not None
    poller.fire(fd, READ)
    return got


def test_an_idle_link_is_dropped_after_its_timeout_unless_bytes_wait(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn, peer, poller = _established(listener, timeout=0.2)
    framer = RaftConnection(Poller())
    try:
        assert _deliver(conn, poller, peer, "127.0.0.1:1", framer) == ["127.0.0.1:1"]
        # nothing read for longer than the timeout, but the peer's next message waits unread: not idle
        time.sleep(0.25)
        framer._queue_frame(raftsched.raft.connection.zlib.compress(raftsched.raft.connection.pickle.dumps("more"), 3))
        peer.sendall(bytes(framer._wbuf))
        time.sleep(0.05)
        conn.sweep()
        assert conn.state == CONNECTION_STATE.CONNECTED
        fd = conn.fileno()
        assert fd is not None
        poller.fire(fd, READ)  # read it: the link is fresh again
        _swept_after(conn, 0.1, monkeypatch)
        assert conn.state == CONNECTION_STATE.CONNECTED
        _swept_after(conn, 0.2, monkeypatch)  # then silence past the bound
        assert conn.state == CONNECTION_STATE.DISCONNECTED
    finally:
        peer.close()


class _Conn:
    def __init__(self) -> None:
        self.state = CONNECTION_STATE.CONNECTED
        self.sent: list[dict] = []

    def send(self, message: dict) -> None:
        self.sent.append(message)


def test_probes_go_to_connected_peers_at_their_interval_and_answers_measure_the_offset() -> None:
    clock = {"wall": 1_000_000_000_000_000_000, "mono": 100.0}
    mine = PeerProbes(report=lambda: {"who": "a"}, interval=0.5, wall_ns=lambda: clock["wall"], monotonic=lambda: clock["mono"])
    theirs = PeerProbes(report=lambda: {"who": "b"}, wall_ns=lambda: clock["wall"] + 300_000_000_000)  # 300 s ahead
    to_b, to_c, back = _Conn(), _Conn(), _Conn()
    conns = {"b:1": to_b, "c:1": to_c}
    mine.tick(conns, lambda node: node == "b:1", CONNECTION_STATE.CONNECTED)
    assert [m["type"] for m in to_b.sent] == [PROBE] and to_c.sent == []  # c is not counted as connected
    clock["mono"] += 0.2
    mine.tick(conns, lambda node: True, CONNECTION_STATE.CONNECTED)
    assert len(to_b.sent) == 1 and len(to_c.sent) == 1  # b's interval has not passed; c is new
    assert theirs.on_message("a:1", to_b.sent[0], back, CONNECTION_STATE.CONNECTED)
    assert [m["type"] for m in back.sent] == [ANSWER]
    assert theirs.reports()["a:1"][1] == {"who": "a"}
    clock["mono"] += 0.010  # the answer comes back 210 ms after the probe left
    assert mine.on_message("b:1", back.sent[0], to_b, CONNECTION_STATE.CONNECTED)
    reading = mine.readings()["b:1"]
    assert reading.error_ms == pytest.approx(105.0)
    assert reading.offset_ms == pytest.approx(300_000.0 - 105.0)
    assert mine.reports()["b:1"][1] == {"who": "b"}
    assert not mine.on_message("b:1", {"type": "append_entries"}, to_b, CONNECTION_STATE.CONNECTED)
    assert not mine.on_message("b:1", "127.0.0.1:7001", to_b, CONNECTION_STATE.CONNECTED)


def test_the_raft_port_keeps_listening_after_a_connection_fails_while_accepted() -> None:
    import pysyncobj.tcp_server as tcp_server

    from raftsched.raft import pysyncobj_patches

    pysyncobj_patches.install()
    poller = Poller()
    accepted: list[Any] = []
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = tcp_server.TcpServer(poller, "127.0.0.1", port, onNewConnection=accepted.append)
    server.bind()
    try:
        (fd,) = list(poller.masks)
        # a connect reset before it is accepted, then two good ones in one poll
        bad = socket.create_connection(("127.0.0.1", port))
        bad.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        bad.close()
        good = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        time.sleep(0.05)
        poller.fire(fd, READ)
        assert len(accepted) >= 2
        assert fd in poller.masks, "the server stopped listening"
        late = socket.create_connection(("127.0.0.1", port), timeout=2)
        time.sleep(0.05)
        poller.fire(fd, READ)
        assert len(accepted) >= 3
        for s in [*good, late]:
            s.close()
        for conn in accepted:
            conn.disconnect()
    finally:
        server.unbind()
