"""One end-to-end measurement on a backlog: how fast processes turn PENDING runs into SUCCEEDED ones.

Shared by the scenarios that compare two set-ups on fresh clusters with the
same backlog (``metrics_cost``, ``worker_vs_executor``): a follower's
SUCCEEDED count is polled (``StatusPoller``), the processes are started, and
once the count grows the rate over ``lease_measure_s`` (1 s of warm-up left
out) is the figure.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any

from bench import stats as st
from bench.harness.common import r1
from bench.harness.processes import stop_popen
from bench.harness.watch import StatusPoller

#: how long the processes get to complete a first run
FIRST_RUN_S = 30.0


def backlog_rate(
    follower_grpc: str, backlog: int, measure_s: float, start: Callable[[], list[subprocess.Popen]]
) -> dict[str, Any]:
    """``runs_per_s`` of the processes ``start()`` launches (None if none completed), ``backlog_left``, and a
    ``warning`` when the backlog ran out while measuring. The processes are stopped before it returns."""
    counter = StatusPoller(follower_grpc, lambda status: status.runs.succeeded)
    procs: list[subprocess.Popen] = []
    try:
        time.sleep(0.3)  # a first sample before any process runs
        procs = start()
        deadline = time.time() + FIRST_RUN_S
        while not counter.grown() and time.time() < deadline:
            time.sleep(0.1)
        began = time.time() + 1.0
        until = began + measure_s
        time.sleep(max(0.0, until - time.time()) + 0.2)
        rate = st.counter_rate(counter.samples, began, until) if counter.grown() else None
        left = backlog - counter.latest()
        out: dict[str, Any] = {"runs_per_s": r1(rate), "backlog_left": left}
        if left <= 0:
            out["warning"] = "the backlog ran out during the measurement: the rate is low"
        return out
    finally:
        stop_popen(procs)
        counter.stop()
