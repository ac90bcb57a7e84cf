"""Task kind ``lease_acquire``: executors asking for leases in a closed loop on a backlog of runs.

Only run after the parent's AcquireLease probe succeeded. Every lease granted
is completed before the task returns (untimed unless ``complete`` is set),
so no lease expires in the middle of a later scenario.
"""

from __future__ import annotations

import time
from typing import Any

import grpc

from bench.tasks.context import Ctx, merge_parts, run_threads
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb

#: leases completed per CompleteRuns call after the measurement (a batch of 1000 could miss the node's
#: proposal timeout on a loaded machine: its leases then all expired in the middle of the e2e scenario)
COMPLETE_BATCH = 200
#: tries of one CompleteRuns batch that got UNAVAILABLE (did not commit in time) before its leases are left to expire
COMPLETE_TRIES = 5


def _complete_each(ctx: Ctx, stub: Any, leases: Any, completed: list[float], executor: str) -> None:
    for lease in leases:
        req = pb.CompleteRunRequest(
            lease_id=lease.lease_id, fencing_token=lease.fencing_token, outcome=pb.OUTCOME_SUCCEEDED, executor_id=executor
        )
        try:
            stub.CompleteRun(req, timeout=10.0)
            completed.append(time.time())
        except grpc.RpcError as exc:
            ctx.errors.add(exc)


def _complete_held(ctx: Ctx, stub: Any, held: list[tuple[str, int]], executor: str) -> None:
    """Complete what was granted (untimed): otherwise these leases would all expire a TTL later."""
    for k in range(0, len(held), COMPLETE_BATCH):
        reqs = [
            pb.CompleteRunRequest(lease_id=i, fencing_token=t, outcome=pb.OUTCOME_SUCCEEDED, executor_id=executor)
            for i, t in held[k : k + COMPLETE_BATCH]
        ]
        for attempt in range(COMPLETE_TRIES):
            try:
                stub.CompleteRuns(pb.CompleteRunsRequest(runs=reqs), timeout=60.0)
                break
            except grpc.RpcError as exc:  # a retried completion that had committed is refused per item, not here
                if exc.code() != grpc.StatusCode.UNAVAILABLE or attempt == COMPLETE_TRIES - 1:  # type: ignore[attr-defined]
                    ctx.errors.add(exc)
                    break
                time.sleep(0.2 * (attempt + 1))


def lease_acquire(ctx: Ctx) -> dict[str, Any]:
    """Closed loop of AcquireLease (``max_runs`` per call, 1 s long poll) until ``until`` or, with
    ``count_each``, until each thread holds that many; with ``complete`` every lease is completed at once
    (timed), with ``hand_back`` the leases are returned (``held``: lease id, fencing token, executor) for a
    ``lease_complete`` task, else all of them are completed after the loop."""
    until, queues, complete = ctx.task["until"], ctx.task["queues"], ctx.task.get("complete", False)
    batch = int(ctx.task.get("max_runs", 1))
    count_each = int(ctx.task.get("count_each", 0))
    hand_back = bool(ctx.task.get("hand_back", False))

    def run(j: int) -> dict[str, Any]:
        lease_stub = ctx.leases[ctx.node_of(j)]
        executor = f"bench-{ctx.index}-{j}"
        granted: list[float] = []
        completed: list[float] = []
        lat: list[float] = []
        held: list[tuple[str, int]] = []
        while time.time() < until and not (count_each and len(granted) >= count_each):
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
            if complete:
                _complete_each(ctx, lease_stub, resp.leases, completed, executor)
            else:
                held += [(lease.lease_id, lease.fencing_token) for lease in resp.leases]
        if hand_back:
            return {"granted": granted, "completed": completed, "lat": lat, "held": [(i, t, executor) for i, t in held]}
        _complete_held(ctx, lease_stub, held, executor)
        return {"granted": granted, "completed": completed, "lat": lat}

    return merge_parts(run_threads(ctx.threads, run), ("granted", "completed", "lat", "held"))


def lease_complete(ctx: Ctx) -> dict[str, Any]:
    """Complete the leases in ``held`` (lease id, fencing token, executor), split over the threads,
    ``COMPLETE_BATCH`` per CompleteRuns call; ``done`` is when each thread finished."""
    held: list[tuple[str, int, str]] = [tuple(h) for h in ctx.task["held"]]

    def run(j: int) -> dict[str, Any]:
        stub = ctx.leases[ctx.node_of(j)]
        mine = held[j :: ctx.threads]
        by_executor: dict[str, list[tuple[str, int]]] = {}
        for lease_id, token, executor in mine:
            by_executor.setdefault(executor, []).append((lease_id, token))
        for executor, leases in by_executor.items():
            _complete_held(ctx, stub, leases, executor)
        return {"done": [time.time()], "count": [len(mine)]}

    return merge_parts(run_threads(ctx.threads, run), ("done", "count"))
