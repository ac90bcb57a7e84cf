"""Why a Raft connection is dropped by its timeout, in words an operator can act on: a peer that never
answered our connect is down or unreachable (a dead machine, seen by the three-host test), not one that
failed to authenticate (a wrong secret, or a stranger on the port)."""

from __future__ import annotations

import logging
import socket
import time
from typing import Callable

import pytest

import raftsched.raft.connection
from raftsched.raft.cipher import RaftCipher
from raftsched.raft.connection import RaftConnection

pytestmark = pytest.mark.unit


class _Poller:
    """Never reports an event: the connection stays as ``connect`` or the constructor left it."""

    def subscribe(self, fd: int, callback: Callable[[int, int], None], mask: int) -> None: ...

    def unsubscribe(self, fd: int) -> None: ...


def _swept(conn: RaftConnection, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> str:
    monkeypatch.setattr(raftsched.raft.connection, "_last_log", [0.0])  # one warning a second at most: this one is shown
    conn.encryptor = RaftCipher("a long shared secret")
    time.sleep(0.05)
    with caplog.at_level(logging.WARNING, logger="raftsched.raft.connection"):
        conn.sweep()
    return caplog.text


def test_a_connect_never_answered_says_the_node_is_down_or_unreachable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        conn = RaftConnection(_Poller(), timeout=0.01)
        assert conn.connect("127.0.0.1", listener.getsockname()[1])
        text = _swept(conn, monkeypatch, caplog)
        conn.disconnect()
    assert "no answer to the connection within 0.0 s: that node is down or unreachable" in text
    assert "authenticate" not in text


def test_a_connected_peer_that_stays_silent_did_not_authenticate(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()):
            accepted, _ = listener.accept()
            conn = RaftConnection(_Poller(), socket=accepted, timeout=0.01)  # a peer connected to us
            text = _swept(conn, monkeypatch, caplog)
            conn.disconnect()
    assert "did not authenticate within 0.0 s" in text
