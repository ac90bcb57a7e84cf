"""Scenario ``node_stats`` (always last on the cluster): each node's RSS and CPU seconds (``node_rss_mb``, ``node_cpu_s``)."""

from __future__ import annotations

import os

from bench.harness.context import Bench


def _read_node(pid: int, tick: int) -> tuple[float | None, float | None, float | None]:
    """(RSS MB, peak RSS MB, CPU s) of one process from /proc."""
    rss = hwm = None
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = round(int(line.split()[1]) / 1024, 1)
            elif line.startswith("VmHWM:"):
                hwm = round(int(line.split()[1]) / 1024, 1)
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return rss, hwm, round((int(fields[11]) + int(fields[12])) / tick, 2)  # utime, stime (fields 14, 15)


def scenario_node_stats(b: Bench) -> None:
    tick = os.sysconf("SC_CLK_TCK")
    rss: dict[str, float | None] = {}
    hwm: dict[str, float | None] = {}
    cpu: dict[str, float | None] = {}
    for nid, node in b.nodes.items():
        pid = node.pid
        rss[nid] = hwm[nid] = cpu[nid] = None
        if pid is None or not node.alive():
            continue
        try:
            rss[nid], hwm[nid], cpu[nid] = _read_node(pid, tick)
        except OSError:
            pass
    b.results["node_rss_mb"] = rss
    b.results["node_cpu_s"] = cpu
    b.extra["node_peak_rss_mb"] = hwm
    restarted = sorted({e["node"] for e in b.timeline if e["event"] == "restart"})
    if restarted:
        b.notes["node_cpu_s"] = (
            f"{', '.join(restarted)} restarted during the failover scenario: their figures count from the restart"
        )
    b.say(f"nodes: RSS MB {rss}, CPU s {cpu}")
