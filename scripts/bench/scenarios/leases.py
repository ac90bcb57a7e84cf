"""Scenario ``leases``: lease grants per second on the burst's backlog, then real executors.

``lease_grants_per_s``: executors in the client processes ask for leases in
batches on half of the burst's PENDING runs (``GRANT_QUEUES``). The other
half feeds ``e2e_runs_per_s`` and ``due_to_leased_ms`` (``scenarios.executors``).
Skipped (with notes) when AcquireLease does not answer, or when the time
budget is used up.
"""

from __future__ import annotations

import time
from typing import Any

import grpc

from bench import stats as st
from bench.harness.common import r1
from bench.harness.context import Bench
from bench.harness.pool import merge_errors
from bench.scenarios.burst import BURST_QUEUES
from bench.scenarios.executors import due_to_leased, e2e_with_executors
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc

GRANT_BATCH = 50
GRANT_QUEUES = BURST_QUEUES[:2]  # the grant scenario leases these (and completes them afterwards)
LEASE_KEYS = ("lease_grants_per_s", "e2e_runs_per_s", "due_to_leased_ms")


def probe_leases(b: Bench) -> None:
    """AcquireLease once: decides whether the lease scenarios can run."""
    node = next(iter(b.nodes.values()))
    with grpc.insecure_channel(node.grpc) as ch:
        try:
            pb_grpc.LeaseServiceStub(ch).AcquireLease(
                pb.AcquireLeaseRequest(executor_id="bench-probe", queues=["bench-probe-empty"], max_runs=1), timeout=5
            )
            b.lease_service = True
            b.say("LeaseService: AcquireLease answers; lease scenarios will run")
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:  # type: ignore[attr-defined]
                b.lease_probe = f"LeaseService not implemented yet (AcquireLease: UNIMPLEMENTED: {exc.details()})"  # type: ignore[attr-defined]
            else:
                b.lease_probe = f"AcquireLease probe failed: {exc.code().name}: {exc.details()}"  # type: ignore[attr-defined]
            b.lease_service = False
            b.say(f"LeaseService: {b.lease_probe}")


def _skip(b: Bench, reason: str) -> None:
    for key in LEASE_KEYS:
        b.results[key] = None
        b.notes[key] = reason


def measure_grants(b: Bench, queues: list[str], measure_s: float) -> tuple[float | None, dict[str, Any]]:
    """Leases granted per second to the client processes' executors asking for ``GRANT_BATCH`` at a time on
    ``queues`` for 1 s of warm-up and ``measure_s`` measured (or over the span the backlog lasted, if it ran dry);
    every lease is completed afterwards, untimed. Returns the rate and its details."""
    p = b.profile
    assert b.pool is not None
    start = time.time() + 0.5
    until = start + 1.0 + measure_s
    task = {"kind": "lease_acquire", "addresses": b.addresses(), "until": until, "queues": queues,
            "complete": False, "max_runs": GRANT_BATCH}  # fmt: skip
    res = b.pool.run([dict(task) for _ in range(p.procs)], "AcquireLease", timeout=until - time.time() + 60)
    times = sorted(t for r in res for t in r["granted"])
    rate = st.rate_in_window(times, start + 1.0, until) if times else None
    if times and times[-1] < until - 0.5 and len(times) > 1:  # the backlog ran dry: rate over the span it lasted
        rate = (len(times) - 1) / max(1e-3, times[-1] - times[0])
    return rate, {
        "latency_ms": st.summarize([x for r in res for x in r["lat"]]),
        "errors": merge_errors(res),
        "count": len(times),
    }


def _grants(b: Bench) -> None:
    p = b.profile
    rate, detail = measure_grants(b, GRANT_QUEUES, p.lease_measure_s)
    b.results["lease_grants_per_s"] = r1(rate) if rate is not None else None
    b.extra["lease_grants_per_s"] = detail
    b.notes["lease_grants_per_s"] = (
        f"leases granted per second to {p.procs}x{p.threads} executors calling AcquireLease with max_runs={GRANT_BATCH} "
        "on half of the burst's PENDING backlog (queues bench-burst-0/1), 1 s warm-up left out, or over the span "
        "the backlog lasted if it ran dry" + ("" if detail["count"] else "; nothing was granted")
    )
    b.say(f"  lease_grants_per_s: {b.results['lease_grants_per_s']}")


def scenario_leases(b: Bench) -> None:
    """lease_grants_per_s (executors asking in batches) and e2e_runs_per_s (real executor processes)."""
    if b.lease_service is None:
        probe_leases(b)
    if not b.lease_service:
        _skip(b, b.lease_probe or "LeaseService not implemented yet")
        return
    p = b.profile
    if b.remaining_s() < 2 * p.lease_measure_s + 15:
        _skip(b, f"skipped: the {p.name} run's time budget ({p.budget_s:.0f} s) was used up by the scenarios before")
        b.say("leases: skipped, the time budget is used up")
        return
    _grants(b)
    e2e_with_executors(b)
    due_to_leased(b)
