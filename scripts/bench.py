#!/usr/bin/env python
"""raftsched benchmark: one command, its own clusters on loopback, a table and bench.json.

    python scripts/bench.py [--quick] [--out DIR]

Starts, in one run and on this machine only (127.0.0.1):

* a bare 3-process pysyncobj cluster with the SyncObjConf our nodes use
  (``raft.adapter.build_conf``): the ceiling for replicated commands;
* a 3-member etcd (when ``/usr/bin/etcd`` is installed): LeaseGrant, for comparison;
* a 3-node raftsched cluster (``cluster.app.local_cluster.LocalCluster``), on which it
  measures CreateJob throughput, fire lag at a steady fire rate, leader
  failover (SIGKILL) to the next committed fire, a burst of jobs all due at
  one instant, and (once leases exist) lease grants and end-to-end runs.

Load comes from separate client processes (multiprocessing, spawn), each with
several threads, spread across the nodes. Every process started here is
stopped by pid in ``finally`` blocks; everything lives in a temp dir under
/tmp. Results: a table on stdout (progress while it runs), ``DIR/bench.json``
(the keys listed in ``RESULT_KEYS`` at least), ``DIR/series.json`` (the raw
series behind the plots) and PNG plots (``scripts/bench_plot.py``).

A scenario is a function ``scenario_<name>(bench)`` listed in ``SCENARIOS``;
it writes into ``bench.results`` and explains any ``None`` in ``bench.notes``.
Numbers are measured or ``None``: never estimated.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.metadata
import json
import math
import multiprocessing as mp
import os
import platform
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

SCRIPTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(SCRIPTS_DIR)
for _p in (SCRIPTS_DIR, REPO_ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import bench_stats as st
import grpc

from protos.raftsched.v1 import scheduler_pb2 as pb
from protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc

# --------------------------------------------------------------------------- targets

#: key -> (target, higher_is_better, what the verdict is judged on)
TARGETS: dict[str, tuple[float, bool, str]] = {
    "create_jobs_per_s": (3000.0, True, "CreateJob/s with concurrent clients through all nodes"),
    "create_jobs_batched_per_s": (3000.0, True, "jobs/s created by concurrent clients through CreateJobs (100 per call)"),
    "fire_lag_ms.p99": (50.0, False, "p99 of observed_at - scheduled_time (ms) at the fire rate"),
    "burst_fire_s": (10.0, False, "seconds from the common instant until all burst jobs fired (100k in the full run)"),
    "failover_resume_s.max": (3.0, False, "seconds from SIGKILL of the leader to the next committed fire (worst of the kills)"),
    "e2e_runs_per_s": (2000.0, True, "fire -> lease -> no-op -> complete per second with 4 executor processes"),
    "due_to_leased_ms.p99": (100.0, False, "p99 of lease grant time - scheduled_time (ms) with idle, waiting executors"),
}

#: the keys bench.json always has (None when not measured, with a reason in notes)
RESULT_KEYS = (
    "raw_raft_commits_per_s",
    "create_jobs_per_s",
    "create_jobs_batched_per_s",
    "grpc_noop_calls_per_s",
    "fire_lag_ms",
    "fire_lag_ms_clamped",
    "fire_rate",
    "burst_fire_s",
    "e2e_runs_per_s",
    "due_to_leased_ms",
    "lease_grants_per_s",
    "etcd_lease_grants_per_s",
    "failover_resume_s",
    "node_rss_mb",
    "node_cpu_s",
    "machine",
)


#: an observation this long after the fire was proposed is a restarted node re-applying its journal
REPLAY_MS = 2000

#: the burst's jobs are spread over these queues (one watch each)
BURST_QUEUES = ["bench-burst-0", "bench-burst-1", "bench-burst-2", "bench-burst-3"]


@dataclass(frozen=True)
class Profile:
    name: str
    raw_warmup_s: float = 1.0
    raw_measure_s: float = 5.0
    etcd_measure_s: float = 5.0
    create_measure_s: float = 10.0
    fire_rate: int = 2000
    fire_stagger_s: int = 2  # the every-1s jobs are created over this many whole seconds
    fire_warmup_s: float = 2.0
    fire_window_s: float = 10.0
    failover_jobs: int = 200
    failover_kills: int = 3
    failover_settle_s: float = 3.0
    burst_jobs: int = 100_000
    lease_measure_s: float = 5.0
    procs: int = 4
    threads: int = 16
    #: the whole run should end within this (the burst shrinks its lead time, the lease runs are skipped)
    budget_s: float = 560.0


FULL = Profile("full")
QUICK = Profile(
    "quick",
    raw_measure_s=3.0,
    etcd_measure_s=3.0,
    create_measure_s=5.0,
    fire_window_s=5.0,
    failover_kills=1,
    failover_settle_s=2.0,
    burst_jobs=20_000,
    lease_measure_s=3.0,
    budget_s=225.0,
)

# --------------------------------------------------------------------------- helpers


def cpu_s(pid: int | None) -> float | None:
    """utime + stime of a process in seconds (/proc/<pid>/stat fields 14 and 15)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def ts_ms(t: Any) -> int:
    return t.seconds * 1000 + t.nanos // 1_000_000


def every_spec(name: str, every_s: int, queue_name: str) -> pb.JobSpec:
    spec = pb.JobSpec(name=name, queue=queue_name, type="shell", payload=b'{"command": "true"}')
    spec.every.seconds = every_s
    return spec


def at_spec(name: str, at: int, queue_name: str) -> pb.JobSpec:
    spec = pb.JobSpec(name=name, queue=queue_name, type="noop")  # the executors' built-in no-op handler
    spec.at.seconds, rem = divmod(at, 1000)
    spec.at.nanos = rem * 1_000_000
    return spec


def r1(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(x, nd)


# =========================================================================== worker processes
#
# A pool of client processes (spawn). Each gets task dicts on its own queue and
# runs them on ``threads`` threads; thread j of process p talks to node
# (p * threads + j) % len(addresses). A task kind is a function in TASKS.


class _Progress:
    """Per-process operation counter, published to a shared array slot twice a second."""

    def __init__(self, slot: Any, index: int) -> None:
        self.count = 0
        self._lock = threading.Lock()
        self._slot, self._index = slot, index
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def add(self, n: int = 1) -> None:
        with self._lock:
            self.count += n

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self._slot[self._index] = self.count

    def close(self) -> None:
        self._stop.set()
        self._slot[self._index] = self.count


class _Errors:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.first: dict[str, str] = {}
        self._lock = threading.Lock()

    def add(self, exc: BaseException) -> None:
        if isinstance(exc, grpc.RpcError):
            code = exc.code().name  # type: ignore[attr-defined]
            msg = exc.details() or ""  # type: ignore[attr-defined]
        else:
            code, msg = type(exc).__name__, str(exc)
        with self._lock:
            self.counts[code] = self.counts.get(code, 0) + 1
            self.first.setdefault(code, msg[:300])

    def as_dict(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "first": dict(self.first)}


def _call_retrying(fn: Callable[[], Any], errors: _Errors, give_up_at: float) -> Any:
    """Call; on UNAVAILABLE retry (counted) until ``give_up_at`` (wall time). None on failure."""
    delay = 0.02
    while True:
        try:
            return fn()
        except grpc.RpcError as exc:
            errors.add(exc)
            if exc.code() != grpc.StatusCode.UNAVAILABLE or time.time() + delay > give_up_at:  # type: ignore[attr-defined]
                return None
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)


