"""Snapshots written in a background thread through pysyncobj's serializer hooks: a copy of the state, no fork.

pysyncobj calls ``serialize(tmp, raft_data)`` on its tick thread when the
log is long enough; with a ``serializeChecker`` it waits for SUCCESS before
it compacts the log. We use that to keep the tick thread free:

1. ``serialize`` asks the state machine to pin its state as committed now
   (``open_copy``: for the LMDB state, a read transaction at exactly
   ``raft_data``'s index — every entry is committed before the next one is
   applied, and serialize runs between entries), starts a thread that writes
   ``<dump>.next`` (``raftsched.raft.snapshot_file``: the header, then the copy, then
   fsync) and returns at once. It leaves no ``tmp`` file: the patched rename
   (``raftsched.raft.pysyncobj_patches``) then has nothing to move.
2. ``check`` (the checker, tick thread) answers SERIALIZING while the thread
   runs; then renames ``<dump>.next`` onto the dump (durably) and answers
   SUCCESS, and only then does pysyncobj drop the log it covers. On the
   leader, the rename waits (at most ``MAX_HOLD_S``) while a connected
   follower still needs entries the new snapshot covers (``behind(index)``:
   its log matches below it, or the dump is being sent to it). pysyncobj
   compacts the log up to the snapshot, so a follower behind it — one that
   was just sent the previous snapshot, above all — would otherwise be sent
   the whole state again, and again, as long as each transfer outlasts a
   snapshot.

The writer thread runs at the lowest CPU priority (every node reaches the
threshold at about the same index; three copies at full priority would
starve the Raft threads of a small machine) and in the idle I/O class, and
LMDB's copy releases the GIL. The dump the new one replaces is freed in the
background (``durable_replace(free_old_later=True)``): freeing gigabytes on
the tick thread stalled it for seconds, long enough for an election. A crash at any point leaves a valid dump plus the log after it (the
LMDB log trims itself to the dump on open); a ``.next`` left behind is
removed at the next snapshot. ``abandon`` (before a snapshot from the leader
is installed) waits for a writer and drops what it wrote: it would describe a
state the node no longer has.

A snapshot that cannot be written or put in place (a full or failing disk)
changes nothing: the dump in place stays whole, ``<dump>.next`` is removed
(its space with it), ``check`` answers FAILED and pysyncobj keeps its log.
It asks for the next snapshot at once (on the next tick), so for
``RETRY_AFTER_FAILURE_S`` after a failure ``serialize`` starts nothing and
``check`` answers SERIALIZING, then FAILED (pysyncobj only asks again after
FAILED or SUCCESS): one try, and one error line, per period, not one per
tick.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Protocol

from pysyncobj.config import SERIALIZER_STATE

from raftsched.raft.snapshot_file import write_snapshot_file
from raftsched.raft.snapshot_turns import Cancelled, turn
from raftsched.storage.disk import io_priority
from raftsched.storage.disk.durable_files import durable_replace, sweep_old

log = logging.getLogger("raftsched.raft")


class StateCopy(Protocol):
    """The state as committed at one moment: ``write_to`` writes it to a descriptor (any thread), once."""

    def write_to(self, fd: int) -> None: ...

    def close(self) -> None: ...


class BytesCopy:
    """A ``StateCopy`` of bytes already in hand (a small state machine's whole state)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def write_to(self, fd: int) -> None:
        view = memoryview(self._data)
        while view:
            view = view[os.write(fd, view) :]

    def close(self) -> None:
        self._data = b""


#: the longest a written snapshot waits for the dump's transfers to end before it is put in place anyway
MAX_HOLD_S = 600.0
#: after a snapshot failed, how long before the next one is tried (seconds)
RETRY_AFTER_FAILURE_S = 10.0


class Snapshotter:
    def __init__(self, dump_file: str, open_copy: Callable[[], StateCopy], turn_lock: str | None = None) -> None:
        self.dump_file = dump_file
        self._open_copy = open_copy
        #: writers given the same lock file write one at a time (``raftsched.raft.snapshot_turns``)
        self.turn_lock = turn_lock
        self.last_wait_seconds = 0.0
        #: whether a connected follower still needs log entries up to ``index`` (set by the Raft adapter)
        self.behind: Callable[[int], bool] = lambda index: False
        self._written_at: float | None = None
        self._thread: threading.Thread | None = None
        self._pending: tuple[int, float] = (0, 0.0)
        self._failed: str | None = None
        self._failed_at = -1e9  # when the last snapshot failed (monotonic)
        self._resting = False  # a snapshot was asked for too soon after a failure: none is written
        self._abandoned = False
        self.last_index = 0
        self.last_seconds = 0.0
        self.last_pause_seconds = 0.0
        self.max_pause_seconds = 0.0
        #: called on the tick thread with (index, seconds) after each snapshot is in place (the metrics)
        self.on_written: Callable[[int, float], None] | None = None
        sweep_old(dump_file)  # old dumps a crash left before the background remover got to them

    @property
    def next_path(self) -> str:
        return self.dump_file + ".next"

    def serialize(self, tmp_path: str, raft_data: Any) -> None:
        """pysyncobj's serializer hook (tick thread): pin the state and write it in the background."""
        started = time.monotonic()
        if self._thread is not None:  # pysyncobj asks only after the last one finished; never two writers
            return
        if started - self._failed_at < RETRY_AFTER_FAILURE_S:
            self._resting = True
            return
        index = int(raft_data[0][1])
        copy = self._open_copy()
        self._failed, self._abandoned = None, False
        self._pending = (index, started)
        self._thread = threading.Thread(target=self._write, args=(copy, raft_data), name="snapshot-writer", daemon=True)
        self._thread.start()
        pause = time.monotonic() - started
        self.last_pause_seconds = pause
        self.max_pause_seconds = max(self.max_pause_seconds, pause)

    def _write(self, copy: StateCopy, raft_data: Any) -> None:
        self.last_wait_seconds = 0.0
        try:
            _lowest_priority()
            with turn(self.turn_lock, lambda: self._abandoned) as waited:
                self.last_wait_seconds = waited
                write_snapshot_file(self.next_path, raft_data, copy.write_to)
        except Cancelled:
            pass  # abandoned while it waited for its turn: check() answers FAILED
        except Exception as exc:  # reported by check() on the tick thread
            self._failed = f"{type(exc).__name__}: {exc}"
        finally:
            copy.close()

    def check(self) -> int:
        """pysyncobj's serializeChecker (tick thread)."""
        thread = self._thread
        now = time.monotonic()
        if thread is None:
            return self._rest(now)
        if thread.is_alive():
            return SERIALIZER_STATE.SERIALIZING
        if not (self._failed or self._abandoned):
            self._written_at = self._written_at or now
            if self.behind(self._pending[0]) and now - self._written_at < MAX_HOLD_S:
                return SERIALIZER_STATE.SERIALIZING  # put in place once the followers have the entries
            self._failed = self._put_in_place()
        self._thread, self._written_at = None, None
        if self._failed or self._abandoned:
            if self._failed:
                self._failed_at = now
                log.error(
                    "snapshot at index %d could not be written to %s (%s); the previous snapshot and the log are kept, "
                    "and the next snapshot is tried in %g s (free space on its disk or grow it if it is full)",
                    self._pending[0], self.next_path, self._failed, RETRY_AFTER_FAILURE_S,
                )  # fmt: skip
            _remove(self.next_path)
            return SERIALIZER_STATE.FAILED
        self._finished(*self._pending)
        return SERIALIZER_STATE.SUCCESS

    def _rest(self, now: float) -> int:
        """No writer: nothing to report, or a snapshot asked for too soon after a failure (see the module docstring)."""
        if not self._resting:
            return SERIALIZER_STATE.NOT_SERIALIZING
        if now - self._failed_at < RETRY_AFTER_FAILURE_S:
            return SERIALIZER_STATE.SERIALIZING
        self._resting = False
        return SERIALIZER_STATE.FAILED

    def _put_in_place(self) -> str | None:
        """Rename the written snapshot onto the dump, durably (see raftsched.storage.disk.durable_files); what failed, or None."""
        try:
            durable_replace(self.next_path, self.dump_file, free_old_later=True)
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def abandon(self) -> None:
        """Wait for a snapshot being written and drop it (``check`` then answers FAILED)."""
        thread = self._thread
        if thread is not None:
            self._abandoned = True
            thread.join()
            _remove(self.next_path)

    def _finished(self, index: int, started: float) -> None:
        self.last_index = index
        self.last_seconds = time.monotonic() - started
        log.info(
            "snapshot at index %d written in %.3f s (waited %.3f s for its turn, tick thread paused %.3f s)",
            index,
            self.last_seconds,
            self.last_wait_seconds,
            self.last_pause_seconds,
        )
        if self.on_written is not None:
            try:
                self.on_written(index, self.last_seconds)
            except Exception:  # a hook must never fail a snapshot
                log.exception("snapshot hook failed")


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _lowest_priority() -> None:
    """This thread (and the copy thread LMDB starts from it) at the lowest CPU priority and in the idle I/O
    class (Linux: per thread; ``raftsched.storage.disk.io_priority``): the Raft log's fsyncs go to the disk first."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (OSError, AttributeError):
        pass
    io_priority.set_idle()
