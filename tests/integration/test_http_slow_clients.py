"""Slow clients cannot exhaust a node's HTTP port: 200 connections that each trickle one header byte every
3 s leave the node's thread count where it was (read from /proc/<pid>/status), /healthz from a fresh client
still answers, and a unary gRPC call (GetClusterStatus) still answers within a second; each slow connection
is dropped at its request's deadline (10 s in total, however often it sends).

(Before: a thread per connection with a per-read timeout only: the same 200 connections took a node from 17
to 217 threads, and kept them for as long as the bytes kept coming.)
"""

from __future__ import annotations

import socket
import time
import urllib.request
from typing import Iterator

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc.client.channel import open_channel
from raftsched.rpc.http.server import FAST_WORKERS, REQUEST_DEADLINE_S, WORKERS

# GetClusterStatus's answer is timed (under 1 s): run in the suite's serial pass, with nothing beside it
pytestmark = [pytest.mark.integration, pytest.mark.alone]

SLOW = 200
TRICKLE_S = 3.0
HEADER = b"GET /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow\r\n"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, str]]:
    c = LocalCluster.create(str(tmp_path_factory.mktemp("slow-http")), 1, http=True)
    c.start_all()
    try:
        yield c, c.wait_leader(30)
    finally:
        c.stop_all()


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def healthz(url: str) -> int:
    with urllib.request.urlopen(url, timeout=2) as answer:
        return int(answer.status)


def test_slow_connections_neither_add_threads_nor_hold_up_healthz_or_grpc(node: tuple[LocalCluster, str]) -> None:
    c, leader = node
    n = c.nodes[leader]
    assert n.pid is not None
    host, port = n.http.rsplit(":", 1)
    url = c.http_url(leader, "/healthz")
    assert healthz(url) == 200
    time.sleep(1)
    before = threads(n.pid)
    slow = [socket.create_connection((host, int(port)), timeout=5) for _ in range(SLOW)]
    dropped = [False] * SLOW
    most = before
    started = time.monotonic()
    try:
        for step in range(5):  # 0, 3, 6, 9, 12 s: one more byte of the header on every connection
            for i, sock in enumerate(slow):
                if not dropped[i]:
                    try:
                        sock.send(HEADER[step : step + 1])
                    except OSError:
                        dropped[i] = True
            time.sleep(0.5)
            most = max(most, threads(n.pid))
            assert healthz(url) == 200, "a fresh client's /healthz did not answer"
            with open_channel(n.grpc) as ch:
                asked = time.monotonic()
                status = pb_grpc.ClusterServiceStub(ch).GetClusterStatus(pb.GetClusterStatusRequest(), timeout=5)
                assert status.leader_id == leader and time.monotonic() - asked < 1.0, "GetClusterStatus was held up"
            time.sleep(max(0.0, started + (step + 1) * TRICKLE_S - time.monotonic()))
        assert most <= before + WORKERS + FAST_WORKERS, f"threads went from {before} to {most} with {SLOW} slow clients"
        for i, sock in enumerate(slow):  # past the deadline: the node has closed every one of them
            sock.settimeout(1)
            try:
                dropped[i] = dropped[i] or sock.recv(1) == b""
            except ConnectionResetError:
                dropped[i] = True
            except TimeoutError:
                pass
        assert time.monotonic() - started > REQUEST_DEADLINE_S + 1
        assert all(dropped), f"{dropped.count(False)} slow connections outlived the request deadline"
    finally:
        for sock in slow:
            sock.close()
    assert threads(n.pid) <= before + WORKERS + FAST_WORKERS
