"""Scenario ``failover``: SIGKILLs of the leader -> a new leader (``failover_leader_s``) and the next committed
fire (``failover_resume_s``), median and max over ``failover_kills`` kills.

Runs on the fire-lag scenario's every-1s jobs (thinned to ``failover_jobs``,
staggered across the second), or makes its own when run alone. Every node is
watched. Each kill waits until the leader of the moment has led for the next
of ``LED_S`` (some shorter, some longer than a Raft link's 3.5 s read
timeout); after the kill the killed node is restarted as soon as the
survivors agree on a leader, and the next kill waits until every node has
caught up. The time to a new leader is from the SIGKILL until the survivors
agree on one (polled every 0.1 s); the resume time is the earliest
observed_at, on a survivor's watch, of a fire proposed after the kill.
"""

from __future__ import annotations

import time
from typing import Any

from bench import stats as st
from bench.harness.common import now_ms, r1
from bench.harness.context import Bench
from bench.harness.watch import Watcher
from bench.scenarios.fire_lag import create_every_1s_jobs

#: seconds to wait for a new leader, and then for its first fire, after a kill
ELECTION_WAIT_S = 30
RESUME_WAIT_S = 30
CATCH_UP_WAIT_S = 20
#: how long the leader has led (seconds since it was seen elected) when it is killed, kill after kill: some
#: under a Raft link's read timeout (3.5 s), some over it
LED_S = (1.0, 5.5, 2.0, 6.0, 3.0, 8.0)


def _first_fire_after(watchers: list[Watcher], nodes: list[str], kill_ms: int) -> float | None:
    """Earliest observed_at, on the given nodes' watches, of a run fired (fired_at) after ``kill_ms``."""
    pairs = [(f.fired_ms, f.observed_ms) for w in watchers if w.node_id in nodes for f in list(w.fired[-20000:])]
    return st.first_after(pairs, kill_ms)


