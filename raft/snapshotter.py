"""Snapshots written in the background through pysyncobj's serializer hooks.

pysyncobj calls ``serialize(tmp, raft_data)`` on its tick thread and renames
``tmp`` onto the dump file as soon as it returns; with a ``serializeChecker``
it waits for SUCCESS before it compacts the log. We use that to keep the tick
thread free:

1. ``serialize`` forks. The child owns a copy-on-write image of the state at
   exactly ``raft_data``'s index, encodes it and writes ``<dump>.next`` with
   fsync, then exits. The parent makes ``tmp`` a hard link of the current
   dump, so pysyncobj's rename changes nothing, and returns at once: the
   tick thread pauses only for the fork.
2. ``check`` (the checker) reaps the child; on success it renames
   ``<dump>.next`` onto the dump and answers SUCCESS, and only then does
   pysyncobj drop the log it covers.

The child runs at the lowest CPU priority: every node reaches the snapshot
threshold at about the same index, and three children encoding a large state
at full priority would starve the nodes' Raft threads on a small machine.

A crash at any point leaves a valid dump plus the log after it (the LMDB
log trims itself to the dump on open). The first snapshot of a node, with no
dump to link yet, is written synchronously. The child touches no lock, no
socket and no logging, and it never collects garbage: it closes every inherited
descriptor (a SIGKILLed node's child must not keep its ports), asks the kernel
to kill it with its parent, encodes, writes and ``os._exit``s.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import signal
import time
from typing import Any, Callable

from pysyncobj.config import SERIALIZER_STATE

from raft.durable_files import fsync_dir
from raft.snapshot_file import write_snapshot

log = logging.getLogger("raftsched.raft")


class Snapshotter:
    def __init__(self, dump_file: str, encode_state: Callable[[], bytes], fork: bool = True) -> None:
        self.dump_file = dump_file
        self._encode = encode_state
        self.fork = fork and hasattr(os, "fork")
        self._pid: int | None = None
        self._pending: tuple[int, float] | None = None
        self._sync_done = False
        self.last_index = 0
        self.last_seconds = 0.0
        self.last_pause_seconds = 0.0
        self.max_pause_seconds = 0.0
        #: called on the tick thread with (index, seconds) after each snapshot is written (the metrics)
        self.on_written: Callable[[int, float], None] | None = None

    def serialize(self, tmp_path: str, raft_data: Any) -> None:
        """pysyncobj's serializer hook (tick thread)."""
        started = time.monotonic()
        index = int(raft_data[0][1])
        if not self.fork or not os.path.exists(self.dump_file):
            write_snapshot(tmp_path, raft_data, self._encode())
            self._sync_done = True
            self._finished(index, started, time.monotonic() - started)
            return
        if os.path.lexists(tmp_path):
            os.unlink(tmp_path)
        os.link(self.dump_file, tmp_path)  # pysyncobj's rename of tmp onto the dump is then a no-op
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: a frozen image of the state at `index`
            code = 1
            try:
                # No garbage collection here: a collection would finalize garbage the parent left,
                # gRPC objects among it, whose C code would run without the threads it expects.
                gc.disable()
                _die_with(parent)
                # Let go of every inherited descriptor (the gRPC and Raft listening sockets among
                # them): a node SIGKILLed while its child writes must be able to bind them again.
                os.closerange(3, _max_fd())
                os.nice(19)  # on a small machine the node, not its snapshot, gets the CPU
                write_snapshot(self.dump_file + ".next", raft_data, self._encode())
                code = 0
            finally:
                os._exit(code)
        self._pid = pid
        self._pending = (index, started)
        self._note_pause(time.monotonic() - started)

    def check(self) -> int:
        """pysyncobj's serializeChecker (tick thread)."""
        if self._sync_done:
            self._sync_done = False
            return SERIALIZER_STATE.SUCCESS
        if self._pid is None:
            return SERIALIZER_STATE.NOT_SERIALIZING
        pid, status = os.waitpid(self._pid, os.WNOHANG)
        if pid == 0:
            return SERIALIZER_STATE.SERIALIZING
        self._pid = None
        index, started = self._pending or (0, time.monotonic())
        if status != 0:
            why = f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit status {os.WEXITSTATUS(status)}"
            log.error("background snapshot at index %d failed (%s); the log is kept", index, why)
            return SERIALIZER_STATE.FAILED
        os.replace(self.dump_file + ".next", self.dump_file)
        fsync_dir(os.path.dirname(self.dump_file) or ".")
        self._finished(index, started, 0.0)
        return SERIALIZER_STATE.SUCCESS

    def _note_pause(self, pause: float) -> None:
        self.last_pause_seconds = pause
        self.max_pause_seconds = max(self.max_pause_seconds, pause)

    def _finished(self, index: int, started: float, pause: float) -> None:
        self.last_index = index
        self.last_seconds = time.monotonic() - started
        if pause:
            self._note_pause(pause)
        log.info(
            "snapshot at index %d written in %.3f s (tick thread paused %.3f s)",
            index,
            self.last_seconds,
            self.last_pause_seconds,
        )
        if self.on_written is not None:
            try:
                self.on_written(index, self.last_seconds)
            except Exception:  # a hook must never fail a snapshot
                log.exception("snapshot hook failed")


def _die_with(parent: int) -> None:
    """Have the kernel SIGKILL this child when its parent dies (Linux), and leave now if it already has:
    a snapshot nobody will rename is wasted work, and the child must not outlive its node."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def _max_fd() -> int:
    try:
        return int(os.sysconf("SC_OPEN_MAX"))
    except (OSError, ValueError):
        return 65536


PR_SET_PDEATHSIG = 1
