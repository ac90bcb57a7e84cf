"""Processes the benchmark starts, and their clean-up: always by pid, never by name.

``stop_popen`` and ``stop_mp`` are what every ``finally`` block calls; they
only ever signal the pids of the objects handed to them.
"""

from __future__ import annotations

import multiprocessing.process
import os
import signal
import subprocess
import time
from collections.abc import Sequence

from bench.harness.runtime import NodeRuntime, this_checkout


def cpu_s(pid: int | None) -> float | None:
    """utime + stime of a process in seconds (/proc/<pid>/stat fields 14 and 15)."""
    both = user_sys_s(pid)
    return None if both is None else both[0] + both[1]


def user_sys_s(pid: int | None) -> tuple[float, float] | None:
    """(utime, stime) of a process in seconds: its own code, and the kernel's work for it (system calls such as
    an LMDB commit's writes of its pages and the writeback a node starts, page faults)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick
    except (OSError, IndexError, ValueError):
        return None


def device_of(path: str) -> str | None:
    """The name of the block device (as /proc/diskstats names it) holding ``path``; None on a file system
    without one (tmpfs, overlay) or a path that does not exist."""
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return None
    link = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"
    return os.path.basename(os.path.realpath(link)) if os.path.exists(link) else None


def device_written_mb(device: str | None) -> float | None:
    """Megabytes the block device ``device`` has written so far, whoever wrote them (its sectors written in
    /proc/diskstats: what reached the disk, not what processes asked for)."""
    if device is None:
        return None
    try:
        with open("/proc/diskstats", encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 9 and fields[2] == device:
                    return int(fields[9]) * 512 / 1e6
    except (OSError, ValueError):
        return None
    return None


def stop_popen(procs: Sequence[subprocess.Popen], grace_s: float = 15.0) -> None:
    """SIGTERM (graceful), then SIGKILL whatever has not exited after ``grace_s``; by pid, ours only."""
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def stop_mp(procs: Sequence[multiprocessing.process.BaseProcess], join_s: float = 5.0) -> None:
    """Wait up to ``join_s`` (for all together) for multiprocessing children told to stop, then SIGKILL
    the rest by pid."""
    deadline = time.monotonic() + join_s
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive() and proc.pid:
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(2)


def spawn_executors(
    addresses: list[str],
    root: str,
    prefix: str,
    queues: list[str],
    concurrency: int,
    count: int,
    runtime: NodeRuntime | None = None,
) -> list[subprocess.Popen]:
    """``count`` `raftsched executor` processes serving ``queues``; their logs go in ``root`` (the cluster's
    directory), their run outputs under the nodes' output directory (the only place nodes take logs from).
    ``runtime``: the raftsched they run (``--nodes-from``; this checkout's by default)."""
    from raftsched.cluster.node.config import load_config

    rt = runtime or this_checkout()
    outputs = load_config(os.path.join(root, "cluster.toml")).output_dir()
    procs = []
    for i in range(count):
        args = rt.command("executor", "--cluster", ",".join(addresses), "--executor-id", f"{prefix}-{i}",
                          "--concurrency", str(concurrency), "--output-dir", os.path.join(outputs, f"{prefix}-{i}"))  # fmt: skip
        for q in queues:
            args += ["--queue", q]
        with open(os.path.join(root, f"{prefix}-{i}.log"), "ab") as log:
            procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=rt.cwd, start_new_session=True))
    return procs
