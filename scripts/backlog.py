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
import re
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import grpc  # noqa: E402

from cluster.app.local_cluster import LocalCluster  # noqa: E402
from cluster.domain import commands as c  # noqa: E402
from cluster.domain.model import At, Cron, Every, JobSpec  # noqa: E402
from cluster.domain.state import JobStateMachine  # noqa: E402
from cluster.node.config import load_config  # noqa: E402
from protos.raftsched.v1 import scheduler_pb2 as pb  # noqa: E402
from protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc  # noqa: E402
from raft.snapshot_file import write_snapshot  # noqa: E402
from rpc import convert as cv  # noqa: E402
from rpc.client.client import Client  # noqa: E402

NO_OP = b"\x01"  # pysyncobj's _COMMAND_TYPE.NO_OP entry
DAY_MS = 86_400_000


def build_state(n: int, now_ms: int) -> JobStateMachine:
    m = JobStateMachine()
    payload = json.dumps({"command": "echo report"}).encode()
    schedules = [Every(3_600_000), Cron("0 3 * * *", "Europe/Berlin"), At(now_ms + 30 * DAY_MS)]
    for i in range(n):
        spec = JobSpec(name=f"backlog-{i}", schedule=schedules[i % 3], payload=payload)
        result = m.apply_command(c.CreateJob(now_ms, f"j-backlog-{i:09d}", spec, "", "seeded"), i + 1)
        assert result.__class__.__name__ == "Ok", result
    return m


def seed(cluster: LocalCluster, state: bytes) -> int:
    cfg = load_config(cluster.config_path)
    raft_data = ((NO_OP, 2, 0), (NO_OP, 1, 0), [n.raft for n in cfg.nodes])
    for n in cfg.nodes:
        node_dir = cfg.node_dir(n.id)
        os.makedirs(node_dir, exist_ok=True)
        with open(os.path.join(node_dir, "NODE"), "w", encoding="utf-8") as f:
            json.dump({"node_id": n.id, "members": sorted(x.raft for x in cfg.nodes)}, f)
        write_snapshot(os.path.join(node_dir, "raft.snapshot"), raft_data, state)
    return os.path.getsize(os.path.join(cfg.node_dir(cfg.nodes[0].id), "raft.snapshot"))


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024  # type: ignore[union-attr]


def wait_serving(cluster: LocalCluster, started: float, timeout: float = 180) -> float:
    """Seconds from ``started`` until every node answers a linearizable ListJobs."""
    deadline = time.monotonic() + timeout
    pending = set(cluster.nodes)
    while pending and time.monotonic() < deadline:
        for node_id in list(pending):
            try:
                with grpc.insecure_channel(cluster.nodes[node_id].grpc) as ch:
                    pb_grpc.JobServiceStub(ch).ListJobs(pb.ListJobsRequest(page_size=1), timeout=2)
                pending.discard(node_id)
            except grpc.RpcError:
                pass
        time.sleep(0.1)
    if pending:
        raise TimeoutError(f"nodes {sorted(pending)} not serving after {timeout} s")
    return time.monotonic() - started


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def watch_lag(address: str, stop: threading.Event, out: list[tuple[float, float]]) -> None:
    with grpc.insecure_channel(address) as ch:
        stream = pb_grpc.JobServiceStub(ch).WatchRuns(pb.WatchRunsRequest(queue="lag", kinds=["fired"]))
        threading.Thread(target=lambda: (stop.wait(), stream.cancel()), daemon=True).start()
        try:
            for ev in stream:
                if ev.kind == "fired":
                    observed = cv.ts_ms(ev.observed_at)
                    out.append((observed / 1000.0, observed - cv.ts_ms(ev.run.scheduled_time)))
        except grpc.RpcError:
            pass


