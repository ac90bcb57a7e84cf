"""Snapshot writers on one disk take turns: one copy at a time per lock file.

Who calls: the snapshot writer thread (``raftsched.raft.snapshotter``), before it
writes. What it promises: of the writers given the same lock file, one
writes at a time, and one that just wrote and asks again comes after those
already waiting; a writer waiting for its turn can be called off
(``cancelled``), and a lock that cannot be opened (a read-only parent, say)
just means no turns.

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
import threading
import time
from typing import Callable, Iterator

from raftsched.raft.errors import RaftError
from raftsched.storage.disk.durable_files import FILE_MODE

log = logging.getLogger("raftsched.raft")

#: the lock file's name in the directory that holds the nodes' directories
LOCK_NAME = ".snapshot-turn.lock"
#: how often a writer waiting for its turn looks whether it was called off
TURN_NAP_S = 0.05
#: how long a writer that just had its turn waits before it asks for the next (``_after_courtesy``)
TURN_COURTESY_S = 0.2
#: when this process last let go of each lock file
_released: dict[str, float] = {}
_released_lock = threading.Lock()


class Cancelled(RaftError):
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
    _after_courtesy(lock_path, cancelled, fd)
    waiter = _Waiter(fd)
    if not waiter.wait(cancelled):
        raise Cancelled()
    try:
        yield time.monotonic() - began
    finally:
        os.close(fd)  # releases the lock
        with _released_lock:
            _released[lock_path] = time.monotonic()


def _after_courtesy(lock_path: str, cancelled: Callable[[], bool], fd: int) -> None:
    """A writer that let go of this lock less than ``TURN_COURTESY_S`` ago waits out the rest first: those
    blocked when it let go are woken at once, and get the turn before it asks again."""
    with _released_lock:
        until = _released.get(lock_path, float("-inf")) + TURN_COURTESY_S
    while time.monotonic() < until:
        if cancelled():
            os.close(fd)
            raise Cancelled()
        time.sleep(min(TURN_NAP_S, max(0.0, until - time.monotonic())))


class _Waiter:
    """Waits for the lock in a blocking ``flock`` on a thread of its own. Blocked waiters are woken when
    the holder lets go, and the holder asks again only ``TURN_COURTESY_S`` later, so they come first (with
    polling the one that just wrote won that race every time: the leader wrote twice while the others
    waited 83 s)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._guard = threading.Lock()
        self._got = threading.Event()
        self._gave_up = False
        threading.Thread(target=self._take, name="snapshot-turn", daemon=True).start()

    def _take(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        with self._guard:
            if self._gave_up:
                os.close(self._fd)  # called off meanwhile: let the next one have it
                return
            self._got.set()

    def wait(self, cancelled: Callable[[], bool]) -> bool:
        """Whether the lock was taken (False: ``cancelled()`` came first)."""
        while not self._got.wait(TURN_NAP_S):
            if cancelled():
                with self._guard:
                    if not self._got.is_set():
                        self._gave_up = True
                        return False
        return True
