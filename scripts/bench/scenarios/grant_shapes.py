"""Scenario ``grant_shapes``: what priorities and concurrency keys cost a grant, on the shared cluster.

Two backlogs of ``burst_jobs`` one-off jobs each, all due at one instant and
created side by side (half the client processes each): *plain* (priority 0,
no key) on ``PLAIN_QUEUES`` and *shaped* (a priority 0-9 and one of 1,000
concurrency keys each, whose limit no grant reaches, so every grant pays the
checks and none is held back) on ``SHAPED_QUEUES``. Once both have fired,
executors ask for leases 50 at a time, as ``lease_grants_per_s`` does, in
eight windows in the order plain, shaped, shaped, plain, shaped, plain,
plain, shaped: a drift of the machine over the run (a state that grows,
followers that fall behind) falls on both alike, and one window slowed by
something else (a snapshot, a collection) moves each mean by an eighth.
A window is a count of grants (90 % of a backlog over its four windows, so
neither runs dry), its rate the one between its first and last 5 %; its
leases are then completed (timed apart) and the next window starts once
every node has applied them, so no window carries another's work. Each
window records every node's CPU seconds and the megabytes the disk under the
cluster's files wrote (``/proc/diskstats``), for its grants and for its
completions. (A process's own ``write_bytes`` is no measure of that here: the
kernel counts a whole page-cache folio each time a write dirties part of one,
and read ten times what reached the disk in one completion window.) ``lease_grants_plain_per_s`` and ``lease_grants_shaped_per_s``
are each the mean of their windows; ``lease_grants_shaped_ratio`` is shaped
over plain (the target: at least 0.85, i.e. within 15 %). Skipped with a note
on a version without priorities (a job's priority does not come back).
"""

from __future__ import annotations

import time
from typing import Any

import grpc

from bench import stats as st
from bench.harness.common import at_spec, now_ms, r1, split
from bench.harness.context import Bench
from bench.harness.pool import merge_errors
from bench.harness.watch import StatusPoller
from bench.scenarios.leases import GRANT_BATCH, probe_leases
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc

PLAIN_QUEUES = ["bench-grant-plain-0", "bench-grant-plain-1"]
SHAPED_QUEUES = ["bench-grant-shaped-0", "bench-grant-shaped-1"]
KEYS = ("lease_grants_plain_per_s", "lease_grants_shaped_per_s", "lease_grants_shaped_ratio")
#: the windows' order: each kind as early as the other on average, and as early in each half (ABBA BAAB)
ORDER = ("plain", "shaped", "shaped", "plain", "shaped", "plain", "plain", "shaped")
WINDOWS = len(ORDER)
TARGET_RATIO = 0.85
#: the backlogs' lease TTL: no lease expires while its window's other grants and completions go on (a window
#: takes about 40 s)
LEASE_TTL_S = 600
#: the share of a window's grants left out at each end of its rate (warm-up, stragglers)
TRIM = 0.05


def _skip(b: Bench, reason: str) -> None:
    for key in KEYS:
        b.results[key] = None
        b.notes[key] = reason
    b.say(f"grant_shapes: skipped: {reason}")


def _shapes_kept(b: Bench) -> str:
    """Why this cluster cannot take priorities and concurrency keys ("" when it can): an older version drops
    the unknown fields, a cluster still on an older command format refuses them."""
    spec = at_spec("bench-shape-probe", now_ms() + 3_600_000, "bench-shape-probe")
    spec.priority, spec.concurrency_key, spec.concurrency_limit = 3, "k-probe", 1
    with grpc.insecure_channel(next(iter(b.nodes.values())).grpc) as ch:
        stub = pb_grpc.JobServiceStub(ch)
        deadline = time.monotonic() + 60.0  # a new cluster switches to the newest command format within seconds
        while True:
            try:
                job = stub.CreateJob(pb.CreateJobRequest(spec=spec), timeout=10)
                break
            except grpc.RpcError as exc:
                code = exc.code()
                if code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNAVAILABLE) and time.monotonic() < deadline:
                    time.sleep(1.0)
                    continue
                return f"a job with a priority and a concurrency key is refused: {code.name}: {exc.details()}"
        stub.DeleteJob(pb.DeleteJobRequest(job_id=job.job_id), timeout=10)
    return "" if job.spec.priority == 3 else "this version keeps no priority or concurrency key"


