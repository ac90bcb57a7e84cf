"""The processes of a local cluster as ``launch_cluster.py`` keeps them: started in their own
sessions, recognised by their command line (a reused pid is never signalled), stopped with
progress lines.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass


@dataclass
class Recorded:
    name: str
    pid: int


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped by its parent) is not running
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def ours(pid: int, config_path: str) -> bool:
    """The process runs ``raftsched`` with this cluster's config (so the pid was not reused)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode("utf-8", "replace").split("\0")
    except OSError:
        return True  # no /proc: trust the record
    return "raftsched.cluster.app.main" in args and config_path in args


def port_in_use(port: int) -> bool:
    """Whether something holds ``port`` on 127.0.0.1 — a listener, or a socket bound to it — as a node starting
    there would find it. Connections still closing (TIME_WAIT, for a minute after a cluster stopped) do not
    count: the nodes bind with SO_REUSEADDR, and so does this check."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def spawn_executor(cmd: list[str], log_path: str, cwd: str) -> int:
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)
    return proc.pid


def stop_all(procs: list[Recorded], grace_s: float) -> None:
    """SIGTERM each, say when each has stopped (and who is still waited for every 2 s); SIGKILL what
    still runs after ``grace_s``."""
    if not procs:
        return
    started = time.monotonic()
    for p in procs:
        try:
            os.kill(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    print(f"  sent SIGTERM to {', '.join(f'{p.name} (pid {p.pid})' for p in procs)}", flush=True)
    waiting = list(procs)
    next_note = started + 2.0
    while waiting:
        now = time.monotonic()
        for p in [p for p in waiting if not alive(p.pid)]:
            print(f"  {p.name} stopped ({now - started:.1f} s)", flush=True)
            waiting.remove(p)
        if not waiting:
            return
        if now - started > grace_s:
            for p in waiting:
                print(f"  {p.name} still runs after {grace_s:.0f} s: SIGKILL", flush=True)
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            return
        if now >= next_note:
            print(f"  waiting for {', '.join(p.name for p in waiting)} ({now - started:.0f} s)", flush=True)
            next_note += 2.0
        time.sleep(0.1)


def _pids_path(root: str) -> str:
    return os.path.join(root, "pids.json")


def read_pids(root: str) -> dict[str, int]:
    try:
        with open(_pids_path(root), encoding="utf-8") as f:
            return {k: int(v) for k, v in json.load(f).items()}
    except FileNotFoundError:
        return {}


def write_pids(root: str, pids: dict[str, int]) -> None:
    with open(_pids_path(root), "w", encoding="utf-8") as f:
        json.dump(pids, f)


def running(root: str) -> dict[str, int]:
    """The recorded processes that still run (and are this cluster's: a reused pid is not)."""
    config = os.path.join(root, "cluster.toml")
    return {name: pid for name, pid in read_pids(root).items() if alive(pid) and ours(pid, config)}
