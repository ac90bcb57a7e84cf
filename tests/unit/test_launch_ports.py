"""The launch script's port check: a port is taken while something listens on it, not while connections that
used it are still closing (TIME_WAIT lasts a minute after a cluster stops)."""

from __future__ import annotations

import socket

import pytest

from launch_procs import port_in_use

pytestmark = pytest.mark.unit


def _time_wait_on_a_free_port() -> int:
    """A port with a connection in TIME_WAIT on it and nothing listening any more."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    served, _ = listener.accept()
    served.close()  # the side that closes first keeps TIME_WAIT on the listening port
    client.recv(1)
    client.close()
    listener.close()
    return port


def test_connections_still_closing_do_not_hold_a_port() -> None:
    port = _time_wait_on_a_free_port()
    with open("/proc/net/tcp", encoding="ascii") as f:  # state 06: TIME_WAIT
        assert any(line.split()[1].endswith(f":{port:04X}") and line.split()[3] == "06" for line in f), "no TIME_WAIT made"
    assert not port_in_use(port)


def test_a_listener_holds_its_port() -> None:
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert port_in_use(listener.getsockname()[1])
