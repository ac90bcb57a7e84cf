"""``Bench``: the state of one benchmark run, handed to every scenario.

A scenario writes its figures into ``results`` (the keys of bench.json),
explains any ``None`` in ``notes``, and may add ``extra`` (bench.json's
``details``), ``series`` (series.json, the plots) and ``timeline`` marks.
Scenarios that follow each other share what they leave here (the every-1s
jobs of the fire-lag scenario, the watches, the burst's backlog). Progress
lines go through ``say``; the profile's time budget through ``remaining_s``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.harness.common import now_ms, split
from bench.harness.load import LoadMonitor
from bench.harness.pool import WorkerPool
from bench.harness.processes import cpu_s, device_of, device_written_mb, user_sys_s
from bench.harness.runtime import NodeRuntime, this_checkout
from bench.harness.watch import Watcher
from bench.profile import Profile
from raftsched.cluster.app.local_cluster import LocalCluster

#: a scenario's share of CPU taken by processes outside the benchmark above which it is flagged
FOREIGN_CORES_WARNING = 0.2


@dataclass
class Bench:
    args: argparse.Namespace
    profile: Profile
    root: str
    out_dir: str
    t0: float = field(default_factory=time.monotonic)
    results: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    series: dict[str, Any] = field(default_factory=dict)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    cluster: LocalCluster | None = None
    pool: WorkerPool | None = None
    watchers: list[Watcher] = field(default_factory=list)
    lease_service: bool | None = None
    lease_probe: str = ""
    lag_jobs: list[tuple[int, str, int]] = field(default_factory=list)  # (i, job_id, created_ms)
    lag_start_ms: int | None = None
    lag_end_ms: int | None = None
    failover_jobs: list[str] = field(default_factory=list)
    wanted: list[str] = field(default_factory=list)
    monitor: LoadMonitor | None = None
    #: the raftsched the cluster's nodes and the executors run (``--nodes-from``)
    runtime: NodeRuntime = field(default_factory=this_checkout)

    # ---------------------------------------------------------------- output

    def say(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f}s] {msg}", flush=True)

    def mark(self, event: str, t_ms: int | None = None, **kw: Any) -> None:
        self.timeline.append({"t_ms": now_ms() if t_ms is None else t_ms, "event": event, **kw})

    # ---------------------------------------------------------------- cluster helpers

    @property
    def nodes(self) -> dict[str, Any]:
        assert self.cluster is not None, "the raftsched cluster is not started"
        return self.cluster.nodes

    def start_node(self, node_id: str) -> None:
        """Start (or restart) one of the cluster's nodes, as the run's ``runtime`` runs it."""
        assert self.cluster is not None
        rt = self.runtime
        self.cluster.start(node_id, env=rt.env(), module=rt.module, python=rt.python)

    def addresses(self) -> list[str]:
        assert self.cluster is not None, "the raftsched cluster is not started"
        return self.cluster.addresses

    def leader(self, timeout: float = 30.0) -> str:
        assert self.cluster is not None, "the raftsched cluster is not started"
        return self.cluster.wait_leader(timeout)

    def follower_address(self) -> str:
        """The gRPC address of a node that is not the leader (the leader's when alone)."""
        leader = self.leader()
        return self.nodes[next((n for n in self.nodes if n != leader), leader)].grpc

    def term(self) -> int | None:
        """The highest Raft term the live nodes report: its growth counts elections."""
        assert self.cluster is not None
        statuses = (self.cluster.status(n) for n in self.nodes if self.nodes[n].alive())
        terms = [s.term for s in statuses if s is not None]
        return max(terms) if terms else None

    def wait_caught_up(self, timeout: float, slack: int = 100) -> bool:
        """Wait until every node has applied the log up to (nearly) the commit index seen at the start."""
        assert self.cluster is not None
        deadline = time.monotonic() + timeout
        target = None
        while time.monotonic() < deadline:
            sts = [self.cluster.status(n) for n in self.nodes]
            if all(s is not None for s in sts):
                commit = max(s.commit_index for s in sts if s is not None)
                target = commit if target is None else target
                if all(s is not None and s.applied_index >= target - slack for s in sts):
                    return True
            time.sleep(0.2)
        return False

    def watch(self, node_id: str, queue_name: str = "") -> Watcher:
        w = Watcher(node_id, self.nodes[node_id].grpc, queue_name).start()
        self.watchers.append(w)
        return w

    def stop_watchers(self) -> None:
        for w in self.watchers:
            w.stop()
        self.watchers = []

    def delete_jobs(self, job_ids: list[str]) -> list[dict[str, Any]]:
        """DeleteJob of every id through the client processes, within ``delete_budget_s``."""
        assert self.pool is not None
        give_up = self.give_up_at(self.delete_budget_s())
        tasks = [
            {"kind": "delete", "addresses": self.addresses(), "job_ids": part, "give_up_at": give_up}
            for part in split(job_ids, self.profile.procs)
        ]
        return self.pool.run(tasks, "DeleteJob", timeout=120, total=len(job_ids))

    # ---------------------------------------------------------------- time and CPU

    def give_up_at(self, seconds: float) -> float:
        return time.time() + seconds

    def delete_budget_s(self) -> float:
        """How long a bulk DeleteJob may take: at most 60 s, less when the time budget runs low."""
        return min(60.0, max(10.0, self.remaining_s() - 90.0))

    def remaining_s(self) -> float:
        """Seconds left of the profile's time budget."""
        return self.profile.budget_s - (time.monotonic() - self.t0)

    def cpu_snapshot(self) -> dict[str, float | None]:
        """CPU seconds so far of each node and of the client processes together."""
        snap: dict[str, float | None] = {nid: cpu_s(n.pid) for nid, n in self.cluster.nodes.items()} if self.cluster else {}
        if self.pool is not None:
            snap["clients"] = sum(cpu_s(pid) or 0.0 for pid in self.pool.pids())
        return snap

    def sys_snapshot(self) -> dict[str, float | None]:
        """System (kernel) CPU seconds so far of each node: the part of ``cpu_snapshot`` spent in the kernel."""
        out: dict[str, float | None] = {}
        for nid, n in self.cluster.nodes.items() if self.cluster else ():
            both = user_sys_s(n.pid)
            out[nid] = None if both is None else both[1]
        return out

    def written_snapshot(self) -> dict[str, float | None]:
        """Megabytes the disk holding the cluster's files has written so far (``cpu_delta`` takes the difference):
        the nodes' writes as they reach it, with anything else on the machine that writes to it meanwhile."""
        return {"disk": device_written_mb(device_of(self.root))}

    @staticmethod
    def cpu_delta(before: dict[str, float | None], after: dict[str, float | None]) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for k, a in after.items():
            bk = before.get(k)
            out[k] = round(a - bk, 2) if a is not None and bk is not None else None
        return out

    # ---------------------------------------------------------------- scenarios

    def run_scenario(self, name: str, fn: Callable[[Bench], None]) -> None:
        """Run one scenario; record its wall time and the CPU other processes took meanwhile."""
        before = self.monitor.snapshot() if self.monitor else None
        try:
            fn(self)
        finally:
            if self.monitor is not None and before is not None:
                self._record_load(name, before)

    def _record_load(self, name: str, before: tuple[float, float, float]) -> None:
        assert self.monitor is not None
        self.monitor.sample()
        after = self.monitor.snapshot()
        wall = after[0] - before[0]
        foreign = after[1] - before[1]
        self.extra.setdefault("scenario_load", {})[name] = {
            "wall_s": round(wall, 1),
            "foreign_cpu_s": round(foreign, 1),
            "foreign_cores": round(foreign / wall, 2) if wall > 0 else None,
        }
        if wall > 0 and foreign / wall > FOREIGN_CORES_WARNING:
            self.say(
                f"  WARNING: processes outside this benchmark used {foreign / wall:.2f} of "
                f"{os.cpu_count()} cores during '{name}': its numbers are low"
            )
