"""Big files written and read beside a Raft log that fsyncs before every answer.

Who calls: the snapshot writer (``raftsched.raft.snapshot_file``), a follower receiving
the leader's snapshot (``raftsched.raft.pysyncobj_patches``), the state environment's
install of a received copy (``raftsched.storage.lmdb_state``) and the leader sending its
snapshot (``raftsched.raft.pysyncobj_patches``). What it promises:

* ``PacedWrites``: of a file being written, at most ``sync_every`` bytes are
  ever waiting for the disk. Every ``sync_every`` bytes it syncs them and then
  leaves the disk to others for as long as the sync took (at most
  ``max_yield_s``): the writer takes at most half the disk's time, so a Raft
  log's fsync queues behind one piece at most, never behind gigabytes.
  Without it the kernel gathers the dirty pages and writes them in bursts of
  hundreds of megabytes: a 10M-job node receiving a 3.5 GB snapshot, then
  installing it, held the other nodes' log fsyncs (and their fire lag) for
  up to 0.8 s in such bursts. ``drop=True`` also drops what was synced from
  the page cache (a snapshot nobody reads soon); without it the pages stay
  (a received snapshot is checked and installed right after).
* ``Writeback``: a thread that starts the writeback of a file's dirty pages
  every ``period_s`` (``sync_file_range(SYNC_FILE_RANGE_WRITE)``: it waits
  for nothing and commits no journal), for a file written without syncs —
  the state environment, whose commits are not fsynced (the Raft log is).
  Left to the kernel, its pages gathered for 30 s or up to the
  dirty-background limit and went out in bursts of a gigabyte; each burst
  held every log fsync on the disk for 200-550 ms (the 10M-job run,
  three nodes dirtying about 50 MB/s together). RocksDB's ``bytes_per_sync``
  does the same for its files.
* ``ReadAhead``: a thread that reads a file ahead of its consumer, up to
  ``window`` bytes past the consumer's position, so the consumer's reads are
  served from the page cache. pysyncobj reads the snapshot it sends on its
  tick thread, 64 KiB at a time, from a file the writer dropped from the
  cache: each read could wait behind the disk's queue while nothing else on
  that thread (heartbeats, commits, firing) moved.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import threading
import time
from typing import Callable

#: the most bytes of a file written but not yet synced
SYNC_EVERY = 4 << 20
#: the longest pause after one synced piece
MAX_YIELD_S = 0.5
#: how far ahead of its consumer ``ReadAhead`` reads
READ_AHEAD_WINDOW = 64 << 20
_READ_PIECE = 1 << 20
#: how long ``ReadAhead`` waits for its consumer to move before it looks again
_READ_AHEAD_NAP_S = 0.02

#: how often ``Writeback`` starts the writeback of what was written since
WRITEBACK_PERIOD_S = 0.2
_SYNC_FILE_RANGE_WRITE = 2

log = logging.getLogger("raftsched.raft")


@functools.cache  # looked up once: ``Writeback`` calls it every period
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    try:
        call = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):  # not Linux
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


def start_writeback(fd: int) -> bool:
    """Start writing ``fd``'s dirty pages to disk without waiting for them. Whether the call exists and worked."""
    call = _sync_file_range()
    return call is not None and call(fd, 0, 0, _SYNC_FILE_RANGE_WRITE) == 0


def sync_and_yield(fd: int, start: int, length: int, drop: bool = True, max_yield_s: float = MAX_YIELD_S) -> float:
    """Sync ``fd``'s data, drop ``[start, start + length)`` from the page cache if ``drop``, then sleep as long
    as the sync took (at most ``max_yield_s``). The seconds the sync took."""
    began = time.monotonic()
    os.fdatasync(fd)
    took = time.monotonic() - began
    if drop and hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, start, length, os.POSIX_FADV_DONTNEED)
    if max_yield_s > 0:
        time.sleep(min(took, max_yield_s))
    return took


class PacedWrites:
    """Counts what is written to one file and syncs it every ``sync_every`` bytes (see the module docstring)."""

    def __init__(
        self, sync_every: int = SYNC_EVERY, drop: bool = False, max_yield_s: float = MAX_YIELD_S, start: int = 0
    ) -> None:
        self.sync_every = sync_every
        self.drop = drop
        self.max_yield_s = max_yield_s
        self.start = start  # the file offset the writes begin at
        self.written = 0  # bytes written so far, from ``start``
        self._unsynced = 0
        self.syncs = 0

    def wrote(self, fd: int, n: int) -> None:
        """``n`` more bytes were written to ``fd`` (a buffered file: flush it first)."""
        self.written += n
        self._unsynced += n
        if self._unsynced >= self.sync_every:
            self.sync(fd)

    def sync(self, fd: int) -> None:
        """Sync what is not yet synced (and yield), whatever its size."""
        if self._unsynced:
            sync_and_yield(fd, self.start + self.written - self._unsynced, self._unsynced, self.drop, self.max_yield_s)
            self.syncs += 1
            self._unsynced = 0


class Writeback:
    """Starts the writeback of ``path``'s dirty pages every ``period_s`` in a daemon thread, until ``stop``.
    The file is opened afresh each time: it may be replaced (an install renames a new one over it)."""

    def __init__(self, path: str, period_s: float = WRITEBACK_PERIOD_S) -> None:
        self.path = path
        self.period_s = period_s
        self.rounds = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if _sync_file_range() is not None:
            self._thread = threading.Thread(target=self._run, name="state-writeback", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except OSError:
                continue  # being replaced
            try:
                start_writeback(fd)
                self.rounds += 1
            finally:
                os.close(fd)


class ReadAhead:
    """Reads ``fd`` (a duplicate is taken: the caller may close its own) from ``consumed()`` up to ``window``
    bytes ahead, in a daemon thread, until the end of the file or until ``alive()`` is false."""

    def __init__(
        self, fd: int, consumed: Callable[[], int], alive: Callable[[], bool], window: int = READ_AHEAD_WINDOW, name: str = ""
    ) -> None:
        self._fd = os.dup(fd)
        self._size = os.fstat(self._fd).st_size
        self._consumed = consumed
        self._alive = alive
        self._window = window
        self.read = 0  # the end of what this thread has read
        self._thread = threading.Thread(target=self._run, name=name or "read-ahead", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            while self.read < self._size and self._alive():
                self.read = max(self.read, self._consumed())
                target = min(self._size, self._consumed() + self._window)
                if self.read >= target:
                    time.sleep(_READ_AHEAD_NAP_S)
                    continue
                piece = os.pread(self._fd, min(_READ_PIECE, target - self.read), self.read)
                if not piece:
                    return
                self.read += len(piece)
        except OSError as exc:  # only an optimisation: the consumer reads what it needs itself
            log.debug("reading ahead stopped: %s", exc)
        finally:
            os.close(self._fd)
