"""The ``http`` job type on a real executor: only http(s), never a denied address, redirects checked too,
and one deadline for the whole request however slowly a server answers.

Every server here is the test's own, on loopback (127.0.0.1, opened with ``--http-allow 127.0.0.1/32``,
and 127.0.0.2 as the denied address): no test sends traffic off this machine, and link-local refusal is a
unit test of the decision (``tests/unit/test_http_guard.py``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import socketserver
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import grpc
import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.helpers import start_executor, wait_for

pytestmark = pytest.mark.integration

QUEUE = "q-http"
DENIED_HOST = "127.0.0.2"


class Server:
    """A tiny HTTP server on ``host`` that records every request it sees."""

    def __init__(self, host: str) -> None:
        self.requests: list[str] = []
        routes = {"/ok": (200, {}, b"hello from the test server")}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                outer.requests.append(self.path)
                path, _, query = self.path.partition("?")
                if path == "/redirect":
                    status, headers, body = 302, {"Location": query}, b""
                else:
                    status, headers, body = routes.get(path, (404, {}, b"not here"))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET  # noqa: N815

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                pass

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Server, Server]]:
    allowed, denied = Server("127.0.0.1"), Server(DENIED_HOST)
    try:
        yield allowed, denied
    finally:
        allowed.close()
        denied.close()


class SlowServer:
    """A server on 127.0.0.1 that trickles its answer one byte a second: from the status line on
    (``headers``) or after complete headers announcing a long body (``body``). It notes when each
    connection came and when the client closed it."""

    def __init__(self) -> None:
        self.connected = threading.Event()
        self.closed_at: list[float] = []
        self.stop = threading.Event()
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock: socket.socket = self.request
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = sock.recv(4096)
                    if not chunk:
                        return
                    request += chunk
                outer.connected.set()
                if b"/body" in request.split(b"\r\n", 1)[0]:
                    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
                    trickle = b"x" * 1000
                else:
                    trickle = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                for i in range(len(trickle)):
                    if outer.stop.is_set():
                        return
                    try:
                        sock.sendall(trickle[i : i + 1])
                        readable, _, _ = select.select([sock], [], [], 1.0)  # the client's close shows at once
                        if readable and not sock.recv(4096):
                            break
                    except OSError:
                        break
                outer.closed_at.append(time.monotonic())

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slow_server() -> Iterator[SlowServer]:
    server = SlowServer()
    try:
        yield server
    finally:
        server.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def http_executor(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    root = str(tmp_path_factory.mktemp("http-exec"))
    # loopback is refused unless allowed: the test's servers are on 127.0.0.1
    flags = ["--http-deny", f"{DENIED_HOST}/32", "--http-allow", "127.0.0.1/32"]
    proc = start_executor(cluster, root, "exec-http", QUEUE, *flags, allow=("http",))
    try:
        yield
    finally:
        _stop(proc)


def _http_job(client: Client, name: str, url: str, queue: str = QUEUE, timeout_ms: int = 0, ttl_ms: int = 0) -> pb.Job:
    spec = pb.JobSpec(name=name, type="http", queue=queue, payload=json.dumps({"url": url}).encode())
    cv.to_dur(0, spec.after)
    if timeout_ms:
        cv.to_dur(timeout_ms, spec.timeout)
    if ttl_ms:
        cv.to_dur(ttl_ms, spec.lease_ttl)
    spec.retry.max_attempts = 1
    return client.create_job(spec)


def _outcome(client: Client, job: pb.Job) -> tuple[pb.Run, bytes]:
    done = (pb.RUN_STATUS_SUCCEEDED, pb.RUN_STATUS_DEAD_LETTER)
    run = wait_for(lambda: [r for r in client.list_runs(job_id=job.job_id) if r.status in done], 20, f"{job.spec.name}")[0]
    return run, client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=run.run_id)).log


def test_an_allowed_url_is_fetched(client: Client, servers: tuple[Server, Server], http_executor: None) -> None:
    allowed, _ = servers
    run, log = _outcome(client, _http_job(client, "http-ok", f"{allowed.url}/ok"))
    assert run.status == pb.RUN_STATUS_SUCCEEDED, run.error
    assert run.result == b"hello from the test server" and b"hello from the test server" in log
    assert "/ok" in allowed.requests


def test_a_file_url_is_refused_at_create_and_through_a_redirect(
    client: Client, servers: tuple[Server, Server], http_executor: None
) -> None:
    with pytest.raises(grpc.RpcError) as err:
        _http_job(client, "http-file", "file:///etc/hostname")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "only http:// and https://" in err.value.details()
    allowed, _ = servers
    run, log = _outcome(client, _http_job(client, "http-to-file", f"{allowed.url}/redirect?file:///etc/hostname"))
    assert run.status == pb.RUN_STATUS_DEAD_LETTER and "file:///etc/hostname refused" in run.error, run.error
    with open("/etc/hostname", "rb") as f:
        secret = f.read().strip()
    lines = log.decode().splitlines()
    assert lines == [f"GET {allowed.url}/redirect?file:///etc/hostname -> 302", "redirected to file:///etc/hostname"], log
    assert not secret or secret not in log.replace(b"file:///etc/hostname", b"")


def test_a_denied_address_is_never_contacted_directly_or_through_a_redirect(
    client: Client, servers: tuple[Server, Server], http_executor: None
) -> None:
    allowed, denied = servers
    run, _ = _outcome(client, _http_job(client, "http-denied", f"{denied.url}/ok"))
    assert run.status == pb.RUN_STATUS_DEAD_LETTER and f"{DENIED_HOST}/32 (--http-deny)" in run.error, run.error
    run, log = _outcome(client, _http_job(client, "http-to-denied", f"{allowed.url}/redirect?{denied.url}/ok"))
    assert run.status == pb.RUN_STATUS_DEAD_LETTER and "--http-deny" in run.error, run.error
    assert f"redirected to {denied.url}/ok".encode() in log
    assert denied.requests == []  # not one request reached the denied address


def test_loopback_is_refused_unless_allowed(
    cluster: LocalCluster, client: Client, servers: tuple[Server, Server], tmp_path
) -> None:  # type: ignore[no-untyped-def]
    allowed, _ = servers
    before = list(allowed.requests)
    proc = start_executor(cluster, str(tmp_path), "exec-http-default", "q-http-default", allow=("http",))
    try:
        run, _ = _outcome(client, _http_job(client, "http-loopback", f"{allowed.url}/ok", queue="q-http-default"))
        node_url = f"http://{cluster.addresses[0]}/metrics"  # a node of the cluster itself, on this machine
        node, _ = _outcome(client, _http_job(client, "http-node", node_url, queue="q-http-default"))
    finally:
        _stop(proc)
    assert run.status == pb.RUN_STATUS_DEAD_LETTER and "loopback" in run.error, run.error
    assert "--http-allow 127.0.0.1/32" in run.error, run.error  # it says how to open it
    assert node.status == pb.RUN_STATUS_DEAD_LETTER and "loopback" in node.error, node.error
    assert allowed.requests == before  # not one request reached it


def test_a_slow_answer_fails_at_the_jobs_timeout(client: Client, slow_server: SlowServer, http_executor: None) -> None:
    job = _http_job(client, "http-slow-body", f"{slow_server.url}/body", timeout_ms=3000)
    run, _ = _outcome(client, job)
    assert run.status == pb.RUN_STATUS_DEAD_LETTER and "timed out after 3000 ms" in run.error, run.error
    took = cv.ts_ms(run.finished_at) - cv.ts_ms(run.started_at)
    assert 3000 - 300 <= took <= 3000 + 1000, took
    wait_for(lambda: slow_server.closed_at, 5, "the executor to close the connection")


def test_a_cancel_ends_a_slow_request_at_once(client: Client, slow_server: SlowServer, http_executor: None) -> None:
    job = _http_job(client, "http-slow-headers", f"{slow_server.url}/headers", ttl_ms=1500)
    leased = (pb.RUN_STATUS_LEASED,)
    run = wait_for(lambda: [r for r in client.list_runs(job_id=job.job_id) if r.status in leased], 20, "the lease")[0]
    assert slow_server.connected.wait(10)
    time.sleep(1.5)  # well into the trickled headers
    asked = time.monotonic()
    client.cancel_run(run.run_id)
    wait_for(lambda: slow_server.closed_at, 5, "the executor to close the connection")
    # the executor learns of the cancel at its next renewal (every third of the 1.5 s TTL), then closes at once
    assert slow_server.closed_at[0] - asked < 0.5 + 1.0, slow_server.closed_at[0] - asked
    done = wait_for(
        lambda: client.get_run(run.run_id).status == pb.RUN_STATUS_CANCELLED and client.get_run(run.run_id), 5, "CANCELLED"
    )
    assert "cancelled" in done.error, done.error
