"""The node's HTTP server (``raftsched.rpc.http.server``) in this process, on loopback, with its limits shortened: slow
and silent clients hold no thread, a request's deadline is absolute, connections are capped (the longest
waiting one makes room; 503 when all are being answered), keep-alive is bounded, TLS works, and what the
wire refuses is answered and closed."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from raftsched.cluster.app.pki import issue, make_ca
from raftsched.rpc.http import server as server_mod
from raftsched.rpc.http.router import Request, Response, Router
from raftsched.rpc.http.server import HttpServer

pytestmark = pytest.mark.unit


def app(gate: threading.Event | None = None) -> Router:
    router = Router()
    router.add("/healthz", lambda r: Response.text(200, "ok"), public=True, any_host=True)
    router.add("/echo", lambda r: Response.text(200, f"{r.method} {r.body.decode()}"), methods=("GET", "POST"), public=True)

    def slow(request: Request) -> Response:
        assert gate is not None and gate.wait(10)
        return Response.text(200, "slow")

    router.add("/slow", slow, public=True)
    return router


@pytest.fixture()
def server() -> Iterator[HttpServer]:
    s = HttpServer("127.0.0.1:0", app())
    s.start()
    yield s
    s.stop()


def get(s: HttpServer, path: str = "/healthz", timeout: float = 3.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=timeout)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def raw(s: HttpServer, data: bytes, timeout: float = 3.0) -> bytes:
    with socket.create_connection(("127.0.0.1", s.port), timeout=timeout) as sock:
        sock.sendall(data)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
        return out


def closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> float | None:
    """Seconds until the server closed ``sock`` (sending ``trickle`` every 0.2 s meanwhile), or None."""
    start = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() - start < seconds:
        try:
            if trickle:
                sock.send(trickle)
            if sock.recv(4096) == b"":
                return time.monotonic() - start
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - start
    return None


def test_keep_alive_pipelining_head_and_bodies(server: HttpServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=3)
    for i in range(3):  # one connection, three requests
        conn.request("POST", "/echo", body=f"n={i}", headers={"Content-Type": "application/x-www-form-urlencoded"})
        answer = conn.getresponse()
        assert (answer.status, answer.read(), answer.getheader("Connection")) == (200, f"POST n={i}\n".encode(), "keep-alive")
    conn.request("HEAD", "/echo")
    answer = conn.getresponse()
    assert answer.status == 200 and answer.read() == b"" and answer.getheader("Content-Length") == "6"
    conn.close()
    two = raw(server, b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert two.count(b"HTTP/1.1 200 OK") == 2 and two.endswith(b"ok\n")


@pytest.mark.parametrize(
    ("request_bytes", "status", "said"),
    [
        (b"NONSENSE\r\n\r\n", b"400", b"not 'METHOD target HTTP/1.1'"),
        (b"GET /healthz HTTP/1.1\r\n\r\n", b"400", b"needs a Host header"),
        (b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", b"400", b"more than one Host"),
        (b"GET /healthz HTTP/2.0\r\nHost: a\r\n\r\n", b"505", b"use HTTP/1.1"),
        (b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", b"501", b"Content-Length"),
        (b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 2\r\n\r\n", b"400", b"not one number"),
        (b"GET /healthz HTTP/1.1\r\nHost: a\r\nX: " + b"y" * 40_000 + b"\r\n\r\n", b"431", b"over 32768 bytes"),
        (b"GET /healthz HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", b"400", b"folded"),
    ],
)
def test_what_the_wire_refuses_is_answered_and_closed(
    server: HttpServer, request_bytes: bytes, status: bytes, said: bytes
) -> None:
    answer = raw(server, request_bytes)
    assert answer.startswith(b"HTTP/1.1 " + status) and said in answer and b"Connection: close" in answer


def test_a_body_over_the_limit_is_not_read_and_the_connection_closes(server: HttpServer) -> None:
    answer = raw(server, b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\nabc")
    assert answer.startswith(b"HTTP/1.1 413") and b"Connection: close" in answer


def test_a_request_trickled_a_byte_at_a_time_is_dropped_at_its_deadline_however_often_it_sends(
    server: HttpServer,
) -> None:
    server.request_deadline_s = 1.0
    with socket.create_connection(("127.0.0.1", server.port), timeout=3) as sock:
        took = closed_within(sock, 4.0, trickle=b"X")
    assert took is not None and took < 2.0, "a client sending a byte every 0.2 s kept its connection past the deadline"
    with socket.create_connection(("127.0.0.1", server.port), timeout=3) as silent:
        took = closed_within(silent, 4.0)
    assert took is not None and took < 2.0


def test_slow_connections_add_no_thread_and_fresh_requests_are_answered(server: HttpServer) -> None:
    get(server)
    before = threading.active_count()
    slow = []
    try:
        for _ in range(150):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=3)
            sock.send(b"G")
            slow.append(sock)
        time.sleep(0.3)
        assert server.open_connections >= 150
        started = time.monotonic()
        assert get(server) == (200, b"ok\n") and time.monotonic() - started < 1.0
        assert get(server, "/echo")[0] == 200
        assert threading.active_count() <= before + server_mod.WORKERS + server_mod.FAST_WORKERS
    finally:
        for sock in slow:
            sock.close()


def test_over_the_cap_the_longest_waiting_connection_makes_room() -> None:
    s = HttpServer("127.0.0.1:0", app(), max_connections=4)
    s.start()
    try:
        waiting = [socket.create_connection(("127.0.0.1", s.port), timeout=3) for _ in range(4)]
        time.sleep(0.2)
        assert s.open_connections == 4
        assert get(s) == (200, b"ok\n")  # answered: the oldest silent connection was dropped for it
        assert closed_within(waiting[0], 1.0) is not None
        assert closed_within(waiting[3], 0.3) is None  # the newer ones wait on
        for sock in waiting:
            sock.close()
    finally:
        s.stop()


def test_when_every_connection_is_being_answered_a_new_one_gets_503_at_once() -> None:
    gate = threading.Event()
    s = HttpServer("127.0.0.1:0", app(gate), max_connections=2)
    s.start()
    busy = [threading.Thread(target=get, args=(s, "/slow", 10)) for _ in range(2)]
    try:
        for t in busy:
            t.start()
        deadline = time.monotonic() + 3
        while s.open_connections < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)
        started = time.monotonic()
        status, body = get(s)
        assert status == 503 and b"its limit" in body and time.monotonic() - started < 1.0
    finally:
        gate.set()
        for t in busy:
            t.join(10)
        s.stop()


def test_an_idle_kept_alive_connection_is_closed(server: HttpServer) -> None:
    server.keepalive_idle_s = 0.5
    with socket.create_connection(("127.0.0.1", server.port), timeout=3) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        took = closed_within(sock, 3.0)
    assert took is not None and took < 1.5


def test_a_connection_serves_a_bounded_number_of_requests(server: HttpServer) -> None:
    burst = b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n" * (server_mod.KEEPALIVE_REQUESTS + 5)
    answer = raw(server, burst, timeout=10)
    assert answer.count(b"HTTP/1.1 200") == server_mod.KEEPALIVE_REQUESTS and answer.count(b"Connection: close") == 1


def test_tls_serves_and_a_client_that_never_shakes_hands_is_dropped(tmp_path: Path) -> None:
    ca = make_ca()
    ca.write_cert(str(tmp_path / "ca.crt"))
    issue(ca, "n1", ("127.0.0.1",)).write(str(tmp_path / "n1.crt"), str(tmp_path / "n1.key"))
    s = HttpServer("127.0.0.1:0", app(), tls=(str(tmp_path / "n1.crt"), str(tmp_path / "n1.key")))
    s.request_deadline_s = 1.0
    s.start()
    try:
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        conn = http.client.HTTPSConnection("127.0.0.1", s.port, timeout=3, context=context)
        conn.request("GET", "/healthz")
        assert conn.getresponse().read() == b"ok\n"
        conn.close()
        with socket.create_connection(("127.0.0.1", s.port), timeout=3) as silent:
            took = closed_within(silent, 4.0)
        assert took is not None and took < 2.0
    finally:
        s.stop()


def test_a_connection_accepted_in_the_turn_the_server_stops_is_closed_too() -> None:
    """The race behind a rare failure of the test below: the loop accepts a connection in the same turn as the
    stop arrives, and the stop is handled first. The connection's task is cancelled before it ever ran, so its own
    ``finally`` never closes the socket: the server's end must (it was left open, and counted as open, for as long
    as the server object lived). Made deterministic by doing both in one callback on the loop, stop first."""
    s = HttpServer("127.0.0.1:0", app())
    s.start()
    client, served = socket.socketpair()
    held = [served]  # handed over inside the callback: the test keeps no reference of its own to the socket
    del served

    def stop_then_accept() -> None:
        assert s._stopping is not None
        s._stopping.set()
        s._admit(held.pop(), ("127.0.0.1", 0))

    assert s._loop is not None
    s._loop.call_soon_threadsafe(stop_then_accept)
    s._thread.join(5)
    s.stop()
    try:
        assert closed_within(client, 2.0) is not None
        assert s.open_connections == 0
    finally:
        client.close()


def test_stop_closes_connections_and_frees_the_port() -> None:
    s = HttpServer("127.0.0.1:0", app())
    s.start()
    port = s.port
    sock = socket.create_connection(("127.0.0.1", port), timeout=3)
    s.stop()
    assert closed_within(sock, 2.0) is not None
    sock.close()
    again = HttpServer(f"127.0.0.1:{port}", app())
    again.stop()
