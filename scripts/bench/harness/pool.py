"""The pool of client processes: ``procs`` spawned processes with ``threads`` threads each.

The parent hands task i to process i and waits for all answers, printing
progress every 2 s (read from a shared array each process updates). The
processes are stopped by pid in ``close`` (a ``None`` task, then SIGKILL).
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from collections.abc import Callable
from typing import Any

from bench.harness.processes import stop_mp
from bench.tasks.worker import worker_main

#: how long the client processes may take to start (spawn imports grpc afresh)
START_TIMEOUT_S = 60


class WorkerPool:
    """``procs`` client processes (spawn) with ``threads`` threads each; stopped by pid."""

    def __init__(self, procs: int, threads: int, say: Callable[[str], None]) -> None:
        self.procs, self.threads, self._say = procs, threads, say
        ctx = mp.get_context("spawn")
        self._tasks = [ctx.Queue() for _ in range(procs)]
        self._results = ctx.Queue()
        self._progress = ctx.Array("q", procs, lock=False)
        self._ps = [
            ctx.Process(
                target=worker_main,
                args=(i, threads, self._tasks[i], self._results, self._progress),
                daemon=True,
                name=f"bench-client-{i}",
            )
            for i in range(procs)
        ]
        for p in self._ps:
            p.start()
        self._wait_ready()

    def _wait_ready(self) -> None:
        ready: set[int] = set()
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(ready) < self.procs:
            try:
                i, msg = self._results.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"the client processes did not start within {START_TIMEOUT_S} s") from None
            if msg.get("ready"):
                ready.add(i)

    def pids(self) -> list[int]:
        return [p.pid for p in self._ps if p.pid is not None]

    def progress(self) -> int:
        return int(sum(self._progress[:]))

    def run(self, tasks: list[dict[str, Any]], label: str, timeout: float, total: int | None = None) -> list[dict[str, Any]]:
        """Send task i to process i; wait for all answers, printing progress every 2 s."""
        assert len(tasks) <= self.procs
        for i, t in enumerate(tasks):
            self._tasks[i].put(t)
        out = self._collect(len(tasks), label, timeout, total)
        for i, res in out.items():
            if "fatal" in res:
                raise RuntimeError(f"{label}: client process {i} failed:\n{res['fatal']}")
            if res.get("thread_errors"):
                self._say(f"  {label}: a client thread failed:\n{res['thread_errors'][0]}")
        return [out[i] for i in sorted(out)]

    def _collect(self, n: int, label: str, timeout: float, total: int | None) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        deadline = time.monotonic() + timeout
        last_print = time.monotonic()
        while len(out) < n:
            try:
                i, res = self._results.get(timeout=0.5)
                out[i] = res
            except queue.Empty:
                pass
            if time.monotonic() - last_print >= 2.0:
                last_print = time.monotonic()
                self._say(f"  {label}: {self.progress()}{'/' + str(total) if total else ''} done")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{label}: the client processes did not answer within {timeout:.0f} s")
            dead = [p.name for p in self._ps if not p.is_alive()]
            if dead:
                raise RuntimeError(f"{label}: client process(es) died: {', '.join(dead)}")
        return out

    def close(self) -> None:
        for q in self._tasks:
            try:
                q.put_nowait(None)
            except (OSError, ValueError, queue.Full):  # a closed queue: the process is killed below
                continue
        stop_mp(self._ps, join_s=3.0)


def merge_errors(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The client processes' error counts added up, with the first message of each code."""
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for r in results:
        e = r.get("errors", {})
        for k, v in e.get("counts", {}).items():
            counts[k] = counts.get(k, 0) + v
        for k, v in e.get("first", {}).items():
            first.setdefault(k, v)
    return {"counts": counts, "first": first} if counts else {}
