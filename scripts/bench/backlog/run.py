"""A one-million-job backlog: memory per node, snapshot size and time, restart time, fire lag during a snapshot.

    python scripts/backlog.py [--jobs 1000000] [--out DIR]

1. Builds the backlog (every job an `every 1 h`, cron or `at` job far in the
   future) in a state machine and seeds every node's data dir with the same
   snapshot file, as if the cluster had taken it — creating a million jobs
   through the API would take longer than the measurement (the create rate
   is measured by scripts/bench.py).
2. Starts 3 nodes and measures the time from launch to serving (a leader
   and a linearizable ListJobs answered on every node) and each node's RSS.
3. Creates 200 `every 1 s` jobs and watches their fires on the leader while
   the log grows past `snapshot_min_entries`, so every node writes a
   million-job snapshot in the background: fire lag p50/p99/max inside the
   snapshot windows, the tick-thread pause and the snapshot time from the logs.
4. SIGKILLs one follower and restarts it, then every node: restart-to-serving for both.

Writes DIR/backlog.json and prints a table. Everything runs on loopback in a
temp dir; the processes started here are stopped by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from typing import Any

from bench import stats as st
from bench.backlog.probes import rss_mb, snapshot_windows, wait_no_snapshot_children, wait_serving, watch_lag
from bench.backlog.seed import build_state, seed
from cluster.app.local_cluster import LocalCluster
from protos.raftsched.v1 import scheduler_pb2 as pb
from rpc import convert as cv
from rpc.client.client import Client

LAG_JOBS = 200
#: snapshots the fire-lag phase waits for (one per node), at most ``SNAPSHOT_WAIT_S``
SNAPSHOTS_WANTED, SNAPSHOT_WAIT_S = 3, 120


def _lag(values: list[float]) -> dict[str, float | None]:
    """p50, p99 and max of fire lags in ms (None without any)."""
    s = st.summarize(values, (50, 99), 1)
    return {"p50": s["p50"], "p99": s["p99"], "max": s["max"]}


def _rss(cluster: LocalCluster) -> dict[str, float]:
    return {n.node_id: round(rss_mb(n.pid), 1) for n in cluster.nodes.values() if n.pid is not None}


def _build(jobs: int, res: dict[str, Any]) -> bytes:
    t = time.monotonic()
    state = build_state(jobs, int(time.time() * 1000))
    blob = state.snapshot()
    res["build_s"] = round(time.monotonic() - t, 1)
    print(f"built {jobs} jobs in {res['build_s']} s; snapshot body {len(blob) / 1e6:.1f} MB", flush=True)
    return blob


def _fire_under_snapshots(cluster: LocalCluster, res: dict[str, Any]) -> None:
    """Every-1s jobs fire while the log grows past snapshot_min_entries: fire lag inside the snapshot windows."""
    lags: list[tuple[float, float]] = []
    stop = threading.Event()
    watcher = threading.Thread(target=watch_lag, args=(cluster.nodes[cluster.wait_leader()].grpc, stop, lags), daemon=True)
    watcher.start()
    window_start = time.time()
    with Client(cluster.addresses, deadline_s=30) as client:
        for i in range(LAG_JOBS):
            spec = pb.JobSpec(name=f"lag-{i}", queue="lag", type="noop")
            cv.to_dur(1000, spec.every)
            client.create_job(spec)
            time.sleep(0.005)
        # the log now grows by ~200 fire entries/s past snapshot_min_entries: snapshots follow
        deadline = time.monotonic() + SNAPSHOT_WAIT_S
        while time.monotonic() < deadline and len(snapshot_windows(cluster, window_start)) < SNAPSHOTS_WANTED:
            time.sleep(1)
        time.sleep(3)
        for job in client.list_jobs(name_prefix="lag-"):  # quiet again: no more log growth
            client.job("DeleteJob", pb.DeleteJobRequest(job_id=job.job_id))
    stop.set()
    wait_no_snapshot_children(cluster)
    snaps = snapshot_windows(cluster, window_start)
    res["snapshots"] = snaps
    during = [lag for ts, lag in lags if any(s["end"] - s["seconds"] - 0.5 <= ts <= s["end"] + 0.5 for s in snaps)]
    res["fire_lag_ms_all"] = _lag([x for _, x in lags])
    res["fire_lag_ms_during_snapshot"] = {"n": len(during), **_lag(during)}
    res["node_rss_mb_after_snapshot"] = _rss(cluster)


def _restarts(cluster: LocalCluster, res: dict[str, Any]) -> None:
    """SIGKILL and restart one follower, then every node: seconds until all serve again."""
    follower = next(n for n in cluster.nodes if n != cluster.wait_leader())
    cluster.kill(follower)
    started = time.monotonic()
    cluster.start(follower)
    res["restart_one_node_to_serving_s"] = round(wait_serving(cluster, started), 2)
    for node_id in cluster.nodes:
        cluster.kill(node_id)
    started = time.monotonic()
    cluster.start_all()
    res["restart_all_to_serving_s"] = round(wait_serving(cluster, started), 2)
    res["node_rss_mb_after_restart"] = _rss(cluster)


def _report(res: dict[str, Any], out: str, root: str) -> None:
    with open(os.path.join(out, "backlog.json"), "w", encoding="utf-8") as f:
        json.dump(res, f, indent=2)
    for key, value in res.items():
        if key != "snapshots":
            print(f"{key:32} {value}")
    for s in res.get("snapshots", []):
        print(f"snapshot {s['node']} index {s['index']}: {s['seconds']:.2f} s, tick thread paused {s['pause_s']:.3f} s")
    print(f"wrote {os.path.join(out, 'backlog.json')}; node logs in {root}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=1_000_000)
    p.add_argument("--out", default="backlog-out")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    res: dict[str, Any] = {"jobs": a.jobs}
    root = tempfile.mkdtemp(prefix="raftsched-backlog-")
    blob = _build(a.jobs, res)
    cluster = LocalCluster.create(root, 3, extra_config="\n[raft]\nsnapshot_min_entries = 1500\n")
    res["snapshot_file_mb"] = round(seed(cluster, blob) / 1e6, 1)
    del blob
    try:
        started = time.monotonic()
        cluster.start_all()
        res["first_start_to_serving_s"] = round(wait_serving(cluster, started), 2)
        res["node_rss_mb_after_start"] = _rss(cluster)
        print(f"serving after {res['first_start_to_serving_s']} s; RSS {res['node_rss_mb_after_start']}", flush=True)
        _fire_under_snapshots(cluster, res)
        _restarts(cluster, res)
    finally:
        for node_id in cluster.nodes:
            cluster.kill(node_id)
    _report(res, a.out, root)
    return 0
