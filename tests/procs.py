"""Finding a run's processes by a unique marker in their command line (``/proc``), for the kill tests."""

from __future__ import annotations

import os
import random


def marker() -> str:
    """A number no other process's command line holds: used as a ``sleep`` duration, it names a run's processes."""
    return str(random.randint(10**8, 10**9 - 1))


def processes_with(mark: str) -> list[tuple[int, str]]:
    """(pid, command line) of every living process whose command line contains ``mark`` (zombies have none)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\x00", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if mark in cmdline:
            found.append((int(name), cmdline.strip()))
    return found


def stubborn_command(mark: str) -> str:
    """A shell command whose background child ignores SIGTERM (its sleep inherits that), plus its own sleep."""
    return f"sh -c 'trap \"\" TERM; sleep {mark}' & sleep {mark}; echo never reached"
