"""Scenario ``worker_vs_executor``: runs per second of a ``raftsched.Worker`` against ``raftsched executor``.

The same end-to-end measurement as ``e2e_runs_per_s`` (``PROCESSES``
processes of ``CONCURRENCY`` slots, a follower's SUCCEEDED count, 1 s of
warm-up left out) on fresh 3-node clusters with the same backlog (one-shot
jobs of type ``noop`` due at once on one queue, created through CreateJobs
before the processes start), alternately served by `raftsched executor`
(its built-in no-op handler) and by `raftsched worker bench.noop_worker:worker`
(a Worker whose ``noop`` task does nothing: the SDK's typed payloads,
results and renewals on top of the same executor). The rounds go executor,
worker, worker, executor (``ROUNDS``), so that a drift of the machine
weighs on both sides alike.

``worker_vs_executor``: ``executor`` and ``worker`` (the mean of their
rounds, runs/s) and ``ratio`` (worker / executor; the target is at least
0.9). ``details.worker_vs_executor`` has every round.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from bench.harness.common import REPO_ROOT, r1
from bench.harness.context import Bench
from bench.harness.e2e import backlog_rate, cluster_with_backlog
from bench.harness.processes import spawn_executors
from bench.scenarios.metrics_cost import RUNS_PER_MEASURED_S

ROUNDS = ("executor", "worker", "worker", "executor")
QUEUE = "bench-worker"
PROCESSES = 4
CONCURRENCY = 32
#: the ratio the SDK's worker must reach
TARGET = 0.9


def spawn_workers(
    addresses: list[str], root: str, prefix: str, queue: str, concurrency: int, count: int
) -> list[subprocess.Popen]:
    """``count`` `raftsched worker bench.noop_worker:worker` processes serving ``queue`` (the flags of
    ``spawn_executors``); their logs go in ``root``."""
    from raftsched.cluster.node.config import load_config

    outputs = load_config(os.path.join(root, "cluster.toml")).output_dir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (os.path.join(REPO_ROOT, "scripts"), os.environ.get("PYTHONPATH", "")) if p),
    }
    procs = []
    for i in range(count):
        args = [sys.executable, "-m", "raftsched.cluster.app.main", "worker", "bench.noop_worker:worker",
                "--cluster", ",".join(addresses), "--executor-id", f"{prefix}-{i}", "--concurrency", str(concurrency),
                "--queue", queue, "--output-dir", os.path.join(outputs, f"{prefix}-{i}")]  # fmt: skip
        with open(os.path.join(root, f"{prefix}-{i}.log"), "ab") as log:
            procs.append(
                subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=env, start_new_session=True)
            )
    return procs


def _round(b: Bench, i: int, mode: str, backlog: int) -> dict[str, Any]:
    root = os.path.join(b.root, f"workers-{i}-{mode}")
    with cluster_with_backlog(root, b.args.nodes_extra_config, backlog, QUEUE) as (cluster, follower):
        spawn = spawn_workers if mode == "worker" else _spawn_executors
        measured = backlog_rate(
            follower,
            backlog,
            b.profile.lease_measure_s,
            lambda: spawn(cluster.addresses, root, f"{mode}-{i}", QUEUE, CONCURRENCY, PROCESSES),
        )
        return {"mode": mode, **measured}


def _spawn_executors(
    addresses: list[str], root: str, prefix: str, queue: str, concurrency: int, count: int
) -> list[subprocess.Popen]:
    return spawn_executors(addresses, root, prefix, [queue], concurrency, count)


def scenario_worker_vs_executor(b: Bench) -> None:
    backlog = int(RUNS_PER_MEASURED_S * (b.profile.lease_measure_s + 3.0))
    rounds = []
    for i, mode in enumerate(ROUNDS):
        b.say(f"worker_vs_executor: round {i + 1}/{len(ROUNDS)}, {PROCESSES} {mode} processes: {backlog} runs")
        rounds.append(_round(b, i, mode, backlog))
        b.say(f"  {rounds[-1]}")
    means: dict[str, float | None] = {}
    for mode in ("executor", "worker"):
        rates = [r["runs_per_s"] for r in rounds if r["mode"] == mode and r["runs_per_s"] is not None]
        means[mode] = r1(sum(rates) / len(rates)) if len(rates) == ROUNDS.count(mode) else None
    executor, worker = means["executor"], means["worker"]
    ratio = r1(worker / executor, 3) if executor and worker is not None else None
    b.results["worker_vs_executor"] = {"executor": executor, "worker": worker, "ratio": ratio}
    b.extra["worker_vs_executor"] = {"rounds": rounds}
    b.notes["worker_vs_executor"] = (
        f"e2e runs/s ({PROCESSES} processes x {CONCURRENCY} slots, a follower's SUCCEEDED count) on fresh 3-node "
        f"clusters, rounds {', '.join(ROUNDS)}: 'executor' = `raftsched executor` with its no-op handler, 'worker' = "
        f"`raftsched worker` running a raftsched.Worker whose noop task does nothing; ratio = worker / executor "
        f"(target at least {TARGET})" + ("" if ratio is not None else "; a round measured nothing (details.worker_vs_executor)")
    )
    b.say(f"  worker_vs_executor: {b.results['worker_vs_executor']}")
