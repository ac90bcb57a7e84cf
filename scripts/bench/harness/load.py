"""How much CPU processes that are not ours take while the benchmark runs (others' tests, ...).

The machine is shared: a scenario whose numbers are low because something
else was busy says so (``Bench.run_scenario`` warns above 0.2 cores).
"""

from __future__ import annotations

import os
import threading
import time


class LoadMonitor:
    """Samples, every second, how much CPU processes that are not ours used.

    foreign = busy jiffies of the whole machine (/proc/stat) - CPU of this process and its
    descendants (/proc/<pid>/stat). A descendant that exits loses its last second: a slight
    overestimate of the foreign share around kills.
    """

    def __init__(self) -> None:
        self._tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.foreign_cpu_s = 0.0
        self.busy_cpu_s = 0.0
        self._last_busy: float | None = None
        self._last_ours: dict[int, float] = {}
        self._thread = threading.Thread(target=self._run, name="load-monitor", daemon=True)

    def start(self) -> LoadMonitor:
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _busy(self) -> float | None:
        try:
            with open("/proc/stat", encoding="utf-8") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return (sum(fields[:8]) - idle) / self._tick

    def _processes(self) -> tuple[dict[int, int], dict[int, float]]:
        """Every process's parent pid and CPU seconds so far."""
        parent: dict[int, int] = {}
        cpu: dict[int, float] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", encoding="utf-8") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            pid = int(name)
            parent[pid] = int(fields[1])
            cpu[pid] = (int(fields[11]) + int(fields[12])) / self._tick
        return parent, cpu

    def _ours(self) -> dict[int, float]:
        """CPU seconds of this process and each of its descendants."""
        parent, cpu = self._processes()
        me = os.getpid()
        ours: dict[int, float] = {}
        for pid, used in cpu.items():
            p, hops = pid, 0
            while p not in (0, 1) and hops < 64:
                if p == me:
                    ours[pid] = used
                    break
                p, hops = parent.get(p, 0), hops + 1
        return ours

    def sample(self) -> None:
        """Add the CPU used since the last sample, by the machine and by processes not ours."""
        busy, ours = self._busy(), self._ours()
        with self._lock:
            if busy is not None and self._last_busy is not None:
                ours_delta = sum(max(0.0, c - self._last_ours.get(pid, 0.0)) for pid, c in ours.items())
                d_busy = max(0.0, busy - self._last_busy)
                self.busy_cpu_s += d_busy
                self.foreign_cpu_s += max(0.0, d_busy - ours_delta)
            self._last_busy, self._last_ours = busy, ours

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.sample()

    def snapshot(self) -> tuple[float, float, float]:
        """(monotonic time, foreign CPU s so far, busy CPU s so far)."""
        with self._lock:
            return time.monotonic(), self.foreign_cpu_s, self.busy_cpu_s
