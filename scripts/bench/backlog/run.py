"""A large backlog: private memory and disk per node, restart time, fire lag while nodes write and send snapshots.

    python scripts/backlog.py [--jobs 1000000] [--kind mix|at] [--out DIR]
    python scripts/backlog.py --jobs 10000000 --kind at     # ten million one-off jobs spread over 30 days

1. Seeds every node's state environment directly (``bench.backlog.seed``, with
   a progress bar): creating millions of jobs through the API would take
   longer than the measurement (the create rate is measured by
   ``scripts/bench.py``).
2. Starts 3 nodes: launch to serving (a leader, and a linearizable ListJobs
   answered on every node); private memory (RssAnon) and disk per node.
3. 200 ``every 1 s`` jobs fire (watched on the leader) while the log grows
   past ``snapshot_min_entries``, so every node writes a snapshot — a copy
   of its environment — in the background: fire lag inside the snapshot
   windows, the tick-thread pause and the snapshot time from the node logs.
4. A follower is wiped and started again: the leader streams its snapshot
   file to it, which installs it: the fire lag while it is sent, and the time
   until the wiped node serves.
5. SIGKILLs one follower and restarts it, then every node: restart to serving.

Writes DIR/backlog.json and prints a table. Everything runs on loopback in a
temp dir (``--root`` to choose it); the processes started here are stopped by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import threading
import time
from typing import Any

from bench import stats as st
from bench.backlog.probes import disk_mb, memory_mb, snapshot_windows, wait_no_snapshot_written, wait_serving, watch_lag
from bench.backlog.seed import KINDS, seed
from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client

LAG_JOBS = 200
#: snapshots the fire-lag phase waits for (one per node), at most this long (a 10M-job copy takes a while)
SNAPSHOTS_WANTED, SNAPSHOT_WAIT_S = 3, 900
#: then at most this long for the snapshots being written to end
SNAPSHOT_SETTLE_S = 180
#: the wiped node's old files, kept until the end of the run: ``var/<node><WIPED>``
WIPED = ".wiped"


def _lag(values: list[float]) -> dict[str, Any]:
    """n, p50, p99 and max of fire lags in ms (None without any)."""
    s = st.summarize(values, (50, 99), 1)
    return {"n": len(values), "p50": s["p50"], "p99": s["p99"], "max": s["max"]}


def _memory(cluster: LocalCluster) -> dict[str, dict[str, float]]:
    return {n.node_id: memory_mb(n.pid) for n in cluster.nodes.values() if n.pid is not None}


def _disk(cluster: LocalCluster) -> dict[str, dict[str, float]]:
    return {n: disk_mb(os.path.join(cluster.root, "var", n)) for n in cluster.nodes}


def _lag_jobs(cluster: LocalCluster) -> list[str]:
    with Client(cluster.addresses, deadline_s=30) as client:
        ids = []
        for i in range(LAG_JOBS):
            spec = pb.JobSpec(name=f"lag-{i}", queue="lag", type="noop")
            cv.to_dur(1000, spec.every)
            ids.append(client.create_job(spec).job_id)
            time.sleep(0.005)
        return ids


def _within(lags: list[tuple[float, float]], windows: list[tuple[float, float]]) -> list[float]:
    return [lag for ts, lag in lags if any(start - 0.5 <= ts <= end + 0.5 for start, end in windows)]


def _snapshots_written(cluster: LocalCluster, lags: list[tuple[float, float]], res: dict[str, Any]) -> None:
    """The lag jobs fire while the log grows past snapshot_min_entries: every node writes a snapshot."""
    since = time.time()
    deadline = time.monotonic() + SNAPSHOT_WAIT_S
    while time.monotonic() < deadline and len(snapshot_windows(cluster, since)) < SNAPSHOTS_WANTED:
        time.sleep(1)
    time.sleep(3)
    # the lag jobs keep the log growing, so the nodes go on writing: give those in progress time to end
    wait_no_snapshot_written(cluster, timeout=SNAPSHOT_SETTLE_S)
    snaps = snapshot_windows(cluster, since)
    res["snapshots"] = snaps
    # from the end of the wait for its turn (nothing is written before) to the snapshot in place
    windows = [(s["end"] - s["seconds"] + s["waited_s"], s["end"]) for s in snaps]
    res["fire_lag_ms_while_writing_snapshots"] = _lag(_within(lags, windows))
    res["node_memory_mb_after_snapshots"] = _memory(cluster)
    res["node_disk_mb_after_snapshots"] = _disk(cluster)


def _snapshot_sent(cluster: LocalCluster, lags: list[tuple[float, float]], res: dict[str, Any]) -> None:
    """A follower wiped and started again: the leader streams its snapshot file, the follower installs it."""
    leader = cluster.wait_leader()
    follower = next(n for n in cluster.nodes if n != leader)
    cluster.kill(follower)
    # a new machine: its old files moved aside, removed after the run (freeing gigabytes on this disk would
    # stall the other nodes' fsyncs and be measured as theirs; a replaced machine frees nothing here)
    var = os.path.join(cluster.root, "var")
    os.rename(os.path.join(var, follower), os.path.join(var, f"{follower}{WIPED}"))
    began = time.time()
    started = time.monotonic()
    cluster.start(follower)
    res["wiped_node_to_serving_s"] = round(wait_serving(cluster, started, timeout=1800), 2)
    res["fire_lag_ms_while_sending_a_snapshot"] = _lag(_within(lags, [(began, time.time())]))


def _restarts(cluster: LocalCluster, res: dict[str, Any]) -> None:
    """SIGKILL and restart one follower, then every node: seconds until all serve again."""
    follower = next(n for n in cluster.nodes if n != cluster.wait_leader())
    cluster.kill(follower)
    started = time.monotonic()
    cluster.start(follower)
    res["sigkill_one_node_to_serving_s"] = round(wait_serving(cluster, started), 2)
    for node_id in cluster.nodes:
        cluster.kill(node_id)
    started = time.monotonic()
    cluster.start_all()
    res["sigkill_all_to_serving_s"] = round(wait_serving(cluster, started), 2)
    res["node_memory_mb_after_restart"] = _memory(cluster)


def _report(res: dict[str, Any], out: str, root: str) -> None:
    with open(os.path.join(out, "backlog.json"), "w", encoding="utf-8") as f:
        json.dump(res, f, indent=2)
    for key, value in res.items():
        if key not in ("snapshots", "fire_lags"):
            print(f"{key:40} {value}")
    for s in res.get("snapshots", []):
        print(
            f"snapshot {s['node']} index {s['index']}: {s['seconds']:.2f} s, waited {s['waited_s']:.2f} s for its turn, "
            f"tick thread paused {s['pause_s']:.3f} s"
        )
    print(f"wrote {os.path.join(out, 'backlog.json')}; node logs in {root}")


def _measure(cluster: LocalCluster, res: dict[str, Any], restarts_only: bool = False) -> None:
    started = time.monotonic()
    cluster.start_all()
    res["first_start_to_serving_s"] = round(wait_serving(cluster, started), 2)
    res["node_memory_mb_after_start"] = _memory(cluster)
    res["node_disk_mb_after_start"] = _disk(cluster)
    print(f"serving after {res['first_start_to_serving_s']} s; memory {res['node_memory_mb_after_start']}", flush=True)
    if restarts_only:
        _restarts(cluster, res)
        return
    lags: list[tuple[float, float]] = []
    stop = threading.Event()
    watcher = threading.Thread(target=watch_lag, args=(cluster.nodes[cluster.wait_leader()].grpc, stop, lags), daemon=True)
    watcher.start()
    ids = _lag_jobs(cluster)
    try:
        _snapshots_written(cluster, lags, res)
        print(f"snapshots written; fire lag {res['fire_lag_ms_while_writing_snapshots']}", flush=True)
        _snapshot_sent(cluster, lags, res)
        print(f"snapshot sent; fire lag {res['fire_lag_ms_while_sending_a_snapshot']}", flush=True)
    finally:
        with Client(cluster.addresses, deadline_s=30) as client:  # quiet again: no more log growth
            for job_id in ids:
                client.job("DeleteJob", pb.DeleteJobRequest(job_id=job_id))
        stop.set()
    res["fire_lag_ms_all"] = _lag([x for _, x in lags])
    res["fire_lags"] = [[round(ts, 3), round(lag, 1)] for ts, lag in lags]
    wait_no_snapshot_written(cluster)
    _restarts(cluster, res)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=1_000_000)
    p.add_argument("--kind", choices=KINDS, default="mix", help="mix: every/cron/at thirds; at: one-off jobs over 30 days")
    p.add_argument("--out", default="backlog-out")
    p.add_argument("--root", default=None, help="where the cluster's files go (default: a new temp dir)")
    p.add_argument(
        "--restarts-only",
        action="store_true",
        help="after the first start, only the SIGKILL restarts (no snapshot phases: quick at ten million jobs)",
    )
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    res: dict[str, Any] = {"jobs": a.jobs, "kind": a.kind, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    res["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    root = a.root or tempfile.mkdtemp(prefix="raftsched-backlog-")
    limits = f"\n[limits]\nmax_jobs = {max(10_000_000, a.jobs + 100_000)}\n"  # room for the lag jobs
    cluster = LocalCluster.create(root, 3, extra_config="\n[raft]\nsnapshot_min_entries = 1500\n" + limits)
    res["seed"] = seed(cluster, a.jobs, a.kind)
    os.sync()  # the seeded files on disk: the first start is not measured against their write-back
    print(f"seeded {a.jobs:,} jobs: {res['seed']}", flush=True)
    try:
        _measure(cluster, res, a.restarts_only)
    finally:
        for node_id in cluster.nodes:
            cluster.kill(node_id)
        res["seconds"] = round(time.monotonic() - _T0, 1)
        for node_id in cluster.nodes:  # what the wiped node's "new machine" replaced
            shutil.rmtree(os.path.join(root, "var", f"{node_id}{WIPED}"), ignore_errors=True)
        res["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    _report(res, a.out, root)
    return 0


_T0 = time.monotonic()
