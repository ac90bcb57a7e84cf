"""Scenario ``burst``: ``burst_jobs`` one-shot jobs all due at one instant -> seconds until all fired.

The jobs are created ahead through CreateJobs (the nodes get ~20 s to settle
before the instant), spread over ``BURST_QUEUES``; a follower's
ClusterStatus is polled every 50 ms and ``burst_fire_s`` is when the burst
queues' PENDING count reached the number created, minus the instant. The
runs stay PENDING: they are the lease scenario's backlog.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bench import stats as st
from bench.harness.common import now_ms, r1, split
from bench.harness.context import Bench
from bench.harness.pool import merge_errors
from bench.harness.watch import StatusPoller
from bench.scenarios.fire_lag import collect_lag_series

#: the burst's jobs are spread over these queues (the lease scenario leases them)
BURST_QUEUES = ["bench-burst-0", "bench-burst-1", "bench-burst-2", "bench-burst-3"]
POLL_MS = 50


@dataclass
class Burst:
    """One burst: its instant, what was created, and what went wrong (notes for bench.json)."""

    at: int
    asked: int
    lead_s: float
    fire_wait_s: float
    created: int = 0
    create_s: float = 0.0
    done_ms: int = 0
    warnings: list[str] = field(default_factory=list)


def _delete_leftover(b: Bench) -> None:
    """The every-1s jobs of the fire-lag and failover scenarios go first: the burst fires alone."""
    if "fire_lag" not in b.series:
        collect_lag_series(b)
    b.stop_watchers()
    leftover = b.failover_jobs or [m[1] for m in b.lag_jobs]
    if leftover:
        b.say(f"burst: deleting the {len(leftover)} every-1s jobs first")
        b.delete_jobs(leftover)


def _plan(b: Bench, n: int) -> Burst:
    """The instant: far enough ahead to create the jobs and let the nodes settle, within the time budget."""
    rate = b.results.get("create_jobs_batched_per_s") or 2000.0  # the burst is created through CreateJobs
    fire_wait_s = min(120.0, 30.0 + n / 2000.0)  # after the instant, wait this long at most for the fires
    after_burst_s = (2 * b.profile.lease_measure_s + 15.0 if "leases" in b.wanted else 0.0) + 15.0
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
    return Burst(at=at, asked=n, lead_s=lead_s, fire_wait_s=fire_wait_s)


def _create(b: Bench, burst: Burst) -> None:
    assert b.pool is not None
    n, at = burst.asked, burst.at
    b.say(
        f"burst: creating {n} jobs all due at T = now + {(at - now_ms()) / 1000:.0f} s, then counting them fire (on the {b.args.burst_watch})"
    )
    t_create = time.time()
    give_up = at / 1000.0 - 1.5  # never create past the instant: those would not be a burst
    counts = [len(x) for x in split(list(range(n)), b.profile.procs)]
    tasks = [
        {
            "kind": "create_at",
            "addresses": b.addresses(),
            "count": count,
            "at_ms": at,
            "queue": BURST_QUEUES[k % len(BURST_QUEUES)],
            "give_up_at": give_up,
        }  # fmt: skip
        for k, count in enumerate(counts)
    ]
    res = b.pool.run(tasks, "create burst jobs", timeout=burst.lead_s + 60, total=n)
    burst.created = sum(len(r["done"]) for r in res)
    burst.create_s = time.time() - t_create
    burst.done_ms = now_ms()
    created, create_s = burst.created, burst.create_s
    b.extra["burst_setup"] = {"jobs": created, "create_s": round(create_s, 2), "create_rate": r1(created / create_s),
                              "errors": merge_errors(res), "at_ms": at}  # fmt: skip
    b.say(f"  created {created} jobs in {create_s:.1f} s ({created / create_s:.0f}/s); T in {(at - burst.done_ms) / 1000:.1f} s")
    if created < n:
        burst.warnings.append(
            f"WARNING: only {created} of the {n} jobs asked for were created before the instant ({created / create_s:.0f}/s): "
            "the burst is smaller than the target's"
        )
    if burst.done_ms > at:
        burst.warnings.append(
            f"WARNING: creation ended {(burst.done_ms - at) / 1000:.1f} s after the instant; some jobs fired as they were created"
        )


def _count_fires(b: Bench, burst: Burst, poller: StatusPoller) -> None:
    """Until the burst queues' pending count reaches the number created, or ``fire_wait_s`` after the instant."""
    wait_until = burst.at + int(burst.fire_wait_s * 1000)
    last_print = time.monotonic()
    try:
        while now_ms() < wait_until and poller.latest() < burst.created:
            if time.monotonic() - last_print >= 2.0:
                last_print = time.monotonic()
                rel = (now_ms() - burst.at) / 1000.0
                b.say(f"  burst: {poller.latest()}/{burst.created} fired ({'T' + ('+' if rel >= 0 else '') + f'{rel:.1f}'} s)")
            time.sleep(POLL_MS / 1000.0)
    finally:
        poller.stop()