def wait_no_snapshot_children(cluster: LocalCluster, timeout: float = 180) -> None:
    """Wait until no node has a snapshot child process left (restarts are measured on a quiet machine)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = False
        for node in cluster.nodes.values():
            try:
                with open(f"/proc/{node.pid}/task/{node.pid}/children", encoding="ascii") as f:
                    busy = busy or bool(f.read().split())
            except OSError:
                pass
        if not busy:
            return
        time.sleep(1)


def snapshot_windows(cluster: LocalCluster, since: float) -> list[dict]:
    """(end time, duration, pause) of every snapshot the node logs report after ``since``."""
    found = []
    pat = re.compile(
        r"^(\S+ \S+) (\S+) raftsched.raft INFO snapshot at index (\d+) written in ([\d.]+) s \(tick thread paused ([\d.]+) s\)"
    )
    for node in cluster.nodes.values():
        with open(node.log_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = pat.match(line)
                if not m:
                    continue
                end = time.mktime(time.strptime(m.group(1).split(",")[0], "%Y-%m-%d %H:%M:%S")) - time.timezone
                end += int(m.group(1).split(",")[1]) / 1000
                if end >= since:
                    found.append({"node": m.group(2), "index": int(m.group(3)), "end": end,
                                  "seconds": float(m.group(4)), "pause_s": float(m.group(5))})  # fmt: skip
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=1_000_000)
    p.add_argument("--out", default="backlog-out")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    res: dict = {"jobs": a.jobs}
    root = tempfile.mkdtemp(prefix="raftsched-backlog-")
    t = time.monotonic()
    state = build_state(a.jobs, int(time.time() * 1000))
    blob = state.snapshot()
    res["build_s"] = round(time.monotonic() - t, 1)
    del state
    print(f"built {a.jobs} jobs in {res['build_s']} s; snapshot body {len(blob) / 1e6:.1f} MB", flush=True)
    cluster = LocalCluster.create(root, 3, extra_config="\n[raft]\nsnapshot_min_entries = 1500\n")
    res["snapshot_file_mb"] = round(seed(cluster, blob) / 1e6, 1)
    del blob
    try:
        started = time.monotonic()
        cluster.start_all()
        res["first_start_to_serving_s"] = round(wait_serving(cluster, started), 2)
        res["node_rss_mb_after_start"] = {n.node_id: round(rss_mb(n.pid), 1) for n in cluster.nodes.values()}
        print(f"serving after {res['first_start_to_serving_s']} s; RSS {res['node_rss_mb_after_start']}", flush=True)
        leader = cluster.wait_leader()
        lags: list[tuple[float, float]] = []
        stop = threading.Event()
        watcher = threading.Thread(target=watch_lag, args=(cluster.nodes[leader].grpc, stop, lags), daemon=True)
        watcher.start()
        window_start = time.time()
        with Client(cluster.addresses, deadline_s=30) as client:
            for i in range(200):
                spec = pb.JobSpec(name=f"lag-{i}", queue="lag", type="noop")
                cv.to_dur(1000, spec.every)
                client.create_job(spec)
                time.sleep(0.005)
            # the log now grows by ~200 fire entries/s past snapshot_min_entries: snapshots follow
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and len(snapshot_windows(cluster, window_start)) < 3:
                time.sleep(1)
            time.sleep(3)
            for job in client.list_jobs(name_prefix="lag-"):  # quiet again: no more log growth
                client.job("DeleteJob", pb.DeleteJobRequest(job_id=job.job_id))
        stop.set()
        wait_no_snapshot_children(cluster)
        snaps = snapshot_windows(cluster, window_start)
        res["snapshots"] = snaps
        during = [lag for ts, lag in lags if any(s["end"] - s["seconds"] - 0.5 <= ts <= s["end"] + 0.5 for s in snaps)]
        res["fire_lag_ms_all"] = {q: round(percentile([x for _, x in lags], v), 1) for q, v in (("p50", .5), ("p99", .99), ("max", 1.0))}  # fmt: skip
        res["fire_lag_ms_during_snapshot"] = {
            "n": len(during), **{q: round(percentile(during, v), 1) for q, v in (("p50", .5), ("p99", .99), ("max", 1.0))}
        }  # fmt: skip
        res["node_rss_mb_after_snapshot"] = {n.node_id: round(rss_mb(n.pid), 1) for n in cluster.nodes.values()}
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
        res["node_rss_mb_after_restart"] = {n.node_id: round(rss_mb(n.pid), 1) for n in cluster.nodes.values()}
    finally:
        for node_id in cluster.nodes:
            cluster.kill(node_id)
    with open(os.path.join(a.out, "backlog.json"), "w", encoding="utf-8") as f:
        json.dump(res, f, indent=2)
    for key, value in res.items():
        if key != "snapshots":
            print(f"{key:32} {value}")
    for s in res.get("snapshots", []):
        print(f"snapshot {s['node']} index {s['index']}: {s['seconds']:.2f} s, tick thread paused {s['pause_s']:.3f} s")
    print(f"wrote {os.path.join(a.out, 'backlog.json')}; node logs in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
