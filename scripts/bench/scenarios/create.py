"""Scenario ``create``: how fast concurrent clients create jobs, one per call and 100 per call, and
the same clients against no-op gRPC servers (``create_jobs_per_s``, ``create_jobs_batched_per_s``,
``grpc_noop_calls_per_s``)."""

from __future__ import annotations

import os
import time
from typing import Any

from bench import stats as st
from bench.baselines.noop_grpc import noop_servers
from bench.harness.common import r1
from bench.harness.context import Bench
from bench.harness.pool import merge_errors

#: jobs per CreateJobs call, and threads per client process, of the batched run
BATCH, BATCH_THREADS = 100, 2
WARMUP_S = 1.0


def _closed_create(b: Bench, addresses: list[str], label: str) -> tuple[list[dict[str, Any]], float, float]:
    """The CreateJob closed loop on ``addresses``: the processes' results and the measured window."""
    assert b.pool is not None
    start = time.time() + 0.5
    until = start + WARMUP_S + b.profile.create_measure_s
    tasks = [{"kind": "create_closed", "addresses": addresses, "until": until} for _ in range(b.profile.procs)]
    res = b.pool.run(tasks, label, timeout=until - time.time() + 60)
    return res, start, until


def _record_create(b: Bench, res: list[dict[str, Any]], start: float, until: float, cpu: dict[str, float | None]) -> None:
    p = b.profile
    done = [t for r in res for t in r["done"]]
    lat = [x for r in res for x in r["lat"]]
    rate = st.rate_in_window(done, start + WARMUP_S, until)
    b.results["create_jobs_per_s"] = r1(rate)
    b.notes["create_jobs_per_s"] = (
        f"closed loop, {p.procs} client processes x {p.threads} threads, thread j of process i on node (i*{p.threads}+j) mod 3, "
        f"CreateJob of an every-1h job with an idempotency key; completions in {p.create_measure_s:.0f} s after a 1 s warm-up"
    )
    node_cpu = sum(v or 0.0 for k, v in cpu.items() if k != "clients")
    b.extra["create"] = {
        "created": len(done),
        "latency_ms": st.summarize(lat),
        "errors": merge_errors(res),
        "clients": f"{p.procs} processes x {p.threads} threads",
        "per_second": st.histogram(done, start, 1.0, until),
        "cpu_s_during_run": cpu,
        "node_cpu_ms_per_create": r1(node_cpu * 1000.0 / len(done), 3) if done else None,
        "cores_busy": r1(sum(v or 0.0 for v in cpu.values()) / (until - start + 0.5), 2),
    }
    b.series["create_per_second"] = b.extra["create"]["per_second"]
    b.say(
        f"  CreateJob: {rate or 0:.0f}/s (p50 {st.percentile(lat, 50) or 0:.1f} ms, p99 {st.percentile(lat, 99) or 0:.1f} ms, errors {merge_errors(res).get('counts', {})})"
    )
    b.say(
        f"  CPU s during the run: {cpu} (~{b.extra['create']['cores_busy']} of {os.cpu_count()} cores busy; {b.extra['create']['node_cpu_ms_per_create']} ms of node CPU per create)"
    )


def scenario_create(b: Bench) -> None:
    p = b.profile
    b.say(
        f"CreateJob throughput: {p.procs} processes x {p.threads} threads over 3 nodes, every-1h jobs, {p.create_measure_s:.0f} s"
    )
    cpu0 = b.cpu_snapshot()
    res, start, until = _closed_create(b, b.addresses(), "CreateJob")
    _record_create(b, res, start, until, b.cpu_delta(cpu0, b.cpu_snapshot()))
    _create_batched(b)
    _grpc_noop_baseline(b)


def _create_batched(b: Bench) -> None:
    p = b.profile
    assert b.pool is not None
    b.say(f"CreateJobs throughput: {p.procs} processes x {BATCH_THREADS} threads over 3 nodes, {BATCH} jobs per call")
    start = time.time() + 0.5
    until = start + WARMUP_S + p.create_measure_s
    task = {"kind": "create_batched", "addresses": b.addresses(), "until": until, "batch": BATCH, "threads": BATCH_THREADS}
    res = b.pool.run([dict(task) for _ in range(p.procs)], "CreateJobs", timeout=until - time.time() + 90)
    done = [t for r in res for t in r["done"]]
    lat = [x for r in res for x in r["lat"]]
    rate = st.rate_in_window(done, start + WARMUP_S, until)
    b.results["create_jobs_batched_per_s"] = r1(rate)
    b.notes["create_jobs_batched_per_s"] = (
        f"closed loop, {p.procs} client processes x {BATCH_THREADS} threads, CreateJobs of {BATCH} every-1h jobs with idempotency keys "
        f"(each item answered on its own); jobs created in {p.create_measure_s:.0f} s after a 1 s warm-up"
    )
    b.extra["create_batched"] = {"created": len(done), "call_latency_ms": st.summarize(lat), "errors": merge_errors(res)}
    b.say(
        f"  CreateJobs: {rate or 0:.0f} jobs/s (call p50 {st.percentile(lat, 50) or 0:.0f} ms, errors {merge_errors(res).get('counts', {})})"
    )


def _grpc_noop_baseline(b: Bench) -> None:
    """The same CreateJob clients against 3 no-op gRPC server processes: the ceiling gRPC alone allows here."""
    try:
        with noop_servers(3) as addrs:
            res, start, until = _closed_create(b, addrs, "no-op CreateJob")
        rate = st.rate_in_window([t for r in res for t in r["done"]], start + WARMUP_S, until)
    except (RuntimeError, TimeoutError, OSError) as exc:
        b.results["grpc_noop_calls_per_s"] = None
        b.notes["grpc_noop_calls_per_s"] = f"baseline failed: {exc}"
        return
    b.results["grpc_noop_calls_per_s"] = r1(rate)
    b.notes["grpc_noop_calls_per_s"] = (
        "baseline in the same run: the CreateJob clients of create_jobs_per_s against 3 gRPC server processes "
        "(the nodes' server settings) whose CreateJob only answers; the most single CreateJob calls this machine's "
        "Python gRPC stack allows, before any scheduling work"
    )
    created = b.results.get("create_jobs_per_s")
    if rate and created:
        b.extra["create_vs_grpc_noop"] = r1(created / rate, 3)
    b.say(f"  gRPC no-op baseline: {rate or 0:.0f} calls/s (CreateJob reaches {b.extra.get('create_vs_grpc_noop')} of it)")