def _prepare_jobs(b: Bench) -> None:
    """Keep ``failover_jobs`` of the every-1s jobs (evenly over their phases), delete the rest."""
    p = b.profile
    made = b.lag_jobs
    if not made:  # run on its own: make the every-1s jobs here
        res = create_every_1s_jobs(b, p.failover_jobs, 1.0, "fo")
        made = sorted(m for r in res for m in r["made"])
        b.lag_start_ms = now_ms()
    keep_every = max(1, len(made) // p.failover_jobs)
    keep = [m for k, m in enumerate(made) if k % keep_every == 0][: p.failover_jobs]
    drop = [m[1] for m in made if m not in keep]
    if drop:
        b.say(f"failover: deleting {len(drop)} of the every-1s jobs, keeping {len(keep)} (staggered)")
        b.delete_jobs(drop)
    b.failover_jobs = [m[1] for m in keep]


def _wait_resume(b: Bench, survivors: list[str], kill_ms: int) -> float | None:
    """observed_at of the first fire after the kill, seen on a survivor; None after ``RESUME_WAIT_S``."""
    deadline = time.monotonic() + RESUME_WAIT_S
    while time.monotonic() < deadline:
        if _first_fire_after(b.watchers, survivors, kill_ms) is not None:
            time.sleep(1.0)  # let the other survivor's stream deliver too: the earliest observation counts
            return _first_fire_after(b.watchers, survivors, kill_ms)
        time.sleep(0.05)
    return None


def _kill_once(b: Bench, k: int, elected_at: float) -> tuple[dict[str, Any], float]:
    """One SIGKILL of the leader once it has led ``LED_S[k]`` (from ``elected_at``, monotonic), its restart, and
    the resume; the kill's detail (``leader_seen_after_s``, ``resume_s`` when they came) and when the next leader
    was seen."""
    assert b.cluster is not None
    time.sleep(max(0.0, elected_at + LED_S[k % len(LED_S)] - time.monotonic()))
    old = b.leader()
    survivors = [n for n in b.nodes if n != old]
    killed = time.monotonic()
    kill_ms = now_ms()
    b.cluster.kill(old)
    b.mark("kill", t_ms=kill_ms, node=old)
    detail: dict[str, Any] = {"killed": old, "led_s": round(killed - elected_at, 2)}
    try:
        new = b.cluster.wait_leader(ELECTION_WAIT_S, among=survivors)
    except TimeoutError as exc:
        b.say(f"  kill {k + 1}: no new leader: {exc}")
        b.start_node(old)
        b.mark("restart", node=old)
        return {**detail, "error": str(exc)}, time.monotonic()
    elected = time.monotonic()
    detail.update(new_leader=new, leader_seen_after_s=round(elected - killed, 3))
    b.mark("leader", node=new)
    b.start_node(old)
    b.mark("restart", node=old)
    resumed_ms = _wait_resume(b, survivors, kill_ms)
    if resumed_ms is None:
        b.say(f"  kill {k + 1}: no fire observed within {RESUME_WAIT_S} s after the kill")
        detail["error"] = f"no fire within {RESUME_WAIT_S} s"
    else:
        b.mark("resumed", t_ms=int(resumed_ms), node=new)
        detail["resume_s"] = (resumed_ms - kill_ms) / 1000.0
    b.say(
        f"  kill {k + 1}: SIGKILL {old} (led {detail['led_s']:.1f} s): new leader {new} seen after "
        f"{detail['leader_seen_after_s']:.2f} s, next fire committed after "
        + (f"{detail['resume_s']:.2f} s" if "resume_s" in detail else "never")
    )
    t_catch = time.monotonic()
    caught_up = b.wait_caught_up(CATCH_UP_WAIT_S)
    detail["all_caught_up_after_resume_s"] = round(time.monotonic() - t_catch, 1) if caught_up else None
    if not caught_up:
        b.say(f"  the restarted {old} has not caught up within {CATCH_UP_WAIT_S} s; going on")
    return detail, elected


def _spread(values: list[float]) -> dict[str, Any]:
    return {"median": r1(st.median(values), 3), "max": r1(max(values) if values else None, 3), "count": len(values)}


def scenario_failover(b: Bench) -> None:
    p = b.profile
    _prepare_jobs(b)
    b.say(
        f"failover: {p.failover_kills} SIGKILL(s) of the leader with {len(b.failover_jobs)} every-1s jobs firing; watches on every node"
    )
    have = {w.node_id for w in b.watchers}
    for nid in b.nodes:
        if nid not in have:
            b.watch(nid)
    time.sleep(p.failover_settle_s)
    details, elected_at = [], time.monotonic() - p.failover_settle_s
    for k in range(p.failover_kills):
        detail, elected_at = _kill_once(b, k, elected_at)
        details.append(detail)
    resumes = [d["resume_s"] for d in details if "resume_s" in d]
    elections = [d["leader_seen_after_s"] for d in details if "leader_seen_after_s" in d]
    b.results["failover_resume_s"] = _spread(resumes)
    b.results["failover_leader_s"] = _spread(elections)
    b.extra["failover"] = details
    if len(resumes) < p.failover_kills:
        b.notes["failover_resume_s"] = f"only {len(resumes)} of {p.failover_kills} kills were followed by a fire within 30 s"
    else:
        led = ", ".join(f"{d['led_s']:.1f}" for d in details)
        b.notes["failover_resume_s"] = (
            f"{len(resumes)} SIGKILLs of the leader (led {led} s) -> "
            "earliest observed_at, on the surviving nodes' watches, of a kind='fired' event with fired_at after the "
            "kill; the killed node is restarted as soon as the survivors agree on a leader"
        )
    if len(elections) < p.failover_kills:
        b.notes["failover_leader_s"] = f"only {len(elections)} of {p.failover_kills} kills were followed by a leader within 30 s"
    else:
        b.notes["failover_leader_s"] = (
            "SIGKILL of the leader -> the survivors agree on a new leader (GetClusterStatus every 0.1 s)"
        )
    time.sleep(1.0)
    b.lag_end_ms = now_ms()