def _record(b: Bench, burst: Burst, samples: list[tuple[float, int]], watched: str, leader: str) -> dict[str, Any]:
    """``burst_fire_s`` and the burst's details from the poller's ``(time ms, pending)`` samples."""
    at, created = burst.at, burst.created
    before = st.counter_at(samples, at - 1) or 0  # runs of these queues pending before the instant (none expected)
    fired_n = (samples[-1][1] if samples else 0) - before
    all_at = st.counter_reached(samples, before + created)
    first_at = st.counter_reached(samples, before + 1)
    half_at = st.counter_reached(samples, before + created / 2)
    if all_at is not None and created > 0:
        b.results["burst_fire_s"] = round((all_at - at) / 1000.0, 3)
    else:
        b.results["burst_fire_s"] = None
        burst.warnings.insert(
            0, f"only {fired_n} of {created} burst runs were seen fired within {burst.fire_wait_s:.0f} s of the instant"
        )
    if before:
        burst.warnings.append(f"{before} runs of the burst queues were pending before the instant; they are not counted")
    end_ms = (all_at or now_ms()) + 1000
    b.series["burst"] = {"at_ms": at, "samples": [[t - at, n - before] for t, n in samples if t >= at - 1000]}
    return {
        "jobs": created,
        "fired_seen": fired_n,
        "first_fire_after_instant_ms": round(first_at - at) if first_at is not None else None,
        "half_fired_after_instant_ms": round(half_at - at) if half_at is not None else None,
        "poll_period_ms": POLL_MS,
        "watched_node": watched,
        "watched_role": "follower" if watched != leader else "leader",
        "leader_at_instant": leader,
        "per_second_from_instant": st.counter_per_bucket(samples, at, 1000.0, end_ms),
    }


def _explain(b: Bench, burst: Burst, watched: str, leader: str) -> None:
    tb, ta = b.extra["burst"]["raft_term_before"], b.extra["burst"]["raft_term_after"]
    if tb is not None and ta is not None and ta != tb:
        burst.warnings.append(f"the Raft term went from {tb} to {ta} during the burst (elections)")
        b.say(f"  burst: the Raft term went from {tb} to {ta} (elections) during the burst")
    how = (
        f"{burst.created} 'at' jobs due at one instant, created up to {(burst.at - burst.done_ms) / 1000:.1f} s before it, over {len(BURST_QUEUES)} "
        f"queues; the first time the burst queues' PENDING count on the {'leader' if watched == leader else 'follower'} "
        f"{watched} (ClusterStatus.pending_by_queue, polled every 50 ms) reached the number of jobs, minus the instant"
    )
    b.notes["burst_fire_s"] = "; ".join([*burst.warnings, how])


def scenario_burst(b: Bench) -> None:
    _delete_leftover(b)
    burst = _plan(b, b.profile.burst_jobs)
    _create(b, burst)
    leader = b.leader()
    watched = leader
    if b.args.burst_watch == "follower":
        watched = next(n for n in b.nodes if n != leader)
    # the burst's runs stay PENDING until the lease scenario: the burst queues' depth is the fired count
    poller = StatusPoller(
        b.nodes[watched].grpc,
        lambda status: sum(status.pending_by_queue.get(q, 0) for q in BURST_QUEUES),
        period=POLL_MS / 1000.0,
        in_ms=True,
    )
    b.mark("burst_instant", node=leader, at_ms=burst.at)
    term_before = b.term()
    cpu0 = b.cpu_snapshot()
    _count_fires(b, burst, poller)
    detail = _record(b, burst, poller.samples, watched, leader)
    per_second = detail.pop("per_second_from_instant")
    b.extra["burst"] = {
        **detail,
        "leader_after": b.leader(),
        "raft_term_before": term_before,
        "raft_term_after": b.term(),
        "cpu_s_from_before_instant_until_all_seen": b.cpu_delta(cpu0, b.cpu_snapshot()),
        "per_second_from_instant": per_second,
    }
    _explain(b, burst, watched, leader)
    b.say(
        f"  burst: {detail['fired_seen']}/{burst.created} fired; all fired {b.results['burst_fire_s']} s after the instant "
        f"(first seen after {detail['first_fire_after_instant_ms']} ms)"
    )
