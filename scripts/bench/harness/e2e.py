"""One end-to-end measurement on a backlog: how fast processes turn PENDING runs into SUCCEEDED ones.

Shared by the scenarios that compare two set-ups on fresh clusters with the
same backlog (``metrics_cost``, ``worker_vs_executor``): a follower's
SUCCEEDED count is polled (``StatusPoller``), the processes are started, and
once the count grows the rate over ``lease_measure_s`` (1 s of warm-up left
out) is the figure.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from bench import stats as st
from bench.harness.cluster import _wait_serving
from bench.harness.common import r1
from bench.harness.processes import stop_popen
from bench.harness.watch import StatusPoller
from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc

#: jobs per CreateJobs call while a backlog is made
CREATE_BATCH = 1000


def make_backlog(address: str, count: int, queue: str) -> None:
    """``count`` one-shot no-op jobs due at once on ``queue``, through CreateJobs; until all are PENDING."""
    with grpc.insecure_channel(address) as ch:
        stub = pb_grpc.JobServiceStub(ch)
        for first in range(0, count, CREATE_BATCH):
            jobs = []
            for i in range(first, min(count, first + CREATE_BATCH)):
                spec = pb.JobSpec(name=f"m-{i}", queue=queue, type="noop")
                spec.after.seconds = 0
                jobs.append(pb.CreateJobRequest(spec=spec, idempotency_key=uuid.uuid4().hex))
            stub.CreateJobs(pb.CreateJobsRequest(jobs=jobs), timeout=60)
        status = pb_grpc.ClusterServiceStub(ch)
        deadline = time.monotonic() + 120
        while status.GetClusterStatus(pb.GetClusterStatusRequest(), timeout=5).runs.pending < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the {count} jobs of the backlog on {queue} did not all fire within 120 s")
            time.sleep(0.2)


@contextlib.contextmanager
def cluster_with_backlog(
    root: str, extra_config: str, backlog: int, queue: str, http: bool = False
) -> Iterator[tuple[LocalCluster, str]]:
    """A fresh 3-node cluster in ``root`` with ``backlog`` PENDING no-op runs on ``queue``: (it, a follower's gRPC
    address); stopped afterwards."""
    cluster = LocalCluster.create(root, 3, extra_config, http=http)
    cluster.start_all()
    try:
        leader = cluster.wait_leader(60)
        for node in cluster.nodes.values():
            _wait_serving(node.grpc)
        make_backlog(cluster.nodes[leader].grpc, backlog, queue)
        yield cluster, next(node.grpc for n, node in cluster.nodes.items() if n != leader)
    finally:
        cluster.stop_all()


#: how long the processes get to complete a first run
FIRST_RUN_S = 30.0


def backlog_rate(
    follower_grpc: str, backlog: int, measure_s: float, start: Callable[[], list[subprocess.Popen]]
) -> dict[str, Any]:
    """``runs_per_s`` of the processes ``start()`` launches (None if none completed), ``backlog_left``, and a
    ``warning`` when the backlog ran out while measuring. The processes are stopped before it returns."""
    counter = StatusPoller(follower_grpc, lambda status: status.runs.succeeded)
    procs: list[subprocess.Popen] = []
    try:
        time.sleep(0.3)  # a first sample before any process runs
        procs = start()
        deadline = time.time() + FIRST_RUN_S
        while not counter.grown() and time.time() < deadline:
            time.sleep(0.1)
        began = time.time() + 1.0
        until = began + measure_s
        time.sleep(max(0.0, until - time.time()) + 0.2)
        rate = st.counter_rate(counter.samples, began, until) if counter.grown() else None
        left = backlog - counter.latest()
        out: dict[str, Any] = {"runs_per_s": r1(rate), "backlog_left": left}
        if left <= 0:
            out["warning"] = "the backlog ran out during the measurement: the rate is low"
        return out
    finally:
        stop_popen(procs)
        counter.stop()
