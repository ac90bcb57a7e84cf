"""Snapshot writers on one disk take turns: one copy at a time per lock file.

Who calls: the snapshot writer thread (``raft.snapshotter``), before it
writes. What it promises: of the writers given the same lock file, one
writes at a time; a writer waits for its turn in short naps, so it can be
called off (``cancelled``) while it waits, and a lock that cannot be opened
(a read-only parent, say) just means no turns.

Why: every node applies the same log, so every node reaches
``snapshot_min_entries`` at the same index and starts its snapshot in the
same second. Nodes on separate machines each write to their own disk; nodes
sharing one disk (a local cluster, the benchmark's cluster) write three
copies at once, and each node's Raft log fsyncs queue behind all three.
The composition root gives the nodes of one data directory the same lock
file (``<data dir>/.snapshot-turn.lock``), so they write one after another.
The lock is ``flock``: the kernel releases it when its holder dies, even by
SIGKILL.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from typing import Callable, Iterator

from raft.durable_files import FILE_MODE

log = logging.getLogger("raftsched.raft")

#: the lock file's name in the directory that holds the nodes' directories
LOCK_NAME = ".snapshot-turn.lock"
#: how often a writer waiting for its turn looks again
TURN_NAP_S = 0.05


class Cancelled(Exception):
    """The writer was called off while it waited for its turn."""


@contextlib.contextmanager
def turn(lock_path: str | None, cancelled: Callable[[], bool] = lambda: False) -> Iterator[float]:
    """Hold the turn of ``lock_path`` (None: no turns) for the body; yields the seconds waited for it.
    Raises ``Cancelled`` if ``cancelled()`` becomes true while waiting."""
    if lock_path is None:
        yield 0.0
        return
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    except OSError as exc:
        log.warning("snapshots do not take turns (%s: %s)", lock_path, exc.strerror)
        yield 0.0
        return
    began = time.monotonic()
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if cancelled():
                    raise Cancelled() from None
                time.sleep(TURN_NAP_S)
        yield time.monotonic() - began
    finally:
        os.close(fd)  # releases the lock
