"""Scenario ``steady``: a steady load, and what each run costs every node.

``fire_rate`` every-1s no-op jobs (2,000 runs due each second; ``--fire-rate``
sets it) on their own queue, served by ``STEADY_EXECUTORS`` `raftsched executor` processes (each
completing its runs in batches, as it does), for ``steady_s`` seconds after a
warm-up. Measured:

* ``steady_runs_per_s`` — runs completed per second, from a follower's
  SUCCEEDED count (ClusterStatus, no Raft round trip);
* ``steady_cpu_us_per_run`` — each node's CPU time over the window divided by
  the runs completed in it, for the leader and the followers: what a run costs
  a replica, the figure the state's store is judged by;
* ``steady_due_to_leased_ms`` — a run's grant (``started_at``) minus its
  instant, p50 and p99, read back after the window from the runs of a sample of
  the jobs: no watch stream loads the nodes while they are measured.

The jobs are created ``CREATE_BATCH`` a call, the calls spaced evenly over the
profile's ``steady_spread_s`` (``--steady-spread``; each call sent at its time,
whatever the others take), so the jobs' instants fall in that part of every
second, the same for every version measured: 1 s (the default) spreads them
evenly, ``fire_rate`` runs a second at any moment; 0.4 s puts them in bursts
of 2.5 times the rate. (Created as fast as a version could, their instants fell
in the part of the second the creation took: a version that created faster got
the same runs in shorter bursts.) ``details.steady.instants_busiest_100ms`` is
the share of the instants in the busiest tenth of the second (0.1 when even).

When the runs PENDING grow past ``BEHIND_S`` seconds of the load, the cluster
does not keep up: the window ends there and the figures are ``None``, with a
note of how far behind it fell. The jobs are paused, then deleted, afterwards.
Run when named (``--scenarios steady``).
"""

from __future__ import annotations

import os
import random
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from bench import stats as st
from bench.harness.common import r1, ts_ms
from bench.harness.context import Bench
from bench.harness.processes import spawn_executors, stop_popen
from bench.harness.watch import StatusPoller
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc

STEADY_EXECUTORS = 3
#: jobs per CreateJobs call; the calls are spaced evenly over the profile's ``steady_spread_s``
CREATE_BATCH = 20
STEADY_CONCURRENCY = 64
STEADY_QUEUE = "bench-steady"
WARMUP_S = 5.0
#: jobs whose runs are read back for due -> leased
SAMPLE_JOBS = 200
#: the window ends when more runs than this many seconds of the load are PENDING
BEHIND_S = 10
KEYS = ("steady_runs_per_s", "steady_cpu_us_per_run", "steady_due_to_leased_ms")


def _create(stub: pb_grpc.JobServiceStub, n: int, spread_s: float) -> tuple[list[str], float]:
    """``n`` every-1s jobs through CreateJobs, ``CREATE_BATCH`` a call, the calls sent at times spaced evenly over
    ``spread_s`` seconds (16 at once at most: a slow call does not hold the next back); their ids, and the share of
    their first instants in the busiest tenth of a second (0.1 when spread evenly over it)."""
    batches = [range(k, min(k + CREATE_BATCH, n)) for k in range(0, n, CREATE_BATCH)]
    began = time.monotonic()

    def one(j: int) -> list[pb.Job]:
        wait = began + j * spread_s / len(batches) - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        reqs = []
        for i in batches[j]:
            spec = pb.JobSpec(name=f"steady-{i}", queue=STEADY_QUEUE, type="noop")
            spec.every.seconds = 1
            reqs.append(pb.CreateJobRequest(spec=spec, idempotency_key=uuid.uuid4().hex))
        resp = stub.CreateJobs(pb.CreateJobsRequest(jobs=reqs), timeout=60)
        return [r.job for r in resp.results if r.status.code == 0]

    with ThreadPoolExecutor(16) as pool:
        jobs = [job for made in pool.map(one, range(len(batches))) for job in made]
    return [job.job_id for job in jobs], busiest_tenth([ts_ms(job.next_fire_time) for job in jobs])


def busiest_tenth(instants_ms: list[int]) -> float:
    """The share of ``instants_ms`` whose place in their second falls in its busiest tenth (0.1: spread evenly)."""
    if not instants_ms:
        return 0.0
    tenths = [0] * 10
    for ms in instants_ms:
        tenths[ms % 1000 // 100] += 1
    return round(max(tenths) / len(instants_ms), 3)


def _each(call: Any, ids: list[str]) -> None:
    """``call(job_id)`` for every job, 16 at a time (a Raft round trip each), errors ignored (the cleanup is best effort)."""

    def one(job_id: str) -> None:
        try:
            call(job_id)
        except grpc.RpcError:
            pass

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(one, ids))


def _window(b: Bench, backlog: StatusPoller, window_s: float, limit: int) -> tuple[float, float]:
    """Sleep through the window, ending it early when the backlog passes ``limit``: (start, end)."""
    start = time.time()
    while time.time() < start + window_s and backlog.latest() <= limit:
        time.sleep(0.2)
    return start, time.time()


