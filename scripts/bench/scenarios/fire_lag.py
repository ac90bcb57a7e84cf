"""Scenario ``fire_lag``: observed_at - scheduled_time of every fire at a steady fire rate.

``fire_rate`` every-1s jobs are created evenly across the second (their phase
is their creation instant mod 1 s), then a watch on the leader counts the
fires of a window (``fire_lag_ms``, ``fire_lag_ms_clamped``, ``fire_rate``).
The jobs stay for the failover scenario; ``collect_lag_series`` turns every
watch's fires of both scenarios into series.json's ``fire_lag``.
"""

from __future__ import annotations

import math
import time
from typing import Any

from bench import stats as st
from bench.harness.common import now_ms, r1, split
from bench.harness.context import Bench
from bench.harness.pool import merge_errors
from bench.harness.watch import Watcher

#: an observation this long after the fire was proposed is a restarted node re-applying its journal
REPLAY_MS = 2000
LAG_QUEUE = "bench-lag"


def create_every_1s_jobs(b: Bench, n: int, spread_s: float, prefix: str) -> list[dict[str, Any]]:
    """``n`` every-1s jobs on ``LAG_QUEUE``, sent evenly over ``spread_s``; the client processes' results."""
    assert b.pool is not None
    t_send = time.time() + 1.0
    items = [(i, t_send + i * spread_s / n) for i in range(n)]
    tasks = [
        {
            "kind": "create_paced",
            "addresses": b.addresses(),
            "items": part,
            "every_s": 1,
            "queue": LAG_QUEUE,
            "prefix": prefix,
            "give_up_at": b.give_up_at(60),
        }  # fmt: skip
        for part in split(items, b.profile.procs)
    ]
    return b.pool.run(tasks, "create every-1s jobs", timeout=120, total=n)


def _create_lag_jobs(b: Bench) -> None:
    p = b.profile
    n = p.fire_rate  # every-1s jobs: n jobs -> n fires per second
    # Pace the creates so that the clients keep up: creating them evenly over k whole seconds
    # spreads them evenly across the second.
    create_rate = b.results.get("create_jobs_per_s") or 1000.0
    stagger = max(p.fire_stagger_s, math.ceil(n / (0.7 * create_rate)))
    b.say(
        f"fire lag: {n} jobs 'every 1s' created evenly over {stagger} s (staggered across the second), then {p.fire_window_s:.0f} s on a leader watch"
    )
    res = create_every_1s_jobs(b, n, stagger, "lag")
    made = sorted(m for r in res for m in r["made"])
    b.lag_jobs = made
    spread = st.phase_spread([m[2] for m in made], 1000.0, 10)
    b.extra["fire_lag_setup"] = {
        "jobs": len(made),
        "phase_buckets_100ms": spread["buckets"],
        "phase_peak_ratio": r1(spread["peak_ratio"], 2),
        "creates_sent_late_s": st.summarize([x for r in res for x in r["late"]]),
        "errors": merge_errors(res),
    }
    b.say(f"  created {len(made)} jobs; phase spread over the second (per 100 ms): {spread['buckets']}")


def _watch_window(b: Bench, leader: str, w: Watcher) -> tuple[int, int, int | None]:
    """Warm up, then count fires for the window; the window ``(w0, w1)`` in ms and the Raft term at its start."""
    p = b.profile
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
    return w0, w1, term_before


def _drain(w: Watcher, w1: int) -> int:
    """Wait until an event observed after the window arrived (observed_at is stamped on the node when it
    applies, and the stream may run behind): every event of the window is then counted. How far behind, ms."""
    drain_deadline = time.monotonic() + 20
    while time.monotonic() < drain_deadline and not (w.fired and w.fired[-1].observed_ms >= w1):
        time.sleep(0.05)
    return now_ms() - w1


def _warn(b: Bench, leader: str, leader_after: str) -> None:
    tb, ta = b.extra["fire_lag_detail"]["raft_term_before"], b.extra["fire_lag_detail"]["raft_term_after"]
    if tb is not None and ta is not None and ta != tb:
        b.notes["fire_lag_ms"] += f"; WARNING: the Raft term went from {tb} to {ta} during the window"
    if leader_after != leader:
        b.notes["fire_lag_ms"] += f"; WARNING: the leader changed during the window ({leader} -> {leader_after})"


def scenario_fire_lag(b: Bench) -> None:
    _create_lag_jobs(b)
    leader = b.leader()
    w = b.watch(leader)
    w0, w1, term_before = _watch_window(b, leader, w)
    leader_after = b.leader()
    stream_behind_ms = _drain(w, w1)
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
        "target_fire_rate": b.profile.fire_rate,
    }
    b.notes["fire_lag_ms"] = (
        f"observed_at (apply time on the leader {leader}) - scheduled_time of kind='fired' events in a "
        f"{(w1 - w0) / 1000:.1f} s window; negative = committed early within fire_lookahead_s (0.1 s default)"
    )
    _warn(b, leader, leader_after)
    fl = b.results["fire_lag_ms"]
    b.say(
        f"  fire lag: p50 {fl['p50']} ms, p99 {fl['p99']} ms, max {fl['max']} ms over {fl['count']} fires; rate {b.results['fire_rate']}/s"
    )


def collect_lag_series(b: Bench) -> None:
    """Fire lag of every run seen in the lag/failover phases (earliest observation per run).

    A restarted node re-applies its journal and its watch sees old runs again, long after they
    fired (fired_at is when the leader proposed the fire, so observed_at - fired_at is seconds
    instead of milliseconds): such replays are left out. Events still queued on a node for its
    watcher when it is SIGKILLed are lost: their runs then only show up as replays, and are
    missing from the series.
    """
    start = b.lag_start_ms
    if start is None:
        return
    end = b.lag_end_ms or now_ms()
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
