"""Real `raftsched executor` processes, for the ``leases`` scenario: end-to-end runs and due-to-leased lag.

* ``e2e_runs_per_s``: ``E2E_EXECUTORS`` executors (no-op handler) drain the
  other half of the burst's backlog (``E2E_QUEUES``); a follower's SUCCEEDED
  count, polled every 0.1 s, grows by this many per second;
* ``due_to_leased_ms``: idle executors long-poll an own queue while every-1s
  jobs come due; grant time (started_at) - scheduled_time of first attempts.

Executors are started with their logs beside the cluster's and stopped by pid.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from typing import Any

import grpc

from bench import stats as st
from bench.harness.common import r1, ts_ms
from bench.harness.context import Bench
from bench.harness.processes import spawn_executors, stop_popen
from bench.harness.watch import RunWatch, StatusPoller
from bench.scenarios.burst import BURST_QUEUES
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc

E2E_QUEUES = BURST_QUEUES[2:]  # the executors run these; the grant scenario leases the others
E2E_EXECUTORS = 4
E2E_CONCURRENCY = 32
DUE_JOBS = 200
DUE_QUEUE = "bench-due"


def _executors(b: Bench, prefix: str, queues: list[str], concurrency: int) -> list[subprocess.Popen]:
    assert b.cluster is not None
    root = os.path.dirname(b.cluster.config_path)
    return spawn_executors(b.addresses(), root, prefix, queues, concurrency, E2E_EXECUTORS, b.runtime)


def _create_due_jobs(stub: Any, job_ids: list[str]) -> None:
    """``DUE_JOBS`` every-1s no-op jobs on ``DUE_QUEUE``, spread over a second."""
    for i in range(DUE_JOBS):
        spec = pb.JobSpec(name=f"due-{i}", queue=DUE_QUEUE, type="noop")
        spec.every.seconds = 1
        job_ids.append(stub.CreateJob(pb.CreateJobRequest(spec=spec, idempotency_key=uuid.uuid4().hex), timeout=10).job_id)
        time.sleep(1.0 / DUE_JOBS)


def _pause(stub: Any, job_ids: list[str]) -> None:
    for job_id in job_ids:
        try:
            stub.PauseJob(pb.PauseJobRequest(job_id=job_id), timeout=10)
        except grpc.RpcError:
            pass


def due_to_leased(b: Bench) -> None:
    """Idle executors long-polling; every-1s jobs come due: grant time (started_at) minus scheduled time."""
    lags: list[float] = []

    def on_event(ev: Any) -> None:
        if ev.kind == "leased" and ev.run.attempt == 1:
            lags.append(float(ts_ms(ev.run.started_at) - ts_ms(ev.run.scheduled_time)))

    leader = b.leader()
    watch = RunWatch(b.nodes[leader].grpc, DUE_QUEUE, "leased", on_event)
    procs = _executors(b, "bench-due", [DUE_QUEUE], 16)
    job_ids: list[str] = []
    with grpc.insecure_channel(b.nodes[leader].grpc) as ch:
        stub = pb_grpc.JobServiceStub(ch)
        try:
            time.sleep(3.0)  # executors up and long-polling
            _create_due_jobs(stub, job_ids)
            time.sleep(1.0 + b.profile.lease_measure_s)
        finally:
            _pause(stub, job_ids)
            stop_popen(procs)
            watch.stop()
    b.results["due_to_leased_ms"] = st.summarize(lags) if lags else None
    b.notes["due_to_leased_ms"] = (
        f"{DUE_JOBS} every-1s jobs (no-op) on an own queue, {E2E_EXECUTORS} idle executors long-polling; "
        "started_at (the grant's commit time) - scheduled_time of first attempts, from the leader's watch; "
        "a run is never leasable before its instant, so this is >= 0" + ("" if lags else "; nothing was leased")
    )
    b.say(f"  due_to_leased_ms: {b.results['due_to_leased_ms']}")


def e2e_with_executors(b: Bench) -> None:
    """Real `raftsched executor` processes (no-op handler) on the rest of the backlog; SUCCEEDED per second."""
    counter = StatusPoller(b.follower_address(), lambda status: status.runs.succeeded)
    time.sleep(0.3)  # a first sample before any executor runs
    procs = _executors(b, "bench-exec", E2E_QUEUES, E2E_CONCURRENCY)
    start = until = 0.0
    try:
        deadline = time.time() + 20
        while not counter.grown() and time.time() < deadline:
            time.sleep(0.1)
        start = time.time() + 1.0
        until = start + b.profile.lease_measure_s
        time.sleep(max(0.0, until - time.time()) + 0.2)
    finally:
        stop_popen(procs)
        counter.stop()
    samples = counter.samples
    rate = st.counter_rate(samples, start, until) if counter.grown() else None
    b.results["e2e_runs_per_s"] = r1(rate) if rate is not None else None
    b.extra["e2e_runs_per_s"] = {"succeeded_total": samples[-1][1] - samples[0][1] if samples else 0}
    b.notes["e2e_runs_per_s"] = (
        f"fired runs leased, run and completed per second by {E2E_EXECUTORS} `raftsched executor` processes "
        f"(concurrency {E2E_CONCURRENCY}, built-in no-op handler, local run logs) on half of the burst's backlog "
        "(queues bench-burst-2/3); "
        "the growth of a follower's SUCCEEDED count (ClusterStatus.runs, polled every 0.1 s: watching every "
        "event would cost the cluster a stream), 1 s warm-up left out" + ("" if rate is not None else "; nothing completed")
    )
    b.say(f"  e2e_runs_per_s: {b.results['e2e_runs_per_s']}")