def _lags(stub: pb_grpc.JobServiceStub, ids: list[str], start: float, until: float) -> tuple[list[float], list[float]]:
    """started_at - scheduled_time and fired_at - scheduled_time of the first attempts of runs scheduled in
    [start, until), of a sample of jobs."""
    lags: list[float] = []
    fired: list[float] = []
    for job_id in random.Random(7).sample(ids, min(SAMPLE_JOBS, len(ids))):
        token = ""
        while True:
            resp = stub.ListRuns(pb.ListRunsRequest(job_id=job_id, page_size=200, page_token=token), timeout=30)
            for run in resp.runs:
                scheduled = ts_ms(run.scheduled_time)
                if start * 1000 <= scheduled < until * 1000 and run.HasField("started_at") and run.attempt == 1:
                    lags.append(float(ts_ms(run.started_at) - scheduled))
                    fired.append(float(ts_ms(run.fired_at) - scheduled))
            token = resp.next_page_token
            if not token:
                break
    return lags, fired


def scenario_steady(b: Bench) -> None:
    """steady_runs_per_s, steady_cpu_us_per_run (leader, followers) and steady_due_to_leased_ms."""
    assert b.cluster is not None
    window_s = 30.0 if b.profile.name == "full" else 10.0
    n = b.profile.fire_rate
    limit = BEHIND_S * n
    leader = b.leader()
    root = os.path.dirname(b.cluster.config_path)
    with grpc.insecure_channel(b.nodes[leader].grpc) as ch:
        stub = pb_grpc.JobServiceStub(ch)
        procs = spawn_executors(
            b.addresses(), root, "bench-steady", [STEADY_QUEUE], STEADY_CONCURRENCY, STEADY_EXECUTORS, b.runtime
        )
        ids: list[str] = []
        busiest = 0.0
        counter = StatusPoller(b.follower_address(), lambda status: status.runs.succeeded)
        backlog = StatusPoller(b.follower_address(), lambda status: status.pending_by_queue.get(STEADY_QUEUE, 0))
        start = until = time.time()
        try:
            time.sleep(2.0)  # executors up and long-polling
            b.say(f"steady: {n} every-1s no-op jobs, {STEADY_EXECUTORS} executors, {window_s:g} s measured")
            ids, busiest = _create(stub, n, b.profile.steady_spread_s)
            time.sleep(WARMUP_S)
            cpu0, term0 = b.cpu_snapshot(), b.term()
            start, until = _window(b, backlog, window_s, limit)
            cpu1, term1 = b.cpu_snapshot(), b.term()
        finally:
            _each(lambda j: stub.PauseJob(pb.PauseJobRequest(job_id=j), timeout=30), ids)
            time.sleep(2.0)  # the last runs complete
            stop_popen(procs)
            counter.stop()
            backlog.stop()
        behind = backlog.latest() > limit
        lags, fired = ([], []) if behind else _lags(stub, ids, start, until)
        _each(lambda j: stub.DeleteJob(pb.DeleteJobRequest(job_id=j), timeout=30), ids)
    how = (
        f"{len(ids)} every-1s no-op jobs on one queue (created over {b.profile.steady_spread_s:g} s: {busiest:.0%} of "
        f"their instants in the busiest tenth of each second), {STEADY_EXECUTORS} `raftsched executor` processes "
        f"(concurrency {STEADY_CONCURRENCY}), {window_s:g} s after {WARMUP_S:g} s of warm-up"
    )
    if behind:
        reason = (
            f"the cluster fell behind: {backlog.latest()} runs PENDING {until - start + WARMUP_S:.0f} s into the load "
            f"({how}): it does not sustain {n} runs/s on this machine; try a lower --fire-rate"
        )
        for key in KEYS:
            b.results[key] = None
            b.notes[key] = reason
        b.say(f"  steady: {reason}")
        return
    rate = st.counter_rate(counter.samples, start, until) if counter.grown() else None
    cpu = b.cpu_delta(cpu0, cpu1)
    done = (rate or 0.0) * (until - start)
    per_run = {
        ("leader" if node == leader else f"follower {node}"): round(s / done * 1e6, 1)
        for node, s in cpu.items()
        if node != "clients" and s is not None and done > 0
    }
    b.results["steady_runs_per_s"] = r1(rate)
    b.results["steady_cpu_us_per_run"] = per_run or None
    b.results["steady_due_to_leased_ms"] = st.summarize(lags) if lags else None
    b.extra["steady"] = {
        "jobs": len(ids),
        "window_s": round(until - start, 2),
        "cpu_s": cpu,
        "sampled_runs": len(lags),
        "instants_busiest_100ms": busiest,
        # the first part of due -> leased: the leader's fire (its commit is not in it)
        "due_to_fired_ms": st.summarize(fired) if fired else None,
    }
    if term0 != term1:
        how += f"; WARNING: the Raft term went from {term0} to {term1} (an election) in the window"
    b.notes["steady_runs_per_s"] = how + "; the growth of a follower's SUCCEEDED count"
    b.notes["steady_cpu_us_per_run"] = how + "; each node's CPU seconds in the window over the runs completed in it"
    b.notes["steady_due_to_leased_ms"] = (
        how + f"; started_at - scheduled_time of first attempts scheduled in the window, {SAMPLE_JOBS} jobs' runs read back"
    )
    b.say(
        f"  steady: {r1(rate)} runs/s; CPU per run {per_run} us; due->leased {b.results['steady_due_to_leased_ms']}; "
        f"due->fired {b.extra['steady']['due_to_fired_ms']}"
    )
