"""Scenario ``metrics_cost`` (opt-in: ``--scenarios metrics_cost``): what the HTTP endpoint and its
metrics cost end to end.

The e2e measurement of ``scenarios.executors`` (4 `raftsched executor`
processes, no-op handler, SUCCEEDED per second on a follower) runs on fresh
3-node clusters, alternately with the HTTP endpoint **off** (no ``http`` in
``[[nodes]]``: no metrics are kept at all) and **on**, with every node's
``/metrics`` and ``/healthz`` fetched every second meanwhile (a Prometheus'
scrape). The rounds go off, on, on, off (``ROUNDS``), so that a drift of the
machine during the run weighs on both sides alike; each round is a fresh
cluster with the same backlog (``backlog`` one-shot jobs due at once on one
queue, created through CreateJobs before the executors start).

``e2e_runs_per_s_metrics``: ``off`` and ``on`` (the mean of their rounds,
runs/s) and ``cost_pct`` (how much slower on is, in %; the target is under
5). ``details.metrics_cost`` has every round and the scrapes' sizes and times.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.request
from typing import Any

from bench.harness.common import r1
from bench.harness.context import Bench
from bench.harness.e2e import backlog_rate, cluster_with_backlog
from bench.harness.processes import spawn_executors

ROUNDS = ("off", "on", "on", "off")
QUEUE = "bench-metrics"
EXECUTORS = 4
CONCURRENCY = 32
#: backlog per round: enough for the warm-up and the measurement at ~5,000 runs/s
RUNS_PER_MEASURED_S = 5000


class Scraper:
    """Fetches every node's /metrics and /healthz once a second, as Prometheus and a probe would."""

    def __init__(self, urls: list[str]) -> None:
        self._urls = urls
        self.fetches = 0
        self.errors = 0
        self.bytes = 0
        self.seconds = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for url in self._urls:
                started = time.perf_counter()
                try:
                    with urllib.request.urlopen(url, timeout=2) as answer:
                        self.bytes += len(answer.read())
                    self.fetches += 1
                    self.seconds += time.perf_counter() - started
                except OSError:
                    self.errors += 1
            self._stop.wait(1.0)

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(5)
        metrics = max(1, self.fetches // 2)
        return {
            "fetches": self.fetches,
            "errors": self.errors,
            "mean_fetch_ms": r1(1000 * self.seconds / self.fetches, 2) if self.fetches else None,
            "mean_metrics_bytes": self.bytes // metrics,
        }


def _round(b: Bench, i: int, mode: str, backlog: int) -> dict[str, Any]:
    root = os.path.join(b.root, f"metrics-{i}-{mode}")
    scraper = None
    with cluster_with_backlog(root, b.args.nodes_extra_config, backlog, QUEUE, http=mode == "on") as (cluster, follower):
        if mode == "on":
            scraper = Scraper([cluster.http_url(n, p) for n in cluster.nodes for p in ("/metrics", "/healthz")])
        try:
            measured = backlog_rate(
                follower,
                backlog,
                b.profile.lease_measure_s,
                lambda: spawn_executors(cluster.addresses, root, f"metrics-{mode}", [QUEUE], CONCURRENCY, EXECUTORS),
            )
        finally:
            if scraper is not None:
                b.extra.setdefault("metrics_cost_scrapes", []).append(scraper.stop())
        return {"mode": mode, **measured}


def scenario_metrics_cost(b: Bench) -> None:
    backlog = int(RUNS_PER_MEASURED_S * (b.profile.lease_measure_s + 3.0))
    rounds = []
    for i, mode in enumerate(ROUNDS):
        b.say(f"metrics_cost: round {i + 1}/{len(ROUNDS)}, HTTP endpoint {mode}: {backlog} runs for 4 executors")
        rounds.append(_round(b, i, mode, backlog))
        b.say(f"  {rounds[-1]}")
    means = {}
    for mode in ("off", "on"):
        rates = [r["runs_per_s"] for r in rounds if r["mode"] == mode and r["runs_per_s"] is not None]
        means[mode] = r1(sum(rates) / len(rates)) if len(rates) == ROUNDS.count(mode) else None
    off, on = means["off"], means["on"]
    cost = r1(100.0 * (off - on) / off, 2) if off and on is not None else None
    b.results["e2e_runs_per_s_metrics"] = {"off": off, "on": on, "cost_pct": cost}
    b.extra["metrics_cost"] = {"rounds": rounds, "scrapes": b.extra.pop("metrics_cost_scrapes", [])}
    b.notes["e2e_runs_per_s_metrics"] = (
        f"e2e runs/s (as e2e_runs_per_s: {EXECUTORS} executors x {CONCURRENCY}, no-op, a follower's SUCCEEDED count) on "
        f"fresh 3-node clusters, rounds {', '.join(ROUNDS)}: 'off' without the HTTP endpoint (no metrics kept), "
        "'on' with it and every node's /metrics and /healthz fetched every second; cost_pct = (off - on) / off "
        "(target under 5)" + ("" if cost is not None else "; a round measured nothing (details.metrics_cost)")
    )
    b.say(f"  e2e_runs_per_s_metrics: {b.results['e2e_runs_per_s_metrics']}")
