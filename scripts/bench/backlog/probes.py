"""What the backlog run reads from the cluster: serving, memory (RssAnon), disk, fire lag, snapshot windows."""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

import grpc

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc import convert as cv

#: the node log line of a finished snapshot (raft/snapshotter.py; "waited" since snapshots take turns)
SNAPSHOT_LINE = re.compile(
    r"^(\S+ \S+) (\S+) raftsched.raft INFO snapshot at index (\d+) written in ([\d.]+) s "
    r"\((?:waited ([\d.]+) s for its turn, )?tick thread paused ([\d.]+) s\)"
)


def memory_mb(pid: int) -> dict[str, float]:
    """``RssAnon`` (the process's private memory: what the state costs; LMDB's mapped file pages are not in it)
    and ``VmRSS`` (everything resident, mapped file pages included), in MB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        text = f.read()
    found = {key: int(re.search(rf"{key}:\s+(\d+)", text).group(1)) / 1024 for key in ("RssAnon", "VmRSS")}  # type: ignore[union-attr]
    return {key: round(value, 1) for key, value in found.items()}


def disk_mb(path: str) -> dict[str, float]:
    """Bytes on disk (allocated blocks) under ``path``, by top-level entry, in MB."""
    out: dict[str, float] = {}
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        files = [full] if os.path.isfile(full) else [os.path.join(d, f) for d, _, fs in os.walk(full) for f in fs]
        out[name] = round(sum(os.stat(f).st_blocks * 512 for f in files if os.path.exists(f)) / 1e6, 1)
    return out


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
        raise TimeoutError(f"nodes {sorted(pending)} not serving after {timeout} s; see their logs in {cluster.root}")
    return time.monotonic() - started


def watch_lag(address: str, stop: threading.Event, out: list[tuple[float, float]]) -> None:
    """Until ``stop``: (observed_at in s, observed_at - scheduled_time in ms) of every fire on queue ``lag``."""
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


def wait_no_snapshot_written(cluster: LocalCluster, timeout: float = 600) -> None:
    """Wait until no node is writing a snapshot (its ``raft.snapshot.next``): restarts are measured on a quiet machine."""
    data = os.path.join(cluster.root, "var")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(os.path.exists(os.path.join(data, n, "raft.snapshot.next")) for n in cluster.nodes):
            return
        time.sleep(1)


def _log_time(stamp: str) -> float:
    """``2026-01-02 03:04:05,678`` (a node log's UTC time) as a Unix time."""
    day, millis = stamp.split(",")
    return time.mktime(time.strptime(day, "%Y-%m-%d %H:%M:%S")) - time.timezone + int(millis) / 1000


def snapshot_windows(cluster: LocalCluster, since: float) -> list[dict[str, Any]]:
    """(end time, duration, pause) of every snapshot the node logs report after ``since``."""
    found = []
    for node in cluster.nodes.values():
        with open(node.log_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = SNAPSHOT_LINE.match(line)
                if not m:
                    continue
                end = _log_time(m.group(1))
                if end >= since:
                    found.append({"node": m.group(2), "index": int(m.group(3)), "end": end, "seconds": float(m.group(4)),
                                  "waited_s": float(m.group(5) or 0), "pause_s": float(m.group(6))})  # fmt: skip
    return found
