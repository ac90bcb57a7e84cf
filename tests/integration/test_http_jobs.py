"""The ``http`` job type on a real executor: only http(s), never a denied address, redirects checked too.

Every server here is the test's own, on loopback (127.0.0.1, and 127.0.0.2 as the denied address): no
test sends traffic off this machine, and link-local refusal is a unit test of the decision
(``tests/unit/test_http_guard.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import grpc
import pytest

from cluster.app.local_cluster import LocalCluster
from protos.raftsched.v1 import scheduler_pb2 as pb
from rpc import convert as cv
from rpc.client.client import Client
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


@pytest.fixture(scope="module")
def http_executor(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    root = str(tmp_path_factory.mktemp("http-exec"))
    proc = start_executor(cluster, root, "exec-http", QUEUE, "--http-deny", f"{DENIED_HOST}/32", allow=("http",))
    try:
        yield
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


def _http_job(client: Client, name: str, url: str) -> pb.Job:
    spec = pb.JobSpec(name=name, type="http", queue=QUEUE, payload=json.dumps({"url": url}).encode())
    cv.to_dur(0, spec.after)
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