def _run_threads(threads: int, target: Callable[[int], Any]) -> list[Any]:
    out: list[Any] = [None] * threads

    def run(j: int) -> None:
        try:
            out[j] = target(j)
        except BaseException as exc:  # noqa: BLE001 - reported back to the main process
            out[j] = {"thread_error": "".join(traceback.format_exception(exc))}

    ts = [threading.Thread(target=run, args=(j,), daemon=True) for j in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


class _Ctx:
    """What a task function gets in a worker process."""

    def __init__(self, index: int, threads: int, task: dict[str, Any], progress: _Progress) -> None:
        self.index, self.threads, self.task, self.progress = index, threads, task, progress
        self.errors = _Errors()
        addrs = task.get("addresses") or []
        self.channels = [grpc.insecure_channel(a) for a in addrs]
        self.jobs = [pb_grpc.JobServiceStub(ch) for ch in self.channels]
        self.leases = [pb_grpc.LeaseServiceStub(ch) for ch in self.channels]

    def node_of(self, j: int) -> int:
        return (self.index * self.threads + j) % max(1, len(self.channels))

    def close(self) -> None:
        for ch in self.channels:
            ch.close()


def _closed_loop(ctx: _Ctx, threads: int, build: Callable[[], Any], send: Callable[[Any, Any], int]) -> dict[str, Any]:
    """Every thread sends ``build()`` to its node with ``send(stub, request)`` (which returns how
    many jobs it created) until ``ctx.task["until"]``: ``done`` holds a time per job, ``lat`` one
    latency per call; failed calls are counted in ``ctx.errors`` (UNAVAILABLE pauses 50 ms)."""
    until = ctx.task["until"]

    def run(j: int) -> dict[str, Any]:
        stub = ctx.jobs[ctx.node_of(j)]
        done: list[float] = []
        lat: list[float] = []
        while time.time() < until:
            req = build()
            t0 = time.time()
            try:
                ok = send(stub, req)
            except grpc.RpcError as exc:
                ctx.errors.add(exc)
                if exc.code() == grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
                    time.sleep(0.05)
                continue
            t1 = time.time()
            done += [t1] * ok
            lat.append((t1 - t0) * 1000.0)
            ctx.progress.add(ok)
        return {"done": done, "lat": lat}

    return _merge_parts(_run_threads(threads, run), ("done", "lat"))


def _task_create_closed(ctx: _Ctx) -> dict[str, Any]:
    """Closed loop: every thread creates every-1h jobs until ``until`` (wall time)."""
    timeout = ctx.task.get("timeout", 10.0)
    spec = every_spec("bench-create", 3600, "bench-create")

    def send(stub: Any, req: Any) -> int:
        stub.CreateJob(req, timeout=timeout)
        return 1

    return _closed_loop(ctx, ctx.threads, lambda: pb.CreateJobRequest(spec=spec, idempotency_key=f"bc-{uuid.uuid4().hex}"), send)


def _task_create_batched(ctx: _Ctx) -> dict[str, Any]:
    """Closed loop: every thread creates every-1h jobs ``batch`` at a time through CreateJobs."""
    batch = ctx.task["batch"]
    spec = every_spec("bench-create-batched", 3600, "bench-create")

    def build() -> Any:
        return pb.CreateJobsRequest(
            jobs=[pb.CreateJobRequest(spec=spec, idempotency_key=f"bb-{uuid.uuid4().hex}") for _ in range(batch)]
        )

    def send(stub: Any, req: Any) -> int:
        resp = stub.CreateJobs(req, timeout=30)
        for r in resp.results:
            if r.status.code:
                ctx.errors.add(RuntimeError(f"item {r.status.code}: {r.status.message}"))
        return sum(1 for r in resp.results if r.status.code == 0)

    return _closed_loop(ctx, min(ctx.threads, int(ctx.task.get("threads", ctx.threads))), build, send)


def _task_create_paced(ctx: _Ctx) -> dict[str, Any]:
    """Create every-N-s jobs, item i at wall time ``send_at``; returns (i, job_id, created_ms)."""
    items: list[tuple[int, float]] = ctx.task["items"]
    every_s, queue_name, prefix = ctx.task["every_s"], ctx.task["queue"], ctx.task["prefix"]
    give_up = ctx.task["give_up_at"]

    def run(j: int) -> dict[str, Any]:
        stub = ctx.jobs[ctx.node_of(j)]
        made, late = [], []
        for i, send_at in items[j :: ctx.threads]:
            if time.time() >= give_up:
                break
            delay = send_at - time.time()
            if delay > 0:
                time.sleep(delay)
            else:
                late.append(-delay)
            req = pb.CreateJobRequest(
                spec=every_spec(f"{prefix}-{i}", every_s, queue_name), idempotency_key=f"{prefix}-{i}-{uuid.uuid4().hex}"
            )
            job = _call_retrying(partial(stub.CreateJob, req, timeout=10.0), ctx.errors, give_up)
            if job is not None:
                made.append((i, job.job_id, ts_ms(job.created_at)))
                ctx.progress.add()
        return {"made": made, "late": late}

    parts = _run_threads(ctx.threads, run)
    return _merge_parts(parts, ("made", "late"))


def _task_create_at(ctx: _Ctx) -> dict[str, Any]:
    """Create ``count`` one-shot jobs all due at ``at_ms`` through CreateJobs (100 per call, 2 threads), until ``give_up_at``."""
    count, at, queue_name = ctx.task["count"], ctx.task["at_ms"], ctx.task["queue"]
    give_up = ctx.task["give_up_at"]
    lock = threading.Lock()
    left = [count]

    batch = 100

    def take() -> int:
        with lock:
            n = min(batch, left[0])
            left[0] -= n
            return n

    def run(j: int) -> dict[str, Any]:
        stub = ctx.jobs[ctx.node_of(j)]
        done = []
        spec = at_spec("bench-burst", at, queue_name)
        while time.time() < give_up and (n := take()) > 0:
            # CreateJobs, with idempotency keys: a retried call cannot create a job twice
            keys = [f"bb-{uuid.uuid4().hex}" for _ in range(n)]
            while keys and time.time() < give_up:
                req = pb.CreateJobsRequest(jobs=[pb.CreateJobRequest(spec=spec, idempotency_key=k) for k in keys])
                resp = _call_retrying(partial(stub.CreateJobs, req, timeout=30.0), ctx.errors, give_up)
                if resp is None:
                    break
                retry = []
                for k, r in zip(keys, resp.results):
                    if r.status.code == 0:
                        done.append(time.time())
                        ctx.progress.add()
                    else:
                        ctx.errors.add(RuntimeError(f"item {r.status.code}: {r.status.message}"))
                        if r.status.code == grpc.StatusCode.UNAVAILABLE.value[0]:
                            retry.append(k)
                keys = retry
        return {"done": done}

    parts = _run_threads(min(ctx.threads, 2), run)
    return _merge_parts(parts, ("done",))


def _task_delete(ctx: _Ctx) -> dict[str, Any]:
    ids: list[str] = ctx.task["job_ids"]
    give_up = ctx.task["give_up_at"]

    def run(j: int) -> dict[str, Any]:
        stub = ctx.jobs[ctx.node_of(j)]
        n = 0
        for job_id in ids[j :: ctx.threads]:
            if time.time() >= give_up:
                break
            req = pb.DeleteJobRequest(job_id=job_id)
            if _call_retrying(partial(stub.DeleteJob, req, timeout=10.0), ctx.errors, give_up) is not None:
                n += 1
                ctx.progress.add()
        return {"deleted": n}

    parts = _run_threads(ctx.threads, run)
    return {"deleted": sum(p.get("deleted", 0) for p in parts if isinstance(p, dict)), **_thread_errors(parts)}


def _task_etcd_grant(ctx: _Ctx) -> dict[str, Any]:
    """Closed loop of etcd LeaseGrant through its JSON gateway, keep-alive connections."""
    urls: list[tuple[str, int]] = ctx.task["etcd"]
    until, ttl = ctx.task["until"], ctx.task.get("ttl", 30)
    body = json.dumps({"TTL": ttl}).encode()

    def run(j: int) -> dict[str, Any]:
        host, port = urls[(ctx.index * ctx.threads + j) % len(urls)]
        conn = http.client.HTTPConnection(host, port, timeout=10)
        done, lat = [], []
        try:
            while time.time() < until:
                t0 = time.time()
                try:
                    conn.request("POST", "/v3/lease/grant", body, {"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    data = resp.read()
                    if resp.status != 200 or b'"ID"' not in data:
                        raise RuntimeError(f"HTTP {resp.status}: {data[:200]!r}")
                except Exception as exc:  # noqa: BLE001 - counted, connection renewed
                    ctx.errors.add(exc)
                    conn.close()
                    conn = http.client.HTTPConnection(host, port, timeout=10)
                    time.sleep(0.05)
                    continue
                t1 = time.time()
                done.append(t1)
                lat.append((t1 - t0) * 1000.0)
                ctx.progress.add()
        finally:
            conn.close()
        return {"done": done, "lat": lat}

    parts = _run_threads(ctx.threads, run)
    return _merge_parts(parts, ("done", "lat"))


def _task_lease_acquire(ctx: _Ctx) -> dict[str, Any]:
    """Closed loop of AcquireLease (max_runs=1) on a queue with a backlog; optionally CompleteRun each.

    Written against the public API for when LeaseService exists; only run
    after a probe of AcquireLease succeeded.
    """
    until, queues, complete = ctx.task["until"], ctx.task["queues"], ctx.task.get("complete", False)
    batch = int(ctx.task.get("max_runs", 1))

    def run(j: int) -> dict[str, Any]:
        n = ctx.node_of(j)
        lease_stub = ctx.leases[n]
        executor = f"bench-{ctx.index}-{j}"
        granted, completed, lat = [], [], []
        held: list[tuple[str, int]] = []
        while time.time() < until:
            t0 = time.time()
            try:
                req = pb.AcquireLeaseRequest(executor_id=executor, queues=queues, max_runs=batch)
                req.wait.seconds = 1
                resp = lease_stub.AcquireLease(req, timeout=10.0)
            except grpc.RpcError as exc:
                ctx.errors.add(exc)
                time.sleep(0.05)
                continue
            t1 = time.time()
            if not resp.leases:
                time.sleep(0.01)
                continue
            granted.extend([t1] * len(resp.leases))
            lat.append((t1 - t0) * 1000.0)
            ctx.progress.add()
            if not complete:
                held += [(lease.lease_id, lease.fencing_token) for lease in resp.leases]
            if complete:
                for lease in resp.leases:
                    req = pb.CompleteRunRequest(
                        lease_id=lease.lease_id,
                        fencing_token=lease.fencing_token,
                        outcome=pb.OUTCOME_SUCCEEDED,
                        executor_id=executor,
                    )
                    try:
                        lease_stub.CompleteRun(req, timeout=10.0)
                        completed.append(time.time())
                    except grpc.RpcError as exc:
                        ctx.errors.add(exc)
        # after the measurement, complete what was granted (untimed): otherwise these leases would
        # all expire a TTL later, in the middle of a later scenario
        for k in range(0, len(held), 1000):
            reqs = [
                pb.CompleteRunRequest(lease_id=i, fencing_token=t, outcome=pb.OUTCOME_SUCCEEDED, executor_id=executor)
                for i, t in held[k : k + 1000]
            ]
            try:
                lease_stub.CompleteRuns(pb.CompleteRunsRequest(runs=reqs), timeout=60.0)
            except grpc.RpcError as exc:
                ctx.errors.add(exc)
        return {"granted": granted, "completed": completed, "lat": lat}

    parts = _run_threads(ctx.threads, run)
    return _merge_parts(parts, ("granted", "completed", "lat"))


TASKS: dict[str, Callable[[_Ctx], dict[str, Any]]] = {
    "create_closed": _task_create_closed,
    "create_batched": _task_create_batched,
    "create_paced": _task_create_paced,
    "create_at": _task_create_at,
    "delete": _task_delete,
    "etcd_grant": _task_etcd_grant,
    "lease_acquire": _task_lease_acquire,
}


def _thread_errors(parts: list[Any]) -> dict[str, Any]:
    errs = [p["thread_error"] for p in parts if isinstance(p, dict) and "thread_error" in p]
    return {"thread_errors": errs[:3]} if errs else {}


def _merge_parts(parts: list[Any], keys: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {k: [] for k in keys}
    for p in parts:
        if isinstance(p, dict):
            for k in keys:
                out[k].extend(p.get(k, []))
    out.update(_thread_errors(parts))
    return out


def worker_main(index: int, threads: int, tasks: Any, results: Any, progress_slots: Any) -> None:
    """Entry point of a client process: run tasks until a None arrives."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us by pid
    results.put((index, {"ready": True}))
    while True:
        task = tasks.get()
        if task is None:
            return
        progress_slots[index] = 0
        progress = _Progress(progress_slots, index)
        ctx = _Ctx(index, threads, task, progress)
        try:
            out = TASKS[task["kind"]](ctx)
            out["errors"] = ctx.errors.as_dict()
        except BaseException as exc:  # noqa: BLE001
            out = {"fatal": "".join(traceback.format_exception(exc))}
        finally:
            progress.close()
            ctx.close()
        results.put((index, out))


class WorkerPool:
    """``procs`` client processes (spawn) with ``threads`` threads each; stopped by pid."""

    def __init__(self, procs: int, threads: int, say: Callable[[str], None]) -> None:
        self.procs, self.threads, self._say = procs, threads, say
        ctx = mp.get_context("spawn")
        self._tasks = [ctx.Queue() for _ in range(procs)]
        self._results = ctx.Queue()
        self._progress = ctx.Array("q", procs, lock=False)
        self._ps = [
            ctx.Process(
                target=worker_main,
                args=(i, threads, self._tasks[i], self._results, self._progress),
                daemon=True,
                name=f"bench-client-{i}",
            )
            for i in range(procs)
        ]
        for p in self._ps:
            p.start()
        ready: set[int] = set()
        deadline = time.monotonic() + 60
        while len(ready) < procs:
            try:
                i, msg = self._results.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError("the client processes did not start within 60 s") from None
            if msg.get("ready"):
                ready.add(i)

    def progress(self) -> int:
        return int(sum(self._progress[:]))

    def run(self, tasks: list[dict[str, Any]], label: str, timeout: float, total: int | None = None) -> list[dict[str, Any]]:
        """Send task i to process i; wait for all answers, printing progress every 2 s."""
        assert len(tasks) <= self.procs
        for i, t in enumerate(tasks):
            self._tasks[i].put(t)
        out: dict[int, dict[str, Any]] = {}
        deadline = time.monotonic() + timeout
        last_print = time.monotonic()
        while len(out) < len(tasks):
            try:
                i, res = self._results.get(timeout=0.5)
                out[i] = res
            except queue.Empty:
                pass
            if time.monotonic() - last_print >= 2.0:
                last_print = time.monotonic()
                done = self.progress()
                self._say(f"  {label}: {done}{'/' + str(total) if total else ''} done")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{label}: the client processes did not answer within {timeout:.0f} s")
            dead = [p.name for p in self._ps if not p.is_alive()]
            if dead:
                raise RuntimeError(f"{label}: client process(es) died: {', '.join(dead)}")
        for i, res in out.items():
            if "fatal" in res:
                raise RuntimeError(f"{label}: client process {i} failed:\n{res['fatal']}")
            if res.get("thread_errors"):
                self._say(f"  {label}: a client thread failed:\n{res['thread_errors'][0]}")
        return [out[i] for i in sorted(out)]

    def close(self) -> None:
        for q in self._tasks:
            try:
                q.put_nowait(None)
            except (OSError, ValueError, queue.Full):  # a closed queue: the process is killed below
                continue
        deadline = time.monotonic() + 3
        for p in self._ps:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self._ps:
            if p.is_alive() and p.pid:
                os.kill(p.pid, signal.SIGKILL)
                p.join(2)


def merge_errors(results: list[dict[str, Any]]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for r in results:
        e = r.get("errors", {})
        for k, v in e.get("counts", {}).items():
            counts[k] = counts.get(k, 0) + v
        for k, v in e.get("first", {}).items():
            first.setdefault(k, v)
    return {"counts": counts, "first": first} if counts else {}


def split(seq: list[Any], n: int) -> list[list[Any]]:
    return [seq[i::n] for i in range(n)]


# =========================================================================== watching runs


@dataclass
class Fired:
    run_id: str
    scheduled_ms: int
    fired_ms: int
    observed_ms: int
    node: str


class Watcher:
    """A WatchRuns stream on one node, in a thread; keeps every ``fired`` event.

    Reconnects when the stream breaks (a killed node) until stopped.
    """

    def __init__(self, node_id: str, address: str, queue_name: str = "") -> None:
        self.node_id, self.address, self.queue_name = node_id, address, queue_name
        self.fired: list[Fired] = []
        self.breaks: list[tuple[int, str]] = []
        self.connected_at: list[int] = []
        self._stop = threading.Event()
        self._call: Any = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"watch-{node_id}", daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            ch = grpc.insecure_channel(self.address, options=[("grpc.max_receive_message_length", 64 << 20)])
            try:
                grpc.channel_ready_future(ch).result(timeout=2.0)
                # fires only: streaming every lease and completion too would load the node being measured
                req = pb.WatchRunsRequest(queue=self.queue_name, kinds=["fired"])
                call = pb_grpc.JobServiceStub(ch).WatchRuns(req)
                with self._lock:
                    self._call = call
                if self._stop.is_set():
                    call.cancel()
                self.connected_at.append(now_ms())
                append, node = self.fired.append, self.node_id
                for ev in call:
                    run = ev.run
                    append(Fired(run.run_id, ts_ms(run.scheduled_time), ts_ms(run.fired_at), ts_ms(ev.observed_at), node))
            except grpc.FutureTimeoutError:
                pass
            except grpc.RpcError as exc:
                if not self._stop.is_set():
                    self.breaks.append((now_ms(), f"{exc.code().name}: {exc.details()}"))  # type: ignore[attr-defined]
            finally:
                ch.close()
            self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            if self._call is not None:
                self._call.cancel()
        self._thread.join(timeout=5)


# =========================================================================== other load on the machine


class LoadMonitor:
    """Samples, every second, how much CPU processes that are not ours used (others' tests, ...).

    foreign = busy jiffies of the whole machine (/proc/stat) - CPU of this process and its
    descendants (/proc/<pid>/stat). A descendant that exits loses its last second: a slight
    overestimate of the foreign share around kills.
    """

    def __init__(self) -> None:
        self._tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.foreign_cpu_s = 0.0
        self.busy_cpu_s = 0.0
        self._last_busy: float | None = None
        self._last_ours: dict[int, float] = {}
        self._thread = threading.Thread(target=self._run, name="load-monitor", daemon=True)

    def start(self) -> LoadMonitor:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _busy(self) -> float | None:
        try:
            with open("/proc/stat", encoding="utf-8") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return (sum(fields[:8]) - idle) / self._tick

    def _ours(self) -> dict[int, float]:
        parent: dict[int, int] = {}
        cpu: dict[int, float] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", encoding="utf-8") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            pid = int(name)
            parent[pid] = int(fields[1])
            cpu[pid] = (int(fields[11]) + int(fields[12])) / self._tick
        me = os.getpid()
        ours: dict[int, float] = {}
        for pid, used in cpu.items():
            p, hops = pid, 0
            while p not in (0, 1) and hops < 64:
                if p == me:
                    ours[pid] = used
                    break
                p, hops = parent.get(p, 0), hops + 1
        return ours

    def _sample(self) -> None:
        busy, ours = self._busy(), self._ours()
        with self._lock:
            if busy is not None and self._last_busy is not None:
                ours_delta = sum(max(0.0, c - self._last_ours.get(pid, 0.0)) for pid, c in ours.items())
                d_busy = max(0.0, busy - self._last_busy)
                self.busy_cpu_s += d_busy
                self.foreign_cpu_s += max(0.0, d_busy - ours_delta)
            self._last_busy, self._last_ours = busy, ours

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self._sample()

    def snapshot(self) -> tuple[float, float, float]:
        """(monotonic time, foreign CPU s so far, busy CPU s so far)."""
        with self._lock:
            return time.monotonic(), self.foreign_cpu_s, self.busy_cpu_s


# =========================================================================== the raw Raft ceiling


def raw_raft_node(
    self_addr: str,
    peers: list[str],
    journal: str,
    dump: str,
    password: str,
    warmup: float,
    measure: float,
    results: Any,
    stop: Any,
    node_journal: bool = True,
) -> None:
    """One process of the bare pysyncobj cluster; the leader proposes and measures."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from pysyncobj import FAIL_REASON, SyncObj, replicated

    from raft.adapter import RaftSettings, build_conf

    class Counter(SyncObj):  # type: ignore[misc]
        def __init__(self, conf: Any) -> None:
            self.value = 0
            super().__init__(self_addr, peers, conf)

        @replicated
        def incr(self, payload: bytes) -> int:
            self.value += 1
            return self.value

    import logging

    class _Count(logging.Filter):
        n = 0

        def filter(self, record: logging.LogRecord) -> bool:
            if "truncating already-applied" in record.getMessage():
                _Count.n += 1
                return False
            return True

    logging.getLogger("pysyncobj.syncobj").addFilter(_Count())
    settings = RaftSettings(
        self_address=self_addr, peer_addresses=tuple(peers), journal_file=journal, dump_file=dump, password=password
    )
    # The nodes keep their Raft log in raft.lmdb_journal.LmdbJournal when this version has it: use the
    # same journal here, else pysyncobj's own file journal at the same path.
    journal_kind = "pysyncobj file journal"
    conf = None
    if node_journal:
        try:
            from raft.lmdb_journal import LmdbJournal

            conf = build_conf(settings, None, None, None, journal=LmdbJournal(journal, settings.journal_fsync))  # type: ignore[call-arg]
            journal_kind = "raft.lmdb_journal.LmdbJournal, as the nodes"
        except (ImportError, TypeError, AttributeError):
            conf = None
    if conf is None:
        conf = build_conf(settings, None, None, None)
    obj = Counter(conf)
    try:
        stable_since = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not stop.is_set():
            leader = obj._getLeader()
            if leader is None:
                stable_since = None
            elif stable_since is None:
                stable_since = time.monotonic()
            elif time.monotonic() - stable_since > 0.5:
                break
            time.sleep(0.05)
        if not obj._isLeader():
            stop.wait(120)
            results.put({"follower": self_addr, "truncations": _Count.n})
            return
        payload = os.urandom(100).hex().encode()  # 200 bytes
        cap = 20_000
        sem = threading.BoundedSemaphore(cap)
        ok: list[float] = []
        fails: dict[int, int] = {}

        def cb(_res: Any, err: int) -> None:
            if err == FAIL_REASON.SUCCESS:
                ok.append(time.monotonic())
            else:
                fails[err] = fails.get(err, 0) + 1
            sem.release()

        start = time.monotonic()
        end = start + warmup + measure
        proposed = 0
        while time.monotonic() < end:
            sem.acquire()
            obj.incr(payload, callback=cb)
            proposed += 1
        drain = time.monotonic() + 10
        while len(ok) + sum(fails.values()) < proposed and time.monotonic() < drain:
            time.sleep(0.01)
        w0, w1 = start + warmup, end
        committed = sum(1 for t in ok if w0 <= t < w1)
        results.put(
            {
                "commits_per_s": committed / measure,
                "proposed": proposed,
                "committed_total": len(ok),
                "failed": {str(k): v for k, v in fails.items()},
                "per_second": st.histogram(ok, start, 1.0, end),
                "leader": self_addr,
                "journal": journal_kind,
            }
        )
        stop.wait(120)
    finally:
        obj.destroy()


# =========================================================================== etcd


class EtcdCluster:
    def __init__(self, root: str, binary: str, members: int = 3) -> None:
        from cluster.app.local_cluster import free_ports

        self.root, self.binary = root, binary
        ports = free_ports(2 * members)
        self.names = [f"e{i + 1}" for i in range(members)]
        self.client_ports = ports[0::2]
        self.peer_ports = ports[1::2]
        self.procs: list[subprocess.Popen] = []

    @property
    def endpoints(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", p) for p in self.client_ports]

    def start(self) -> None:
        initial = ",".join(f"{n}=http://127.0.0.1:{p}" for n, p in zip(self.names, self.peer_ports))
        token = f"bench-{uuid.uuid4().hex[:8]}"
        for name, cp, pp in zip(self.names, self.client_ports, self.peer_ports):
            data = os.path.join(self.root, name)
            os.makedirs(data, exist_ok=True)
            cmd = [
                self.binary,
                "--name", name,
                "--data-dir", data,
                "--listen-client-urls", f"http://127.0.0.1:{cp}",
                "--advertise-client-urls", f"http://127.0.0.1:{cp}",
                "--listen-peer-urls", f"http://127.0.0.1:{pp}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{pp}",
                "--initial-cluster", initial,
                "--initial-cluster-state", "new",
                "--initial-cluster-token", token,
            ]  # fmt: skip
            with open(os.path.join(self.root, f"{name}.log"), "ab") as log:
                self.procs.append(
                    subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True)
                )

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            healthy = 0
            for host, port in self.endpoints:
                try:
                    conn = http.client.HTTPConnection(host, port, timeout=1)
                    conn.request("GET", "/health")
                    body = conn.getresponse().read()
                    conn.close()
                    if b'"true"' in body:
                        healthy += 1
                except OSError:
                    pass
            if healthy == len(self.endpoints):
                return
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"an etcd member exited; see the logs in {self.root}")
            time.sleep(0.2)
        raise TimeoutError(f"etcd not healthy within {timeout} s; see the logs in {self.root}")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()


# =========================================================================== the benchmark


@dataclass
class Bench:
    args: argparse.Namespace
    profile: Profile
    root: str
    out_dir: str
    t0: float = field(default_factory=time.monotonic)
    results: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    series: dict[str, Any] = field(default_factory=dict)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    cluster: Any = None
    pool: WorkerPool | None = None
    watchers: list[Watcher] = field(default_factory=list)
    lease_service: bool | None = None
    lease_probe: str = ""
    lag_jobs: list[tuple[int, str, int]] = field(default_factory=list)  # (i, job_id, created_ms)
    lag_start_ms: int | None = None
    lag_end_ms: int | None = None
    failover_jobs: list[str] = field(default_factory=list)
    wanted: list[str] = field(default_factory=list)
    monitor: LoadMonitor | None = None

    # ---------------------------------------------------------------- output

    def say(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f}s] {msg}", flush=True)

    def mark(self, event: str, t_ms: int | None = None, **kw: Any) -> None:
        self.timeline.append({"t_ms": now_ms() if t_ms is None else t_ms, "event": event, **kw})

    # ---------------------------------------------------------------- cluster helpers

    def addresses(self) -> list[str]:
        return self.cluster.addresses

    def leader(self, timeout: float = 30.0) -> str:
        return self.cluster.wait_leader(timeout)

    def term(self) -> int | None:
        """The highest Raft term the live nodes report: its growth counts elections."""
        terms = [
            s.term for s in (self.cluster.status(n) for n in self.cluster.nodes if self.cluster.nodes[n].alive()) if s is not None
        ]
        return max(terms) if terms else None

    def wait_caught_up(self, timeout: float, slack: int = 100) -> bool:
        """Wait until every node has applied the log up to (nearly) the commit index seen at the start."""
        deadline = time.monotonic() + timeout
        target = None
        while time.monotonic() < deadline:
            sts = [self.cluster.status(n) for n in self.cluster.nodes]
            if all(s is not None for s in sts):
                commit = max(s.commit_index for s in sts if s is not None)
                target = commit if target is None else target
                if all(s is not None and s.applied_index >= target - slack for s in sts):
                    return True
            time.sleep(0.2)
        return False

    def watch(self, node_id: str, queue_name: str = "") -> Watcher:
        w = Watcher(node_id, self.cluster.nodes[node_id].grpc, queue_name).start()
        self.watchers.append(w)
        return w

    def stop_watchers(self) -> None:
        for w in self.watchers:
            w.stop()
        self.watchers = []

    def give_up_at(self, seconds: float) -> float:
        return time.time() + seconds

    def run_scenario(self, name: str, fn: Callable[[Bench], None]) -> None:
        """Run one scenario; record its wall time and the CPU other processes took meanwhile."""
        before = self.monitor.snapshot() if self.monitor else None
        try:
            fn(self)
        finally:
            if self.monitor is not None and before is not None:
                self.monitor._sample()
                after = self.monitor.snapshot()
                wall = after[0] - before[0]
                foreign = after[1] - before[1]
                self.extra.setdefault("scenario_load", {})[name] = {
                    "wall_s": round(wall, 1),
                    "foreign_cpu_s": round(foreign, 1),
                    "foreign_cores": round(foreign / wall, 2) if wall > 0 else None,
                }
                if wall > 0 and foreign / wall > 0.2:
                    self.say(
                        f"  WARNING: processes outside this benchmark used {foreign / wall:.2f} of "
                        f"{os.cpu_count()} cores during '{name}': its numbers are low"
                    )

    def delete_budget_s(self) -> float:
        """How long a bulk DeleteJob may take: at most 60 s, less when the time budget runs low."""
        return min(60.0, max(10.0, self.remaining_s() - 90.0))

    def remaining_s(self) -> float:
        """Seconds left of the profile's time budget."""
        return self.profile.budget_s - (time.monotonic() - self.t0)

    def cpu_snapshot(self) -> dict[str, float | None]:
        """CPU seconds so far of each node and of the client processes together."""
        snap: dict[str, float | None] = {nid: cpu_s(n.pid) for nid, n in self.cluster.nodes.items()} if self.cluster else {}
        if self.pool is not None:
            snap["clients"] = sum(cpu_s(p.pid) or 0.0 for p in self.pool._ps)
        return snap

    @staticmethod
    def cpu_delta(before: dict[str, float | None], after: dict[str, float | None]) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for k, a in after.items():
            bk = before.get(k)
            out[k] = round(a - bk, 2) if a is not None and bk is not None else None
        return out


# --------------------------------------------------------------------------- machine


def scenario_machine(b: Bench) -> None:
    def version(pkg: str) -> str:
        try:
            return importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], check=False, cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        )
        git = commit.stdout.strip() if commit.returncode == 0 and commit.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        git = "unknown"
    cpu_model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gb = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            mem_gb = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    etcd = shutil.which("etcd")
    etcd_version = None
    if etcd:
        try:
            etcd_version = (
                subprocess.run([etcd, "--version"], check=False, capture_output=True, text=True, timeout=10)
                .stdout.split("\n")[0]
                .strip()
            )
        except (OSError, subprocess.SubprocessError):
            pass
    b.results["machine"] = {
        "cores": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gb": mem_gb,
        "python": platform.python_version(),
        "pysyncobj": version("pysyncobj"),
        "grpcio": version("grpcio"),
        "protobuf": version("protobuf"),
        "platform": platform.platform(),
        "git_commit": git,
        "etcd": etcd_version,
        "profile": b.profile.name,
        "loadavg_at_start": os.getloadavg(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    b.say(
        f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, pysyncobj {version('pysyncobj')}, git {git[:12]}"
    )


# --------------------------------------------------------------------------- raw raft


def _run_raw_raft(b: Bench, node_journal: bool) -> dict[str, Any] | None:
    """One bare 3-process pysyncobj cluster; the leader's result, or None when it produced none."""
    from cluster.app.local_cluster import free_ports

    p = b.profile
    root = os.path.join(b.root, "raw-raft-" + ("nodes-journal" if node_journal else "file-journal"))
    os.makedirs(root)
    addrs = [f"127.0.0.1:{port}" for port in free_ports(3)]
    password = os.urandom(24).hex()
    ctx = mp.get_context("spawn")
    results, stop = ctx.Queue(), ctx.Event()
    procs = []
    try:
        for i, a in enumerate(addrs):
            peers = [x for x in addrs if x != a]
            journal, dump = os.path.join(root, f"r{i}.journal"), os.path.join(root, f"r{i}.dump")
            args = (a, peers, journal, dump, password, p.raw_warmup_s, p.raw_measure_s, results, stop, node_journal)
            proc = ctx.Process(target=raw_raft_node, args=args, daemon=True, name=f"raw-raft-{i}")
            proc.start()
            procs.append(proc)
        try:
            res: dict[str, Any] = results.get(timeout=60 + p.raw_warmup_s + p.raw_measure_s)
        except queue.Empty:
            return None
        stop.set()
        truncations = 0
        for _ in range(2):
            try:
                truncations += results.get(timeout=10).get("truncations", 0)
            except queue.Empty:
                pass
        res["follower_truncation_warnings"] = truncations
        return res
    finally:
        stop.set()
        for proc in procs:
            proc.join(5)
        for proc in procs:
            if proc.is_alive() and proc.pid:
                os.kill(proc.pid, signal.SIGKILL)
                proc.join(2)


def scenario_raw_raft(b: Bench) -> None:
    p = b.profile
    b.say(f"raw Raft ceiling: 3 pysyncobj processes, build_conf(RaftSettings), 200-byte commands, {p.raw_measure_s:.0f} s")
    res = _run_raw_raft(b, node_journal=True)
    if res is None:
        b.results["raw_raft_commits_per_s"] = None
        b.notes["raw_raft_commits_per_s"] = "the bare pysyncobj cluster elected no leader or produced no result within 60 s"
        return
    b.results["raw_raft_commits_per_s"] = r1(res["commits_per_s"])
    b.extra["raw_raft"] = res
    b.series["raw_raft_per_second"] = res["per_second"]
    b.notes["raw_raft_commits_per_s"] = (
        "async @replicated counter increments with a 200-byte argument and callbacks, at most 20000 in flight, "
        f"proposed on the leader; conf from raft.adapter.build_conf with password, dump file and journal ({res.get('journal')}) "
        f"like our nodes; counted over {p.raw_measure_s:.0f} s after {p.raw_warmup_s:.0f} s warm-up"
    )
    b.say(
        f"  raw Raft: {res['commits_per_s']:.0f} commits/s with {res['journal']} (proposed {res['proposed']}, failed "
        f"{res['failed'] or 0}; pysyncobj 'truncating already-applied log entries' warnings on followers: "
        f"{res['follower_truncation_warnings']})"
    )
    if res.get("journal", "").startswith("pysyncobj"):
        return
    # the same with pysyncobj's own journal: how much the nodes' journal costs
    other = _run_raw_raft(b, node_journal=False)
    if other is not None:
        b.results["raw_raft_commits_per_s_pysyncobj_journal"] = r1(other["commits_per_s"])
        b.extra["raw_raft_pysyncobj_journal"] = other
        b.say(f"  raw Raft: {other['commits_per_s']:.0f} commits/s with {other['journal']} (for comparison)")


# --------------------------------------------------------------------------- etcd


def scenario_etcd(b: Bench) -> None:
    p = b.profile
    binary = shutil.which("etcd")
    if binary is None:
        b.results["etcd_lease_grants_per_s"] = None
        b.notes["etcd_lease_grants_per_s"] = "etcd is not installed: apt-get install etcd-server etcd-client"
        b.say("etcd: not installed (apt-get install etcd-server etcd-client); skipped")
        return
    assert b.pool is not None
    b.say(
        f"etcd: 3 members on loopback, LeaseGrant(TTL 30) via the JSON gateway, {p.procs}x{p.threads} clients, {p.etcd_measure_s:.0f} s"
    )
    etcd = EtcdCluster(os.path.join(b.root, "etcd"), binary)
    try:
        etcd.start()
        etcd.wait_healthy()
        start = time.time() + 1.0
        until = start + 1.0 + p.etcd_measure_s
        tasks = [{"kind": "etcd_grant", "etcd": etcd.endpoints, "until": until} for _ in range(p.procs)]
        res = b.pool.run(tasks, "etcd LeaseGrant", timeout=until - time.time() + 60)
        done = [t for r in res for t in r["done"]]
        lat = [x for r in res for x in r["lat"]]
        w0 = start + 1.0
        rate = st.rate_in_window(done, w0, until)
        b.results["etcd_lease_grants_per_s"] = r1(rate)
        b.extra["etcd"] = {"latency_ms": st.summarize(lat), "errors": merge_errors(res), "granted": len(done)}
        b.notes["etcd_lease_grants_per_s"] = (
            f"{(b.results.get('machine') or {}).get('etcd') or 'etcd'}, 3 members, default settings "
            "(WAL fsync on; our nodes do not fsync their Raft log by default), LeaseGrant over HTTP/1.1 keep-alive to the grpc-gateway, "
            f"{p.procs} processes x {p.threads} threads spread over the members, 1 s warm-up left out"
        )
        b.say(f"  etcd: {rate or 0:.0f} LeaseGrant/s, p50 {st.percentile(lat, 50) or 0:.1f} ms")
    except (RuntimeError, TimeoutError, OSError) as exc:
        b.results["etcd_lease_grants_per_s"] = None
        b.notes["etcd_lease_grants_per_s"] = f"etcd run failed: {exc}"
        b.say(f"  etcd failed: {exc}")
    finally:
        etcd.stop()


# --------------------------------------------------------------------------- raftsched cluster


def start_cluster(b: Bench) -> None:
    from cluster.app.local_cluster import LocalCluster

    root = os.path.join(b.root, "cluster")
    b.cluster = LocalCluster.create(root, 3, b.args.nodes_extra_config)
    b.say(f"raftsched: starting 3 nodes in {root}")
    b.cluster.start_all()
    leader = b.leader(60)
    b.mark("leader", node=leader)
    # wait until the cluster answers writes from every node
    for node in b.cluster.nodes.values():
        with grpc.insecure_channel(node.grpc) as ch:
            stub = pb_grpc.JobServiceStub(ch)
            deadline = time.monotonic() + 30
            while True:
                try:
                    stub.PreviewSchedule(pb.PreviewScheduleRequest(spec=every_spec("probe", 60, "x"), count=1), timeout=2)
                    stub.ListJobs(pb.ListJobsRequest(page_size=1), timeout=5)
                    break
                except grpc.RpcError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
    b.say(f"  leader {leader}; nodes {', '.join(f'{n}={x.grpc} pid {x.pid}' for n, x in b.cluster.nodes.items())}")


def scenario_create(b: Bench) -> None:
    p = b.profile
    assert b.pool is not None
    b.say(
        f"CreateJob throughput: {p.procs} processes x {p.threads} threads over 3 nodes, every-1h jobs, {p.create_measure_s:.0f} s"
    )
    start = time.time() + 0.5
    warm = 1.0
    until = start + warm + p.create_measure_s
    tasks = [{"kind": "create_closed", "addresses": b.addresses(), "until": until} for _ in range(p.procs)]
    cpu0 = b.cpu_snapshot()
    res = b.pool.run(tasks, "CreateJob", timeout=until - time.time() + 60)
    cpu = b.cpu_delta(cpu0, b.cpu_snapshot())
    done = [t for r in res for t in r["done"]]
    lat = [x for r in res for x in r["lat"]]
    rate = st.rate_in_window(done, start + warm, until)
    b.results["create_jobs_per_s"] = r1(rate)
    b.notes["create_jobs_per_s"] = (
        f"closed loop, {p.procs} client processes x {p.threads} threads, thread j of process i on node (i*{p.threads}+j) mod 3, "
        f"CreateJob of an every-1h job with an idempotency key; completions in {p.create_measure_s:.0f} s after a 1 s warm-up"
    )
    b.extra["create"] = {
        "created": len(done),
        "latency_ms": st.summarize(lat),
        "errors": merge_errors(res),
        "clients": f"{p.procs} processes x {p.threads} threads",
        "per_second": st.histogram(done, start, 1.0, until),
        "cpu_s_during_run": cpu,
        "node_cpu_ms_per_create": r1(sum(v or 0.0 for k, v in cpu.items() if k != "clients") * 1000.0 / len(done), 3)
        if done
        else None,
        "cores_busy": r1(sum(v or 0.0 for v in cpu.values()) / (until - start + 0.5), 2),
    }
    b.series["create_per_second"] = b.extra["create"]["per_second"]
    b.say(
        f"  CreateJob: {rate or 0:.0f}/s (p50 {st.percentile(lat, 50) or 0:.1f} ms, p99 {st.percentile(lat, 99) or 0:.1f} ms, errors {merge_errors(res).get('counts', {})})"
    )
    b.say(
        f"  CPU s during the run: {cpu} (~{b.extra['create']['cores_busy']} of {os.cpu_count()} cores busy; {b.extra['create']['node_cpu_ms_per_create']} ms of node CPU per create)"
    )
    _create_batched(b)
    _grpc_noop_baseline(b)


def noop_grpc_server(port: int, ready: Any, stop: Any) -> None:
    """A JobService whose CreateJob does nothing but answer: the cost of the gRPC layer alone."""
    from concurrent import futures

    class Noop(pb_grpc.JobServiceServicer):
        def CreateJob(self, request: pb.CreateJobRequest, context: Any) -> pb.Job:
            return pb.Job(job_id="j-noop", spec=request.spec)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
    pb_grpc.add_JobServiceServicer_to_server(Noop(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    ready.set()
    stop.wait()
    server.stop(0)


def _create_batched(b: Bench) -> None:
    p = b.profile
    assert b.pool is not None
    batch, threads = 100, 2
    b.say(f"CreateJobs throughput: {p.procs} processes x {threads} threads over 3 nodes, {batch} jobs per call")
    start = time.time() + 0.5
    until = start + 1.0 + p.create_measure_s
    tasks = [
        {"kind": "create_batched", "addresses": b.addresses(), "until": until, "batch": batch, "threads": threads}
        for _ in range(p.procs)
    ]
    res = b.pool.run(tasks, "CreateJobs", timeout=until - time.time() + 90)
    done = [t for r in res for t in r["done"]]
    lat = [x for r in res for x in r["lat"]]
    rate = st.rate_in_window(done, start + 1.0, until)
    b.results["create_jobs_batched_per_s"] = r1(rate)
    b.notes["create_jobs_batched_per_s"] = (
        f"closed loop, {p.procs} client processes x {threads} threads, CreateJobs of {batch} every-1h jobs with idempotency keys "
        f"(each item answered on its own); jobs created in {p.create_measure_s:.0f} s after a 1 s warm-up"
    )
    b.extra["create_batched"] = {"created": len(done), "call_latency_ms": st.summarize(lat), "errors": merge_errors(res)}
    b.say(
        f"  CreateJobs: {rate or 0:.0f} jobs/s (call p50 {st.percentile(lat, 50) or 0:.0f} ms, errors {merge_errors(res).get('counts', {})})"
    )


def _grpc_noop_baseline(b: Bench) -> None:
    """The same CreateJob clients against 3 no-op gRPC server processes: the ceiling gRPC alone allows here."""
    from cluster.app.local_cluster import free_ports

    p = b.profile
    assert b.pool is not None
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    servers, addrs = [], []
    try:
        for port in free_ports(3):
            ready = ctx.Event()
            proc = ctx.Process(target=noop_grpc_server, args=(port, ready, stop), daemon=True)
            proc.start()
            servers.append(proc)
            addrs.append(f"127.0.0.1:{port}")
            if not ready.wait(30):
                raise RuntimeError("the no-op gRPC server did not start")
        start = time.time() + 0.5
        until = start + 1.0 + p.create_measure_s
        tasks = [{"kind": "create_closed", "addresses": addrs, "until": until} for _ in range(p.procs)]
        res = b.pool.run(tasks, "no-op CreateJob", timeout=until - time.time() + 60)
        done = [t for r in res for t in r["done"]]
        rate = st.rate_in_window(done, start + 1.0, until)
    except (RuntimeError, TimeoutError, OSError) as exc:
        b.results["grpc_noop_calls_per_s"] = None
        b.notes["grpc_noop_calls_per_s"] = f"baseline failed: {exc}"
        return
    finally:
        stop.set()
        for proc in servers:
            proc.join(5)
            if proc.is_alive() and proc.pid:
                os.kill(proc.pid, signal.SIGKILL)
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


def probe_leases(b: Bench) -> None:
    """AcquireLease once: decides whether the lease scenarios can run."""
    node = next(iter(b.cluster.nodes.values()))
    with grpc.insecure_channel(node.grpc) as ch:
        try:
            pb_grpc.LeaseServiceStub(ch).AcquireLease(
                pb.AcquireLeaseRequest(executor_id="bench-probe", queues=["bench-probe-empty"], max_runs=1), timeout=5
            )
            b.lease_service = True
            b.say("LeaseService: AcquireLease answers; lease scenarios will run")
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:  # type: ignore[attr-defined]
                b.lease_service = False
                b.lease_probe = f"LeaseService not implemented yet (AcquireLease: UNIMPLEMENTED: {exc.details()})"  # type: ignore[attr-defined]
            else:
                b.lease_service = False
                b.lease_probe = f"AcquireLease probe failed: {exc.code().name}: {exc.details()}"  # type: ignore[attr-defined]
            b.say(f"LeaseService: {b.lease_probe}")


def scenario_fire_lag(b: Bench) -> None:
    p = b.profile
    assert b.pool is not None
    n = p.fire_rate  # every-1s jobs: n jobs -> n fires per second
    # Pace the creates so that the clients keep up: the phase of an every-1s job is its creation instant
    # mod 1 s, so creating them evenly over k whole seconds spreads them evenly across the second.
    create_rate = b.results.get("create_jobs_per_s") or 1000.0
    stagger = max(p.fire_stagger_s, math.ceil(n / (0.7 * create_rate)))
    b.say(
        f"fire lag: {n} jobs 'every 1s' created evenly over {stagger} s (staggered across the second), then {p.fire_window_s:.0f} s on a leader watch"
    )
    t_send = time.time() + 1.0
    items = [(i, t_send + i * stagger / n) for i in range(n)]
    tasks = [
        {
            "kind": "create_paced",
            "addresses": b.addresses(),
            "items": part,
            "every_s": 1,
            "queue": "bench-lag",
            "prefix": "lag",
            "give_up_at": b.give_up_at(60),
        }
        for part in split(items, p.procs)
    ]
    res = b.pool.run(tasks, "create every-1s jobs", timeout=120, total=n)
    made = sorted(m for r in res for m in r["made"])
    late = [x for r in res for x in r["late"]]
    b.lag_jobs = made
    spread = st.phase_spread([m[2] for m in made], 1000.0, 10)
    b.extra["fire_lag_setup"] = {
        "jobs": len(made),
        "phase_buckets_100ms": spread["buckets"],
        "phase_peak_ratio": r1(spread["peak_ratio"], 2),
        "creates_sent_late_s": st.summarize(late),
        "errors": merge_errors(res),
    }
    b.say(f"  created {len(made)} jobs; phase spread over the second (per 100 ms): {spread['buckets']}")
    leader = b.leader()
    w = b.watch(leader)
    b.lag_start_ms = now_ms()
    time.sleep(p.fire_warmup_s)
    w0 = now_ms()
    term_before = b.term()
    b.mark("fire_lag_window_start", node=leader)
    end = time.monotonic() + p.fire_window_s
    while time.monotonic() < end:
        time.sleep(min(2.0, max(0.0, end - time.monotonic())))
        k = sum(1 for f in w.fired if f.observed_ms >= w0)
        b.say(f"  fire lag window: {k} fires observed on {leader}")
    w1 = now_ms()
    b.mark("fire_lag_window_end", node=leader)
    leader_after = b.leader()
    # The stream may run behind the node (observed_at is stamped on the node when it applies): wait
    # until an event observed after the window has arrived, so every event of the window is counted.
    drain_deadline = time.monotonic() + 20
    while time.monotonic() < drain_deadline and not (w.fired and w.fired[-1].observed_ms >= w1):
        time.sleep(0.05)
    stream_behind_ms = now_ms() - w1
    in_window = [f for f in list(w.fired) if w0 <= f.observed_ms < w1]
    lags = [f.observed_ms - f.scheduled_ms for f in in_window]
    b.results["fire_lag_ms"] = st.summarize(lags, (50, 99), 1)
    b.results["fire_lag_ms_clamped"] = st.summarize(st.clamp_nonnegative(lags), (50, 99), 1)
    for d in (b.results["fire_lag_ms"], b.results["fire_lag_ms_clamped"]):
        d.pop("min", None)
        d.pop("mean", None)
    b.results["fire_rate"] = r1(st.rate_in_window([f.observed_ms for f in in_window], w0, w1, per=1000.0))
    b.extra["fire_lag_detail"] = {
        "fired_at_minus_scheduled_ms": st.summarize([f.fired_ms - f.scheduled_ms for f in in_window], (50, 99), 1),
        "observed_minus_fired_at_ms": st.summarize([f.observed_ms - f.fired_ms for f in in_window], (50, 99), 1),
        "window_s": (w1 - w0) / 1000.0,
        "watched_node": leader,
        "leader_changed_during_window": leader_after != leader,
        "watch_stream_behind_at_window_end_ms": stream_behind_ms,
        "raft_term_before": term_before,
        "raft_term_after": b.term(),
        "target_fire_rate": n,
    }
    b.notes["fire_lag_ms"] = (
        f"observed_at (apply time on the leader {leader}) - scheduled_time of kind='fired' events in a "
        f"{(w1 - w0) / 1000:.1f} s window; negative = committed early within fire_lookahead_s (0.1 s default)"
    )
    tb, ta = b.extra["fire_lag_detail"]["raft_term_before"], b.extra["fire_lag_detail"]["raft_term_after"]
    if tb is not None and ta is not None and ta != tb:
        b.notes["fire_lag_ms"] += f"; WARNING: the Raft term went from {tb} to {ta} during the window"
    if leader_after != leader:
        b.notes["fire_lag_ms"] += f"; WARNING: the leader changed during the window ({leader} -> {leader_after})"
    fl = b.results["fire_lag_ms"]
    b.say(
        f"  fire lag: p50 {fl['p50']} ms, p99 {fl['p99']} ms, max {fl['max']} ms over {fl['count']} fires; rate {b.results['fire_rate']}/s"
    )


def _first_fire_after(watchers: list[Watcher], nodes: list[str], kill_ms: int) -> float | None:
    """Earliest observed_at, on the given nodes' watches, of a run fired (fired_at) after ``kill_ms``."""
    pairs = [(f.fired_ms, f.observed_ms) for w in watchers if w.node_id in nodes for f in list(w.fired[-20000:])]
    return st.first_after(pairs, kill_ms)


def scenario_failover(b: Bench) -> None:
    p = b.profile
    assert b.pool is not None
    made = b.lag_jobs
    if not made:  # run on its own: make the every-1s jobs here
        t_send = time.time() + 1.0
        items = [(i, t_send + i / p.failover_jobs) for i in range(p.failover_jobs)]
        res = b.pool.run(
            [
                {
                    "kind": "create_paced",
                    "addresses": b.addresses(),
                    "items": part,
                    "every_s": 1,
                    "queue": "bench-lag",
                    "prefix": "fo",
                    "give_up_at": b.give_up_at(60),
                }
                for part in split(items, p.procs)
            ],
            "create every-1s jobs",
            timeout=120,
        )
        made = sorted(m for r in res for m in r["made"])
        b.lag_start_ms = now_ms()
    keep_every = max(1, len(made) // p.failover_jobs)
    keep = [m for k, m in enumerate(made) if k % keep_every == 0][: p.failover_jobs]
    drop = [m[1] for m in made if m not in keep]
    if drop:
        b.say(f"failover: deleting {len(drop)} of the every-1s jobs, keeping {len(keep)} (staggered)")
        res = b.pool.run(
            [
                {"kind": "delete", "addresses": b.addresses(), "job_ids": part, "give_up_at": b.give_up_at(b.delete_budget_s())}
                for part in split(drop, p.procs)
            ],
            "DeleteJob",
            timeout=120,
            total=len(drop),
        )
    b.failover_jobs = [m[1] for m in keep]
    b.say(f"failover: {p.failover_kills} SIGKILL(s) of the leader with {len(keep)} every-1s jobs firing; watches on every node")
    have = {w.node_id for w in b.watchers}
    for nid in b.cluster.nodes:
        if nid not in have:
            b.watch(nid)
    time.sleep(p.failover_settle_s)
    resumes: list[float] = []
    details: list[dict[str, Any]] = []
    for k in range(p.failover_kills):
        old = b.leader()
        survivors = [n for n in b.cluster.nodes if n != old]
        kill_ms = now_ms()
        b.cluster.kill(old)
        b.mark("kill", t_ms=kill_ms, node=old)
        b.say(f"  kill {k + 1}: SIGKILL leader {old}")
        try:
            new = b.cluster.wait_leader(30, among=survivors)
        except TimeoutError as exc:
            b.say(f"  no new leader: {exc}")
            details.append({"killed": old, "error": str(exc)})
            b.cluster.start(old)
            b.mark("restart", node=old)
            continue
        elected_ms = now_ms()
        b.mark("leader", node=new)
        b.cluster.start(old)
        b.mark("restart", node=old)
        resumed_ms = None
        deadline = time.monotonic() + 30

        while time.monotonic() < deadline:
            resumed_ms = _first_fire_after(b.watchers, survivors, kill_ms)
            if resumed_ms is not None:
                time.sleep(1.0)  # let the other survivor's stream deliver too: the earliest observation counts
                resumed_ms = _first_fire_after(b.watchers, survivors, kill_ms)
                break
            time.sleep(0.05)
        if resumed_ms is None:
            b.say("  no fire observed within 30 s after the kill")
            details.append({"killed": old, "new_leader": new, "error": "no fire within 30 s"})
            continue
        b.mark("resumed", t_ms=int(resumed_ms), node=new)
        resume_s = (resumed_ms - kill_ms) / 1000.0
        resumes.append(resume_s)
        details.append(
            {"killed": old, "new_leader": new, "leader_seen_after_s": (elected_ms - kill_ms) / 1000.0, "resume_s": resume_s}
        )
        b.say(
            f"  kill {k + 1}: new leader {new} seen after {(elected_ms - kill_ms) / 1000:.2f} s, next fire committed after {resume_s:.2f} s"
        )
        time.sleep(p.failover_settle_s)
        t_catch = time.monotonic()
        caught_up = b.wait_caught_up(20)
        details[-1]["all_caught_up_after_resume_s"] = (
            round(time.monotonic() - t_catch + p.failover_settle_s, 1) if caught_up else None
        )
        if not caught_up:
            b.say(f"  the restarted {old} has not caught up within 20 s; going on")
    b.results["failover_resume_s"] = {
        "median": r1(st.median(resumes), 3),
        "max": r1(max(resumes) if resumes else None, 3),
        "count": len(resumes),
    }
    b.extra["failover"] = details
    if len(resumes) < p.failover_kills:
        b.notes["failover_resume_s"] = f"only {len(resumes)} of {p.failover_kills} kills were followed by a fire within 30 s"
    else:
        b.notes["failover_resume_s"] = (
            "SIGKILL of the leader -> earliest observed_at, on the surviving nodes' watches, of a kind='fired' event "
            "with fired_at after the kill; the killed node is restarted as soon as the survivors agree on a leader"
        )
    time.sleep(1.0)
    b.lag_end_ms = now_ms()


def _collect_lag_series(b: Bench) -> None:
    """Fire lag of every run seen in the lag/failover phases (earliest observation per run)."""
    start = b.lag_start_ms
    if start is None:
        return
    end = b.lag_end_ms or now_ms()
    # A restarted node re-applies its journal and its watch sees old runs again, long after they
    # fired (fired_at is when the leader proposed the fire, so observed_at - fired_at is seconds
    # instead of milliseconds): such replays are left out. A run is kept with its earliest
    # observation. Events still queued on a node for its watcher when it is SIGKILLed are lost:
    # their runs then only show up as replays, and are missing from the series.
    samples = []
    replays = 0
    for w in b.watchers:
        for f in list(w.fired):
            if not (start <= f.observed_ms <= end and f.fired_ms >= start):
                continue
            if f.observed_ms - f.fired_ms > REPLAY_MS:
                replays += 1
                continue
            samples.append((f.run_id, f.observed_ms, (f.observed_ms - f.scheduled_ms, f.fired_ms - f.scheduled_ms, f.node)))
    best = st.dedupe_earliest(samples)
    b.extra["fire_lag_series"] = {"runs": len(best), "replayed_observations_left_out": replays}
    pts = sorted(best.values())
    b.series["fire_lag"] = {
        "t_ms": [int(t) for t, _ in pts],
        "lag_ms": [int(v[0]) for _, v in pts],
        "fired_at_minus_scheduled_ms": [int(v[1]) for _, v in pts],
        "node": [v[2] for _, v in pts],
        "start_ms": start,
        "end_ms": end,
    }
    b.series["fired_per_second_lag_phase"] = {"origin_ms": start, "counts": st.per_second([t for t, _ in pts], start, end)}


def scenario_burst(b: Bench) -> None:
    p = b.profile
    assert b.pool is not None
    if "fire_lag" not in b.series:
        _collect_lag_series(b)
    b.stop_watchers()
    leftover = b.failover_jobs or [m[1] for m in b.lag_jobs]
    if leftover:
        b.say(f"burst: deleting the {len(leftover)} every-1s jobs first")
        b.pool.run(
            [
                {"kind": "delete", "addresses": b.addresses(), "job_ids": part, "give_up_at": b.give_up_at(b.delete_budget_s())}
                for part in split(leftover, p.procs)
            ],
            "DeleteJob",
            timeout=120,
        )
    n = p.burst_jobs
    rate = b.results.get("create_jobs_batched_per_s") or 2000.0  # the burst is created through CreateJobs
    fire_wait_s = min(120.0, 30.0 + n / 2000.0)  # after the instant, wait this long at most for the fires
    after_burst_s = (2 * p.lease_measure_s + 15.0 if "leases" in b.wanted else 0.0) + 15.0
    # the jobs are created well ahead, as a real burst's would be, and the nodes get ~20 s to settle
    # (apply the creates everywhere, take the snapshot they trigger) before the instant
    lead_s = n / (0.75 * rate) + 20.0
    budget_lead = b.remaining_s() - fire_wait_s - after_burst_s
    if budget_lead < lead_s:
        b.say(
            f"  the time budget leaves {budget_lead:.0f} s to create the burst (it wants {lead_s:.0f} s): creating stops at the instant"
        )
        lead_s = max(15.0, budget_lead)
    at = (now_ms() + int(lead_s * 1000)) // 1000 * 1000 + 1000
    b.say(
        f"burst: creating {n} jobs all due at T = now + {(at - now_ms()) / 1000:.0f} s, then counting them fire (on the {b.args.burst_watch})"
    )
    t_create = time.time()
    res = b.pool.run(
        [
            {
                "kind": "create_at",
                "addresses": b.addresses(),
                "count": part,
                "at_ms": at,
                "queue": BURST_QUEUES[k % len(BURST_QUEUES)],
                "give_up_at": at / 1000.0 - 1.5,  # never create past the instant: those would not be a burst
            }
            for k, part in enumerate(len(x) for x in split(list(range(n)), p.procs))
        ],
        "create burst jobs",
        timeout=lead_s + 60,
        total=n,
    )
    created = sum(len(r["done"]) for r in res)
    create_s = time.time() - t_create
    done_ms = now_ms()
    b.extra["burst_setup"] = {
        "jobs": created,
        "create_s": round(create_s, 2),
        "create_rate": r1(created / create_s),
        "errors": merge_errors(res),
        "at_ms": at,
    }
    b.say(f"  created {created} jobs in {create_s:.1f} s ({created / create_s:.0f}/s); T in {(at - done_ms) / 1000:.1f} s")
    warnings: list[str] = []
    if created < n:
        warnings.append(
            f"WARNING: only {created} of the {n} jobs asked for were created before the instant ({created / create_s:.0f}/s): "
            "the burst is smaller than the target's"
        )
    if done_ms > at:
        warnings.append(
            f"WARNING: creation ended {(done_ms - at) / 1000:.1f} s after the instant; some jobs fired as they were created"
        )
    leader = b.leader()
    watched = leader
    if b.args.burst_watch == "follower":
        watched = next(n for n in b.cluster.nodes if n != leader)
    # the burst's runs stay PENDING until the lease scenario: the burst queues' depth is the fired count
    poller = _StatusPoller(
        b.cluster.nodes[watched].grpc,
        lambda status: sum(status.pending_by_queue.get(q, 0) for q in BURST_QUEUES),
        period=0.05,
        in_ms=True,
    )
    b.mark("burst_instant", node=leader, at_ms=at)
    term_before = b.term()
    cpu0 = b.cpu_snapshot()
    wait_until = at + int(fire_wait_s * 1000)
    last_print = time.monotonic()
    try:
        while now_ms() < wait_until and poller.latest() < created:
            if time.monotonic() - last_print >= 2.0:
                last_print = time.monotonic()
                rel = (now_ms() - at) / 1000.0
                b.say(f"  burst: {poller.latest()}/{created} fired ({'T' + ('+' if rel >= 0 else '') + f'{rel:.1f}'} s)")
            time.sleep(0.05)
    finally:
        poller.stop()
    samples = poller.samples
    before = st.counter_at(samples, at - 1) or 0  # runs of these queues pending before the instant (none expected)
    fired_n = poller.latest() - before
    all_at = st.counter_reached(samples, before + created)
    first_at = st.counter_reached(samples, before + 1)
    half_at = st.counter_reached(samples, before + created / 2)
    if all_at is not None and created > 0:
        b.results["burst_fire_s"] = round((all_at - at) / 1000.0, 3)
    else:
        b.results["burst_fire_s"] = None
        warnings.insert(0, f"only {fired_n} of {created} burst runs were seen fired within {fire_wait_s:.0f} s of the instant")
    if before:
        warnings.append(f"{before} runs of the burst queues were pending before the instant; they are not counted")
    end_ms = (all_at or now_ms()) + 1000
    b.extra["burst"] = {
        "jobs": created,
        "fired_seen": fired_n,
        "first_fire_after_instant_ms": round(first_at - at) if first_at is not None else None,
        "half_fired_after_instant_ms": round(half_at - at) if half_at is not None else None,
        "poll_period_ms": 50,
        "watched_node": watched,
        "watched_role": "follower" if watched != leader else "leader",
        "leader_at_instant": leader,
        "leader_after": b.leader(),
        "raft_term_before": term_before,
        "raft_term_after": b.term(),
        "cpu_s_from_before_instant_until_all_seen": b.cpu_delta(cpu0, b.cpu_snapshot()),
        "per_second_from_instant": st.counter_per_bucket(samples, at, 1000.0, end_ms),
    }
    b.series["burst"] = {"at_ms": at, "samples": [[t - at, n - before] for t, n in samples if t >= at - 1000]}
    tb, ta = b.extra["burst"]["raft_term_before"], b.extra["burst"]["raft_term_after"]
    if tb is not None and ta is not None and ta != tb:
        warnings.append(f"the Raft term went from {tb} to {ta} during the burst (elections)")
        b.say(f"  burst: the Raft term went from {tb} to {ta} (elections) during the burst")
    how = (
        f"{created} 'at' jobs due at one instant, created up to {(at - done_ms) / 1000:.1f} s before it, over {len(BURST_QUEUES)} "
        f"queues; the first time the burst queues' PENDING count on the {'leader' if watched == leader else 'follower'} "
        f"{watched} (ClusterStatus.pending_by_queue, polled every 50 ms) reached the number of jobs, minus the instant"
    )
    b.notes["burst_fire_s"] = "; ".join([*warnings, how])
    first = b.extra["burst"]["first_fire_after_instant_ms"]
    b.say(
        f"  burst: {fired_n}/{created} fired; all fired {b.results['burst_fire_s']} s after the instant (first seen after {first} ms)"
    )


GRANT_BATCH = 50
GRANT_QUEUES = BURST_QUEUES[:2]  # the grant scenario leases these and lets them expire
E2E_QUEUES = BURST_QUEUES[2:]  # the executors run these
E2E_EXECUTORS = 4
E2E_CONCURRENCY = 32


def scenario_leases(b: Bench) -> None:
    """lease_grants_per_s (executors asking in batches) and e2e_runs_per_s (real executor processes)."""
    if b.lease_service is None:
        probe_leases(b)
    if not b.lease_service:
        reason = b.lease_probe or "LeaseService not implemented yet"
        for key in ("lease_grants_per_s", "e2e_runs_per_s", "due_to_leased_ms"):
            b.results[key] = None
            b.notes[key] = reason
        return
    p = b.profile
    assert b.pool is not None
    if b.remaining_s() < 2 * p.lease_measure_s + 15:
        for key in ("lease_grants_per_s", "e2e_runs_per_s", "due_to_leased_ms"):
            b.results[key] = None
            b.notes[key] = f"skipped: the {p.name} run's time budget ({p.budget_s:.0f} s) was used up by the scenarios before"
        b.say("leases: skipped, the time budget is used up")
        return
    start = time.time() + 0.5
    until = start + 1.0 + p.lease_measure_s
    task = {"kind": "lease_acquire", "addresses": b.addresses(), "until": until, "queues": GRANT_QUEUES,
            "complete": False, "max_runs": GRANT_BATCH}  # fmt: skip
    res = b.pool.run([dict(task) for _ in range(p.procs)], "AcquireLease", timeout=until - time.time() + 60)
    times = sorted(t for r in res for t in r["granted"])
    rate = st.rate_in_window(times, start + 1.0, until) if times else None
    if times and times[-1] < until - 0.5 and len(times) > 1:  # the backlog ran dry: rate over the span it lasted
        rate = (len(times) - 1) / max(1e-3, times[-1] - times[0])
    b.results["lease_grants_per_s"] = r1(rate) if rate is not None else None
    b.extra["lease_grants_per_s"] = {
        "latency_ms": st.summarize([x for r in res for x in r["lat"]]),
        "errors": merge_errors(res),
        "count": len(times),
    }
    b.notes["lease_grants_per_s"] = (
        f"leases granted per second to {p.procs}x{p.threads} executors calling AcquireLease with max_runs={GRANT_BATCH} "
        "on half of the burst's PENDING backlog (queues bench-burst-0/1), 1 s warm-up left out, or over the span "
        "the backlog lasted if it ran dry" + ("" if times else "; nothing was granted")
    )
    b.say(f"  lease_grants_per_s: {b.results['lease_grants_per_s']}")
    _e2e_with_executors(b)
    _due_to_leased(b)


DUE_JOBS = 200
DUE_QUEUE = "bench-due"


def _spawn_executors(b: Bench, prefix: str, queues: list[str], concurrency: int) -> list[subprocess.Popen]:
    """E2E_EXECUTORS `raftsched executor` processes on ``queues``, logs beside the cluster's."""
    root = os.path.dirname(b.cluster.config_path)
    procs = []
    for i in range(E2E_EXECUTORS):
        args = [sys.executable, "-m", "cluster.app.main", "executor", "--cluster", ",".join(b.addresses()),
                "--executor-id", f"{prefix}-{i}", "--concurrency", str(concurrency),
                "--output-dir", os.path.join(root, f"{prefix}-{i}-out")]  # fmt: skip
        for q in queues:
            args += ["--queue", q]
        with open(os.path.join(root, f"{prefix}-{i}.log"), "ab") as log:
            procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, start_new_session=True))
    return procs


def _stop_processes(procs: list[subprocess.Popen]) -> None:
    """SIGTERM (graceful), then SIGKILL whatever has not exited after 15 s; by pid, ours only."""
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)


class _Watch:
    """A WatchRuns stream in a thread, handing every event to ``on_event``: on the leader, or on a
    follower (``follower=True``) so that streaming every event does not load the leader it measures."""

    def __init__(self, b: Bench, queue_name: str, kind: str, on_event: Callable[[Any], None], follower: bool = False) -> None:
        leader = b.leader()
        node = next((n for n in b.cluster.nodes if n != leader), leader) if follower else leader
        self._address = b.cluster.nodes[node].grpc
        self._request = pb.WatchRunsRequest(queue=queue_name, kinds=[kind])  # only the events counted
        self._on_event = on_event
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with grpc.insecure_channel(self._address) as ch:
            call = pb_grpc.JobServiceStub(ch).WatchRuns(self._request)
            threading.Thread(target=lambda: (self._stop.wait(), call.cancel()), daemon=True).start()
            try:
                for ev in call:
                    self._on_event(ev)
            except grpc.RpcError:
                pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _due_to_leased(b: Bench) -> None:
    """Idle executors long-polling; every-1s jobs come due: grant time (started_at) minus scheduled time."""
    p = b.profile
    lags: list[float] = []

    def on_event(ev: Any) -> None:
        if ev.kind == "leased" and ev.run.attempt == 1:
            lags.append(float(ts_ms(ev.run.started_at) - ts_ms(ev.run.scheduled_time)))

    watch = _Watch(b, DUE_QUEUE, "leased", on_event)
    procs = _spawn_executors(b, "bench-due", [DUE_QUEUE], 16)
    stub = pb_grpc.JobServiceStub(grpc.insecure_channel(b.cluster.nodes[b.leader()].grpc))
    job_ids: list[str] = []
    try:
        time.sleep(3.0)  # executors up and long-polling
        for i in range(DUE_JOBS):
            spec = pb.JobSpec(name=f"due-{i}", queue=DUE_QUEUE, type="noop")
            spec.every.seconds = 1
            job_ids.append(stub.CreateJob(pb.CreateJobRequest(spec=spec, idempotency_key=uuid.uuid4().hex), timeout=10).job_id)
            time.sleep(1.0 / DUE_JOBS)
        time.sleep(1.0 + p.lease_measure_s)
    finally:
        for job_id in job_ids:
            try:
                stub.PauseJob(pb.PauseJobRequest(job_id=job_id), timeout=10)
            except grpc.RpcError:
                pass
        _stop_processes(procs)
        watch.stop()
    b.results["due_to_leased_ms"] = st.summarize(lags) if lags else None
    b.notes["due_to_leased_ms"] = (
        f"{DUE_JOBS} every-1s jobs (no-op) on an own queue, {E2E_EXECUTORS} idle executors long-polling; "
        "started_at (the grant's commit time) - scheduled_time of first attempts, from the leader's watch; "
        "a run is never leasable before its instant, so this is >= 0" + ("" if lags else "; nothing was leased")
    )
    b.say(f"  due_to_leased_ms: {b.results['due_to_leased_ms']}")


class _StatusPoller:
    """Polls one node's ClusterStatus every ``period`` s and keeps ``(time, pick(status))``.

    GetClusterStatus reads the node's applied state (no Raft round trip) and
    streams nothing, so counting this way costs the cluster next to nothing,
    where watching every event would load the node with a stream.
    """

    def __init__(self, address: str, pick: Callable[[Any], int], period: float = 0.1, in_ms: bool = False) -> None:
        self._address = address
        self._pick = pick
        self._period = period
        self._scale = 1000.0 if in_ms else 1.0
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with grpc.insecure_channel(self._address) as ch:
            stub = pb_grpc.ClusterServiceStub(ch)
            while not self._stop.is_set():
                try:
                    status = stub.GetClusterStatus(pb.GetClusterStatusRequest(), timeout=2)
                    self.samples.append((time.time() * self._scale, self._pick(status)))
                except grpc.RpcError:
                    pass
                self._stop.wait(self._period)

    def latest(self) -> int:
        return self.samples[-1][1] if self.samples else 0

    def grown(self) -> bool:
        return len(self.samples) > 1 and self.samples[-1][1] > self.samples[0][1]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _follower_address(b: Bench) -> str:
    leader = b.leader()
    return b.cluster.nodes[next((n for n in b.cluster.nodes if n != leader), leader)].grpc


def _e2e_with_executors(b: Bench) -> None:
    """Real `raftsched executor` processes (no-op handler) on the rest of the backlog; SUCCEEDED per second."""
    p = b.profile
    counter = _StatusPoller(_follower_address(b), lambda status: status.runs.succeeded)
    time.sleep(0.3)  # a first sample before any executor runs
    procs = _spawn_executors(b, "bench-exec", E2E_QUEUES, E2E_CONCURRENCY)
    start = until = 0.0
    try:
        deadline = time.time() + 20
        while not counter.grown() and time.time() < deadline:
            time.sleep(0.1)
        start = time.time() + 1.0
        until = start + p.lease_measure_s
        time.sleep(max(0.0, until - time.time()) + 0.2)
    finally:
        _stop_processes(procs)
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


def scenario_node_stats(b: Bench) -> None:
    tick = os.sysconf("SC_CLK_TCK")
    rss: dict[str, float | None] = {}
    hwm: dict[str, float | None] = {}
    cpu: dict[str, float | None] = {}
    for nid, node in b.cluster.nodes.items():
        pid = node.pid
        if pid is None or not node.alive():
            rss[nid] = hwm[nid] = cpu[nid] = None
            continue
        try:
            with open(f"/proc/{pid}/status", encoding="utf-8") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss[nid] = round(int(line.split()[1]) / 1024, 1)
                    elif line.startswith("VmHWM:"):
                        hwm[nid] = round(int(line.split()[1]) / 1024, 1)
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu[nid] = round((int(fields[11]) + int(fields[12])) / tick, 2)  # utime, stime (fields 14, 15)
        except OSError:
            rss[nid] = hwm[nid] = cpu[nid] = None
    b.results["node_rss_mb"] = rss
    b.results["node_cpu_s"] = cpu
    b.extra["node_peak_rss_mb"] = hwm
    restarted = sorted({e["node"] for e in b.timeline if e["event"] == "restart"})
    if restarted:
        b.notes["node_cpu_s"] = (
            f"{', '.join(restarted)} restarted during the failover scenario: their figures count from the restart"
        )
    b.say(f"nodes: RSS MB {rss}, CPU s {cpu}")


SCENARIOS: list[tuple[str, Callable[[Bench], None]]] = [
    ("raw_raft", scenario_raw_raft),
    ("etcd", scenario_etcd),
    ("create", scenario_create),
    ("fire_lag", scenario_fire_lag),
    ("failover", scenario_failover),
    ("burst", scenario_burst),
    ("leases", scenario_leases),
]
CLUSTER_SCENARIOS = {"create", "fire_lag", "failover", "burst", "leases"}


# =========================================================================== report


def lookup(results: dict[str, Any], dotted: str) -> Any:
    cur: Any = results
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def verdicts(results: dict[str, Any]) -> dict[str, str]:
    return {k: st.verdict(lookup(results, k), target, higher) for k, (target, higher, _) in TARGETS.items()}


def fmt(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 100 else f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"
    if isinstance(v, dict):
        return ", ".join(f"{k} {fmt(x)}" for k, x in v.items() if k not in ("count",))
    return str(v)


def table(results: dict[str, Any], notes: dict[str, str]) -> str:
    v = verdicts(results)
    rows: list[tuple[str, str, str, str]] = []

    def target_of(key: str) -> tuple[str, str]:
        for tk, (target, higher, _) in TARGETS.items():
            if tk == key or tk.startswith(key + "."):
                return (f"{'>=' if higher else '<='} {target:g}" + (f" ({tk.split('.', 1)[1]})" if "." in tk else ""), v[tk])
        return ("", "")

    for key in (
        "raw_raft_commits_per_s",
        "raw_raft_commits_per_s_pysyncobj_journal",
        "create_jobs_per_s",
        "create_jobs_batched_per_s",
        "grpc_noop_calls_per_s",
        "fire_rate",
        "fire_lag_ms",
        "fire_lag_ms_clamped",
        "burst_fire_s",
        "failover_resume_s",
        "lease_grants_per_s",
        "e2e_runs_per_s",
        "due_to_leased_ms",
        "etcd_lease_grants_per_s",
        "node_rss_mb",
        "node_cpu_s",
    ):
        val = results.get(key)
        t, verdict = target_of(key)
        shown = fmt(val)
        if val is None and key in notes:
            shown = "null (" + notes[key][:60] + ")"
        rows.append((key, shown, t, verdict))
    w0 = max(len(r[0]) for r in rows)
    w1 = min(70, max(len(r[1]) for r in rows))
    w2 = max(len(r[2]) for r in rows)
    lines = [f"{'metric':<{w0}}  {'value':<{w1}}  {'target':<{w2}}  verdict", "-" * (w0 + w1 + w2 + 15)]
    for k, val, t, verdict in rows:
        lines.append(f"{k:<{w0}}  {val:<{w1}}  {t:<{w2}}  {verdict}")
    flagged = [k for k, _, _, verdict in rows if verdict == "fail" or results.get(k) is None or "WARNING" in notes.get(k, "")]
    if "machine" in notes:
        flagged.append("machine")
    if flagged:
        lines.append("")
        lines += [f"note {k}: {notes[k]}" for k in flagged if k in notes]
    return "\n".join(lines)


def write_outputs(b: Bench) -> None:
    os.makedirs(b.out_dir, exist_ok=True)
    for key in RESULT_KEYS:
        b.results.setdefault(key, None)
        if b.results[key] is None and key not in b.notes:
            b.notes[key] = "not measured in this run (scenario skipped or failed; see the log above)"
    doc = dict(b.results)
    doc["targets"] = {k: {"target": t, "better": "higher" if h else "lower", "what": what} for k, (t, h, what) in TARGETS.items()}
    doc["verdicts"] = verdicts(b.results)
    doc["notes"] = b.notes
    doc["details"] = b.extra
    doc["timeline"] = b.timeline
    doc["duration_s"] = round(time.monotonic() - b.t0, 1)
    with open(os.path.join(b.out_dir, "bench.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, sort_keys=False, default=str)
        f.write("\n")
    with open(os.path.join(b.out_dir, "series.json"), "w", encoding="utf-8") as f:
        json.dump({"series": b.series, "timeline": b.timeline}, f)
    try:
        import bench_plot

        made = bench_plot.plot_all(b.series, b.timeline, b.out_dir)
        if made:
            b.say(f"plots: {', '.join(made)}")
    except Exception as exc:  # noqa: BLE001 - plots are a convenience; the numbers are written already
        b.say(f"plots failed: {exc!r}")


# =========================================================================== main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller and shorter: under 4 minutes")
    ap.add_argument("--out", default="bench-out", help="where bench.json, series.json and the plots go (default bench-out/)")
    ap.add_argument("--scenarios", default="all", help=f"comma-separated subset of: {', '.join(n for n, _ in SCENARIOS)}")
    ap.add_argument(
        "--nodes-extra-config",
        default="",
        help="TOML appended to the nodes' cluster.toml (e.g. a [scheduler] table); @FILE reads a file",
    )
    ap.add_argument(
        "--burst-watch",
        choices=("leader", "follower"),
        default="follower",
        help="whose pending count the burst is measured on (default a follower: its apply is never earlier than the commit)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (node logs, data) instead of removing it")
    ap.add_argument("--procs", type=int, default=None, help="client processes (default 4)")
    ap.add_argument("--threads", type=int, default=None, help="threads per client process (default 16)")
    ap.add_argument("--fire-rate", type=int, default=None, help="every-1s jobs for the fire-lag scenario (default 2000)")
    ap.add_argument("--burst-jobs", type=int, default=None, help="jobs in the burst (default 100000, 20000 with --quick)")
    args = ap.parse_args(argv)
    if args.nodes_extra_config.startswith("@"):
        with open(args.nodes_extra_config[1:], encoding="utf-8") as f:
            args.nodes_extra_config = f.read()
    if args.nodes_extra_config and not args.nodes_extra_config.startswith("\n"):
        args.nodes_extra_config = "\n" + args.nodes_extra_config
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    profile = QUICK if args.quick else FULL
    overrides = {
        k: v
        for k, v in (
            ("fire_rate", args.fire_rate),
            ("burst_jobs", args.burst_jobs),
            ("procs", args.procs),
            ("threads", args.threads),
        )
        if v is not None
    }
    if overrides:
        profile = Profile(**{**profile.__dict__, **overrides})
    wanted = [n for n, _ in SCENARIOS] if args.scenarios == "all" else [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = set(wanted) - {n for n, _ in SCENARIOS}
    if unknown:
        print(f"unknown scenario(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2

    def on_sigterm(*_: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, on_sigterm)  # same clean-up as Ctrl-C: every started process is stopped
    root = tempfile.mkdtemp(prefix="raftsched-bench-", dir="/tmp")
    b = Bench(args, profile, root, os.path.abspath(args.out), wanted=wanted)
    b.say(f"raftsched bench ({profile.name}); temp dir {root}; output {b.out_dir}")
    failed: list[str] = []
    try:
        scenario_machine(b)
        b.monitor = LoadMonitor().start()
        for name, fn in SCENARIOS:
            if name not in wanted or name in CLUSTER_SCENARIOS:
                continue
            if name != "raw_raft" and b.pool is None:  # after the raw Raft run: their start-up would steal its CPU
                b.pool = WorkerPool(profile.procs, profile.threads, b.say)
            try:
                b.run_scenario(name, fn)
            except Exception as exc:  # noqa: BLE001 - one scenario failing must not lose the others
                failed.append(name)
                b.say(f"scenario {name} failed: {exc!r}\n{traceback.format_exc()}")
        if CLUSTER_SCENARIOS & set(wanted):
            if b.pool is None:
                b.pool = WorkerPool(profile.procs, profile.threads, b.say)
            start_cluster(b)
            probe_leases(b)
            for name, fn in SCENARIOS:
                if name not in wanted or name not in CLUSTER_SCENARIOS:
                    continue
                try:
                    b.run_scenario(name, fn)
                except Exception as exc:  # noqa: BLE001
                    failed.append(name)
                    b.say(f"scenario {name} failed: {exc!r}\n{traceback.format_exc()}")
            scenario_node_stats(b)
    except KeyboardInterrupt:
        b.say("interrupted: stopping everything")
        failed.append("interrupted")
    finally:
        if "fire_lag" not in b.series:
            _collect_lag_series(b)
        b.stop_watchers()
        if b.pool is not None:
            b.pool.close()
        if b.cluster is not None:
            b.cluster.stop_all()
    if failed:
        b.notes["failed_scenarios"] = ", ".join(failed)
    if b.monitor is not None:
        b.monitor.stop()
        _, foreign, busy = b.monitor.snapshot()
        wall = time.monotonic() - b.t0
        load = {
            "foreign_cpu_s": round(foreign, 1),
            "busy_cpu_s": round(busy, 1),
            "foreign_cores_avg": round(foreign / wall, 2),
            "loadavg_at_end": os.getloadavg(),
        }
        if isinstance(b.results.get("machine"), dict):
            b.results["machine"]["other_load"] = load
        if foreign / wall > 0.2:
            b.notes["machine"] = (
                f"WARNING: processes outside this benchmark used {foreign / wall:.2f} cores on average during the run "
                "(see details.scenario_load): the numbers are lower than on an idle machine"
            )
    write_outputs(b)
    print()
    print(table(b.results, b.notes))
    print()
    b.say(f"wrote {os.path.join(b.out_dir, 'bench.json')}; total {time.monotonic() - b.t0:.0f} s")
    if args.keep or failed:
        b.say(f"kept {root} (node logs: {root}/cluster/n*.log)")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
