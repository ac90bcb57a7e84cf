"""A client's channels close without grpc's connectivity poller dying on them (``close_channel``).

``connects`` subscribes to a channel's connectivity; two of them close together, then a close, used to make
grpc's poller thread die with "Cannot invoke RPC: Channel closed!" printed on the application's stderr.
No network: the channels dial a loopback port nobody listens on, which refuses at once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from raftsched.rpc.client.channel import BearerToken, close_channel, connects

pytestmark = pytest.mark.unit


@pytest.fixture
def dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


@pytest.fixture
def thread_errors(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[BaseException]]:
    seen: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_value))
    yield seen


@pytest.mark.parametrize("intercepted", [False, True])
def test_channels_asked_twice_then_closed_leave_no_dying_poller(
    dead_port: int, thread_errors: list[BaseException], intercepted: bool
) -> None:
    for _ in range(5):
        channel = grpc.insecure_channel(f"127.0.0.1:{dead_port}")
        if intercepted:  # as a client with a token opens it
            channel = grpc.intercept_channel(channel, BearerToken("t"))
        assert not connects(channel, 2.0) and not connects(channel, 2.0)  # refused: the second while polling
        close_channel(channel)
    time.sleep(0.5)  # what a poller would still do, it has done
    assert thread_errors == []


def test_a_channel_never_asked_closes_at_once(dead_port: int) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{dead_port}")
    began = time.monotonic()
    close_channel(channel)
    assert time.monotonic() - began < 0.1
    with pytest.raises(ValueError):  # closed
        channel.unary_unary("/x/y")(b"", timeout=1)
