"""The gRPC ceiling: server processes whose CreateJob does nothing but answer.

``noop_servers(n)`` starts ``n`` of them (spawned, each on a free loopback
port), yields their addresses, and stops them by pid on exit.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc

from bench.harness.processes import stop_mp
from raftsched.cluster.app.local_cluster import free_ports
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc

#: seconds a server process may take to start listening
START_TIMEOUT_S = 30


class NoopJobService(pb_grpc.JobServiceServicer):  # type: ignore[misc]
    def CreateJob(self, request: pb.CreateJobRequest, context: Any) -> pb.Job:
        return pb.Job(job_id="j-noop", spec=request.spec)


def noop_grpc_server(port: int, ready: Any, stop: Any) -> None:
    """A JobService whose CreateJob does nothing but answer: the cost of the gRPC layer alone."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
    pb_grpc.add_JobServiceServicer_to_server(NoopJobService(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    ready.set()
    stop.wait()
    server.stop(0)


@contextmanager
def noop_servers(count: int) -> Iterator[list[str]]:
    """``count`` no-op server processes; their addresses. RuntimeError when one does not start."""
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    servers, addrs = [], []
    try:
        for port in free_ports(count):
            ready = ctx.Event()
            proc = ctx.Process(target=noop_grpc_server, args=(port, ready, stop), daemon=True)
            proc.start()
            servers.append(proc)
            addrs.append(f"127.0.0.1:{port}")
            if not ready.wait(START_TIMEOUT_S):
                raise RuntimeError(f"the no-op gRPC server on port {port} did not start within {START_TIMEOUT_S} s")
        yield addrs
    finally:
        stop.set()
        stop_mp(servers)
