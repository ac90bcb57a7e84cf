"""Task kinds that create and delete jobs: closed loops (throughput), paced creates (fire lag), a burst.

Each function runs in a client process with a ``Ctx`` and returns plain lists
(completion times, latencies, created ids) for the parent to merge.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from functools import partial
from typing import Any

import grpc

from bench.harness.common import at_spec, every_spec, ts_ms
from bench.tasks.context import Ctx, call_retrying, closed_loop, merge_parts, run_threads, thread_errors
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb

#: jobs per CreateJobs call of the burst
BURST_BATCH = 100
#: the concurrency keys a shaped burst's jobs are spread over
SHAPE_KEYS = 1000


def create_closed(ctx: Ctx) -> dict[str, Any]:
    """Closed loop: every thread creates every-1h jobs until ``until`` (wall time)."""
    timeout = ctx.task.get("timeout", 10.0)
    spec = every_spec("bench-create", 3600, "bench-create")

    def send(stub: Any, req: Any) -> int:
        stub.CreateJob(req, timeout=timeout)
        return 1

    return closed_loop(ctx, ctx.threads, lambda: pb.CreateJobRequest(spec=spec, idempotency_key=f"bc-{uuid.uuid4().hex}"), send)


def create_batched(ctx: Ctx) -> dict[str, Any]:
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

    return closed_loop(ctx, min(ctx.threads, int(ctx.task.get("threads", ctx.threads))), build, send)


def create_paced(ctx: Ctx) -> dict[str, Any]:
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
            job = call_retrying(partial(stub.CreateJob, req, timeout=10.0), ctx.errors, give_up)
            if job is not None:
                made.append((i, job.job_id, ts_ms(job.created_at)))
                ctx.progress.add()
        return {"made": made, "late": late}

    return merge_parts(run_threads(ctx.threads, run), ("made", "late"))


def _shaped(spec: Any, shapes: random.Random) -> Any:
    out = pb.JobSpec()
    out.CopyFrom(spec)
    out.priority = shapes.randrange(10)
    out.concurrency_key = f"k{shapes.randrange(SHAPE_KEYS)}"
    out.concurrency_limit = 1_000_000
    return out


def _create_batch(
    ctx: Ctx, stub: Any, spec: Any, n: int, give_up: float, done: list[float], shapes: random.Random | None = None
) -> None:
    """Create ``n`` jobs of ``spec`` (each shaped by ``shapes``, if given) through CreateJobs, retrying the items
    answered UNAVAILABLE with their idempotency keys (a retried call cannot create a job twice), until ``give_up``."""
    keys = [f"bb-{uuid.uuid4().hex}" for _ in range(n)]
    specs = {k: spec if shapes is None else _shaped(spec, shapes) for k in keys}
    while keys and time.time() < give_up:
        req = pb.CreateJobsRequest(jobs=[pb.CreateJobRequest(spec=specs[k], idempotency_key=k) for k in keys])
        resp = call_retrying(partial(stub.CreateJobs, req, timeout=30.0), ctx.errors, give_up)
        if resp is None:
            return
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


def create_at(ctx: Ctx) -> dict[str, Any]:
    """Create ``count`` one-shot jobs all due at ``at_ms`` through CreateJobs (100 per call, 2 threads), until ``give_up_at``;
    with ``shaped``, each of a random priority 0-9 and one of ``SHAPE_KEYS`` concurrency keys, whose limit no
    grant reaches; with ``lease_ttl_s``, that lease TTL."""
    count, at, queue_name = ctx.task["count"], ctx.task["at_ms"], ctx.task["queue"]
    give_up = ctx.task["give_up_at"]
    lock = threading.Lock()
    left = [count]

    def take() -> int:
        with lock:
            n = min(BURST_BATCH, left[0])
            left[0] -= n
            return n

    def run(j: int) -> dict[str, Any]:
        stub = ctx.jobs[ctx.node_of(j)]
        done: list[float] = []
        spec = at_spec(ctx.task.get("name", "bench-burst"), at, queue_name)
        if ctx.task.get("lease_ttl_s"):
            spec.lease_ttl.seconds = int(ctx.task["lease_ttl_s"])
        shapes = random.Random(f"{ctx.index}-{j}") if ctx.task.get("shaped") else None
        while time.time() < give_up and (n := take()) > 0:
            _create_batch(ctx, stub, spec, n, give_up, done, shapes)
        return {"done": done}

    return merge_parts(run_threads(min(ctx.threads, 2), run), ("done",))


def delete(ctx: Ctx) -> dict[str, Any]:
    """DeleteJob of every id in ``job_ids`` (retrying UNAVAILABLE) until ``give_up_at``."""
    ids: list[str] = ctx.task["job_ids"]
    give_up = ctx.task["give_up_at"]

    def run(j: int) -> dict[str, Any]:
        stub = ctx.jobs[ctx.node_of(j)]
        n = 0
        for job_id in ids[j :: ctx.threads]:
            if time.time() >= give_up:
                break
            req = pb.DeleteJobRequest(job_id=job_id)
            if call_retrying(partial(stub.DeleteJob, req, timeout=10.0), ctx.errors, give_up) is not None:
                n += 1
                ctx.progress.add()
        return {"deleted": n}

    parts = run_threads(ctx.threads, run)
    return {"deleted": sum(p.get("deleted", 0) for p in parts if isinstance(p, dict)), **thread_errors(parts)}
