"""Guarantee 8 with one node's wall clock moved 300 s ahead and back, and 300 s behind and back — once while it
leads and once while it follows each way — under load: interval jobs firing every second, an executor, and
runs that renew their 2 s leases for 8 s.

The clock is moved by a ``sitecustomize`` module in that node's process only (``tests.skewed_clock``);
everything here is judged by this process's clock, which is correct. What users see:

- no run is seen fired or leased before its instant minus the look-ahead (0.1 s) minus ``max_clock_offset``
  (500 ms), and no fire carries a time ahead of the correct clock by more than that: the skewed node
  stamps nothing;
- a lease whose holder keeps renewing is never expired: each long run ends SUCCEEDED at attempt 1;
- firing goes on: every instant of every interval job fired once, none skipped, none seen more than the
  misfire threshold (5 s) late, one lease holder at a time (``tests.history``);
- the skewed node says so: ``/healthz`` 503 with ``clock offset +300.0 s from n2, n3 (max 500 ms)`` (its
  offset against the others), gRPC health NOT_SERVING, ``clock_ok`` false for it in ``GetClusterStatus``
  on every node, with its offset measured by the others; as leader it gives leadership up within 2 s (and
  the others agree on a new leader within 5 s);
- it recovers by itself once its clock is right again: ``clock_ok`` true everywhere, ``/healthz`` 200.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.channel import open_channel
from raftsched.rpc.client.client import Client
from tests.elections import EventClock, Seen, named_leader, now_ms, wait_agreed
from tests.helpers import every_spec, shell_spec, start_executor, wait_for
from tests.history import Expected, IntervalJob, OneOffJob
from tests.history_read import LeaseWatch, check_cluster
from tests.skewed_clock import SkewedClocks

pytestmark = pytest.mark.fault

QUEUE = "q-skew"
SKEW_MS = 300_000
MAX_OFFSET_MS = 500  # [cluster] max_clock_offset, the default
LOOKAHEAD_MS = 100  # [scheduler] fire_lookahead_s, the default
MISFIRE_MS = 5000  # [scheduler] misfire_threshold_s, the default
#: the contract: a leader whose clock is off gives leadership up within 2 s. The skew reaches the node within
#: 50 ms of the test writing it (``tests.skewed_clock``); leadership is looked at every 50 ms or so
GIVE_UP_S = 2.0 + 0.05
#: what a phase does: whose clock (the leader's or a follower's) moves by how much
PHASES = [("leader", +SKEW_MS), ("follower", -SKEW_MS), ("leader", -SKEW_MS), ("follower", +SKEW_MS)]


def _http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def _grpc_health(address: str) -> int | None:
    try:
        with open_channel(address) as ch:
            return int(health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=2).status)
    except grpc.RpcError:
        return None


@contextlib.contextmanager
def _skewable_cluster(root: str) -> Iterator[tuple[LocalCluster, SkewedClocks]]:
    """A 3-node cluster with HTTP endpoints, every node started with a clock the test can move."""
    c = LocalCluster.create(os.path.join(root, "cluster"), 3, http=True)
    clocks = SkewedClocks(os.path.join(root, "clocks"))
    try:
        for node_id in c.nodes:
            c.start(node_id, env=clocks.env(node_id))
        c.wait_leader(30)
        yield c, clocks
    finally:
        for node_id in c.nodes:
            c.kill(node_id)


@contextlib.contextmanager
def _executor(c: LocalCluster, root: str) -> Iterator[None]:
    proc = start_executor(c, root, "exec-skew", QUEUE, allow=("shell",))
    try:
        yield
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def _offset_reason(c: LocalCluster, node: str, sign: str, others: list[str]) -> str | None:
    """``node``'s /healthz reason when it is 503 and names its clock offset (sign, about 300 s) from every other node
    (None until it does: right after the step a peer's reading may not be recent yet, and the reason says so)."""
    status, body = _http_get(c.http_url(node, "/healthz"))
    m = re.search(r"clock offset ([+-])(\d+\.\d) s from ([n\d, ]+) \(max 500 ms\)", body)
    if status != 503 or m is None:
        return None
    assert m.group(1) == sign and abs(float(m.group(2)) - SKEW_MS / 1000) < 1.0, body
    named = sorted(m.group(3).split(", "))
    assert set(named) <= set(others), body  # never a node that is not a peer
    return body if named == sorted(others) else None


def _clock_views(c: LocalCluster, skewed: str, offset_ms: int) -> bool:
    """Whether every node's GetClusterStatus shows ``skewed``'s clock not ok and everyone else's ok, and the
    unskewed nodes measure its offset at about ``offset_ms``."""
    for node in c.nodes:
        status = c.status(node, 2.0)
        if status is None:
            return False
        for m in status.members:
            if m.clock_ok != (m.id != skewed):
                return False
            if node != skewed and m.id == skewed:
                if not m.clock_measured or abs(cv.dur_ms(m.clock_offset) - offset_ms) > MAX_OFFSET_MS:
                    return False
    return True


def _all_clocks_ok(c: LocalCluster) -> bool:
    statuses = [c.status(node, 2.0) for node in c.nodes]
    return all(s is not None and all(m.clock_ok for m in s.members) for s in statuses)


def _lost_lead_after(c: LocalCluster, skewed: str, since: float) -> float:
    """Seconds from ``since`` until ``skewed`` no longer says it leads."""
    while True:
        status = c.status(skewed, 0.5)
        if status is not None and status.leader_id != skewed:
            return time.monotonic() - since
        if time.monotonic() - since > 30:
            pytest.fail(f"{skewed}, its clock off by 300 s, still leads after 30 s; logs in {c.root}")
        time.sleep(0.02)


def _on_time(seen: EventClock, what: str) -> tuple[list[Seen], list[Seen]]:
    """The fires and grants seen so far, after checking that none came early or carried a time from the future."""
    fires, grants = seen.sightings()
    floor = LOOKAHEAD_MS + MAX_OFFSET_MS
    early = [s for s in fires + grants if s.seen_ms < s.scheduled_ms - floor]
    assert not early, f"{what}: seen fired or leased more than {floor} ms before its instant (by a correct clock): {early[:5]}"
    ahead = [s for s in fires if s.stamped_ms > s.seen_ms + MAX_OFFSET_MS]
    assert not ahead, f"{what}: fires stamped with a time ahead of the correct clock by over {MAX_OFFSET_MS} ms: {ahead[:5]}"
    return fires, grants


def _phase(
    c: LocalCluster, clocks: SkewedClocks, client: Client, seen: EventClock, role: str, skew_ms: int, root: str, k: int
) -> str:
    """Move a node's clock by ``skew_ms`` (the leader's or a follower's), check what it says and does, move it
    back, check it recovers; a long renewing run spans it all. Returns the long run's job id."""
    nodes = list(c.nodes)
    marks = os.path.join(root, f"long-{k}.txt")
    spec = shell_spec(f"skew-long-{k}", f"echo start-$RAFTSCHED_ATTEMPT >> {marks}; sleep 8; echo done", queue=QUEUE)
    cv.to_dur(2000, spec.lease_ttl)
    long_job = client.create_job(spec)
    wait_for(lambda: os.path.exists(marks), 20, f"phase {k}: the long run to start")
    leader, _ = wait_agreed(c, nodes, 10)
    assert leader is not None, f"phase {k}: no leader agreed on; logs in {c.root}"
    skewed = leader if role == "leader" else next(n for n in nodes if n != leader)
    others = [n for n in nodes if n != skewed]
    sign = "+" if skew_ms > 0 else "-"
    moved_at = time.monotonic()
    clocks.set(skewed, skew_ms)
    what = f"phase {k}: {skewed} ({role}) clock {sign}{abs(skew_ms) / 1000:.0f} s"
    if role == "leader":
        gave_up = _lost_lead_after(c, skewed, moved_at)
        new, elected = wait_agreed(c, others, 5.0 - (time.monotonic() - moved_at), since=moved_at)
        print(f"{what}: gave leadership up after {gave_up:.2f} s, {others} agreed on {new} after {elected:.2f} s")
        assert gave_up <= GIVE_UP_S, f"{what}: it led on for {gave_up:.2f} s (at most 2 s); logs in {c.root}"
        assert new is not None, f"{what}: {others} agreed on no leader within 5 s; logs in {c.root}"
    reason = wait_for(lambda: _offset_reason(c, skewed, sign, others), 5, f"{what}: /healthz 503 naming the offset")
    print(f"{what}: /healthz 503 {reason.strip()!r}")
    assert _grpc_health(c.nodes[skewed].grpc) == health_pb2.HealthCheckResponse.NOT_SERVING, what
    wait_for(lambda: _clock_views(c, skewed, skew_ms), 5, f"{what}: clock_ok false for {skewed} on every node")
    assert named_leader(c, nodes, among=others) is not None, f"{what}: the nodes do not agree on a leader with a good clock"
    time.sleep(max(0.0, moved_at + 5.0 - time.monotonic()))  # firing goes on meanwhile: checked at the end

    clocks.set(skewed, 0)
    back_at = time.monotonic()
    wait_for(lambda: _all_clocks_ok(c), 10, f"{what}, then right again: clock_ok true on every node")
    wait_for(lambda: _http_get(c.http_url(skewed, "/healthz"))[0] == 200, 10, f"{what}, then right again: /healthz 200")
    print(f"{what}: serving again {time.monotonic() - back_at:.2f} s after its clock was right")
    done = wait_for(
        lambda: [r for r in client.list_runs(job_id=long_job.job_id) if r.status == pb.RUN_STATUS_SUCCEEDED],
        30,
        f"{what}: the long run to finish",
    )[0]
    assert done.attempt == 1 and [a.attempt for a in done.attempts] == [1], (
        f"{what}: a lease renewed throughout was expired or handed out again: {list(done.attempts)}"
    )
    with open(marks, encoding="utf-8") as f:
        assert f.read().split() == ["start-1"], what
    _on_time(seen, what)
    return long_job.job_id


def test_a_nodes_clock_moved_300_s_while_it_leads_and_while_it_follows(tmp_path: Path) -> None:
    root = str(tmp_path)
    with contextlib.ExitStack() as stack:
        c, clocks = stack.enter_context(_skewable_cluster(root))
        client = stack.enter_context(Client(c.addresses, deadline_s=30))
        watch = stack.enter_context(LeaseWatch(c.nodes["n1"].grpc, QUEUE))
        seen = stack.enter_context(EventClock({n: c.nodes[n].grpc for n in c.nodes}, QUEUE))
        ticks = {
            j.job_id: cv.ts_ms(j.created_at) + 1000
            for j in (client.create_job(every_spec(f"skew-tick-{i}", 1000, queue=QUEUE)) for i in range(6))
        }
        watch.wait_seen()
        stack.enter_context(_executor(c, root))
        time.sleep(2.0)
        long_jobs = [_phase(c, clocks, client, seen, role, skew, root, k) for k, (role, skew) in enumerate(PHASES, 1)]
        last_ms = now_ms()
        time.sleep(2.0)
        for job_id in ticks:
            client.job("PauseJob", pb.PauseJobRequest(job_id=job_id))
        time.sleep(1.0)
        fires, grants = _on_time(seen, "after every phase")
        leases = watch.leases()
        ticked = [s for s in fires if s.job_id in ticks]
        assert len(ticked) >= len(ticks) * 20, f"only {len(ticked)} fires of the interval jobs were seen"
        late = sorted((s.seen_ms - s.scheduled_ms, s.run_id) for s in ticked)
        print(f"interval fires seen: {len(ticked)}; latest {late[-1][0]} ms after its instant")
        assert late[-1][0] <= MISFIRE_MS, f"fires seen more than {MISFIRE_MS} ms after their instants: {late[-5:]}"
        check_cluster(
            c,
            Expected(
                acknowledged=[*ticks, *long_jobs],
                interval=[
                    IntervalJob(j, 1000, first_ms=first, fired_after_ms=last_ms, skips_allowed=False)
                    for j, first in ticks.items()
                ],
                one_off=[OneOffJob(j, status="SUCCEEDED") for j in long_jobs],
            ),
            job_prefix="skew-",
            leases=leases,
        )