def _create(b: Bench, n: int) -> tuple[int, int]:
    """Both backlogs, due at one instant: (jobs created, the instant in ms)."""
    assert b.pool is not None
    procs = b.profile.procs
    rate = b.results.get("create_jobs_batched_per_s") or 2000.0
    lead_s = 2 * n / (0.75 * rate) + 10.0
    at = (now_ms() + int(lead_s * 1000)) // 1000 * 1000 + 1000
    give_up = at / 1000.0 - 1.0
    half = max(1, procs // 2)
    tasks = []
    for shaped, queues in ((False, PLAIN_QUEUES), (True, SHAPED_QUEUES)):
        for k, count in enumerate(len(part) for part in split(list(range(n)), half)):
            tasks.append({"kind": "create_at", "addresses": b.addresses(), "count": count, "at_ms": at,
                          "queue": queues[k % len(queues)], "give_up_at": give_up, "shaped": shaped,
                          "name": "bench-shaped" if shaped else "bench-plain", "lease_ttl_s": LEASE_TTL_S})  # fmt: skip
    b.say(f"grant_shapes: creating {n} plain and {n} shaped one-off jobs, all due in {(at - now_ms()) / 1000:.0f} s")
    res = b.pool.run(tasks, "create the grant backlogs", timeout=lead_s + 60, total=2 * n)
    b.extra["grant_shapes_setup"] = {"jobs": sum(len(r["done"]) for r in res), "errors": merge_errors(res), "at_ms": at}
    return sum(len(r["done"]) for r in res), at


def _wait_fired(b: Bench, created: int, at: int) -> bool:
    poller = StatusPoller(
        b.follower_address(),
        lambda status: sum(status.pending_by_queue.get(q, 0) for q in PLAIN_QUEUES + SHAPED_QUEUES),
        period=0.2,
    )
    try:
        deadline = at / 1000.0 + 30.0 + created / 2000.0
        while time.time() < deadline and poller.latest() < created:
            time.sleep(0.2)
        return poller.latest() >= created
    finally:
        poller.stop()


def grant_rate(times: list[float]) -> float | None:
    """Grants per second between the first and the last ``TRIM`` of the grant instants ``times`` (sorted):
    the warm-up and the last stragglers left out."""
    if len(times) < 20:
        return None
    lo, hi = int(len(times) * TRIM), len(times) - 1 - int(len(times) * TRIM)
    span = times[hi] - times[lo]
    return (hi - lo) / span if span > 0 else None


def _window(b: Bench, queues: list[str], count: int) -> tuple[float | None, dict[str, Any]]:
    """One window: ``count`` grants on ``queues`` (timed, with every node's CPU seconds), then their
    completions (timed apart), then a wait until every node has applied them."""
    assert b.pool is not None
    p = b.profile
    each = max(1, count // (p.procs * p.threads) // GRANT_BATCH) * GRANT_BATCH  # whole batches: no thread overshoots
    until = time.time() + 120.0  # a safeguard: a window ends when its grants are done
    task = {"kind": "lease_acquire", "addresses": b.addresses(), "until": until, "queues": queues,
            "max_runs": GRANT_BATCH, "count_each": each, "hand_back": True}  # fmt: skip
    cpu0, mb0, sys0 = b.cpu_snapshot(), b.written_snapshot(), b.sys_snapshot()
    res = b.pool.run([dict(task) for _ in range(p.procs)], "AcquireLease", timeout=until - time.time() + 60)
    cpu1, mb1, sys1 = b.cpu_snapshot(), b.written_snapshot(), b.sys_snapshot()
    held = [h for r in res for h in r["held"]]
    t0 = time.time()
    done = b.pool.run([{"kind": "lease_complete", "addresses": b.addresses(), "held": part}
                       for part in split(held, p.procs)], "CompleteRuns", timeout=300)  # fmt: skip
    complete_s = time.time() - t0
    caught_up = b.wait_caught_up(timeout=120.0, slack=0)
    cpu2, mb2, sys2 = b.cpu_snapshot(), b.written_snapshot(), b.sys_snapshot()
    times = sorted(t for r in res for t in r["granted"])
    return grant_rate(times), {
        "count": len(times),
        "completed": sum(sum(r["count"]) for r in done),
        "complete_s": round(complete_s, 2),
        "caught_up": caught_up,
        "cpu_s": b.cpu_delta(cpu0, cpu1),
        "complete_cpu_s": b.cpu_delta(cpu1, cpu2),
        "sys_s": b.cpu_delta(sys0, sys1),
        "complete_sys_s": b.cpu_delta(sys1, sys2),
        "disk_written_mb": b.cpu_delta(mb0, mb1)["disk"],
        "complete_disk_written_mb": b.cpu_delta(mb1, mb2)["disk"],
        "latency_ms": st.summarize([x for r in res for x in r["lat"]]),
        "errors": merge_errors(res + done),
    }


def scenario_grant_shapes(b: Bench) -> None:
    """lease_grants_shaped_ratio: grants per second on a shaped backlog over a plain one, alternated."""
    if b.lease_service is None:
        probe_leases(b)
    if not b.lease_service:
        _skip(b, b.lease_probe or "LeaseService not implemented yet")
        return
    refused = _shapes_kept(b)
    if refused:
        _skip(b, refused)
        return
    p = b.profile
    n = p.burst_jobs
    if b.remaining_s() < 2 * n / 2000.0 + 2 * n / 500.0 + 60.0:
        _skip(b, f"the {p.name} run's time budget ({p.budget_s:.0f} s) was used up by the scenarios before")
        return
    created, at = _create(b, n)
    if not _wait_fired(b, created, at):
        _skip(b, f"the {created} jobs of the two backlogs were not all seen PENDING in time")
        return
    per_window = int(0.9 * n / (WINDOWS // 2))  # each kind's backlog outlasts its windows
    rates: dict[str, list[float]] = {"plain": [], "shaped": []}
    windows = []
    for w in range(WINDOWS):
        kind = ORDER[w]
        rate, detail = _window(b, PLAIN_QUEUES if kind == "plain" else SHAPED_QUEUES, per_window)
        windows.append({"kind": kind, "rate": r1(rate), **detail})
        if rate is not None:
            rates[kind].append(rate)
        b.say(f"  grant_shapes window {w + 1}/{WINDOWS} ({kind}): {r1(rate)} leases/s, {detail['count']} granted, "
              f"completed in {detail['complete_s']} s")  # fmt: skip
    b.extra["grant_shapes"] = {"backlog_each": n, "windows": windows, "leader": b.leader()}
    plain = sum(rates["plain"]) / len(rates["plain"]) if len(rates["plain"]) == WINDOWS // 2 else None
    shaped = sum(rates["shaped"]) / len(rates["shaped"]) if len(rates["shaped"]) == WINDOWS // 2 else None
    b.results["lease_grants_plain_per_s"] = r1(plain)
    b.results["lease_grants_shaped_per_s"] = r1(shaped)
    b.results["lease_grants_shaped_ratio"] = round(shaped / plain, 3) if plain and shaped is not None else None
    how = (
        f"{p.procs}x{p.threads} executors asking for 50 leases at a time; {WINDOWS} windows of {per_window} grants "
        f"each (the rate between the first and the last {TRIM:.0%} of them) in the order {', '.join(ORDER)}, each "
        "window's leases completed and applied on every node before the next window starts; on a backlog of "
        f"{n} plain runs and one of {n} runs over priorities 0-9 and 1,000 concurrency keys, both PENDING at once"
    )
    for key in KEYS:
        b.notes[key] = how
    b.notes["lease_grants_shaped_ratio"] = f"shaped over plain grants per second (target >= {TARGET_RATIO}); " + how
    b.say(f"  grant_shapes: plain {r1(plain)}/s, shaped {r1(shaped)}/s, ratio {b.results['lease_grants_shaped_ratio']}")
