"""The job state in one LMDB environment per node: ``raftsched.cluster.fsm.store.TableStore`` on disk.

Layout: one file (``subdir=False``, ``<node dir>/state.mdb`` with LMDB's
``state.mdb-lock``), one named database per ``Table``, and in the main
database the marker ``raftsched`` = ``state <version>`` (a file without it
is not ours and is refused, naming it).

Transactions (``raftsched.cluster.fsm.store``'s contract): the writer — the state machine on
the Raft tick thread — opens a write transaction with its first write and
``commit()`` ends it once per Raft entry, with the applied index written in
it by the machine; only that thread may end it (``raftsched.storage.disk.lmdb_owner``: a close
on another thread mid-entry is refused). The writer's reads see its open
transaction. Every other read runs in a read transaction (``reading()``: one
for the whole context; otherwise one per call), so a long scan never waits
for a lock the writer needs, and sees a whole entry or none of it.

Durability (``raftsched.storage.state_trust``): ``sync=False, metasync=False`` and no
``writemap`` (LMDB warns that ``writemap`` without sync can damage the file
even with no crash). The Raft log is the durable record: a process crash
loses nothing here; an OS crash can damage the file, which is then detected
(another boot's ``.open`` marker), set aside and rebuilt from the snapshot
file and the log. Without a boot id: ``sync=True, metasync=False`` (whole
across a power loss, possibly one commit behind: it replays from the log).

The map (``[state] max_bytes``) bounds the file: ``has_room`` refuses
proposals while less than ``margin`` is left, and a write that still finds
the map full raises ``StoreFailure`` naming the key to raise.

A full or failing disk (``StoreFailure`` with ``storage_problem``: the
words of ``raftsched.raft.disk_trouble``): LMDB aborts a commit it could not write
and the file keeps the last commit. The batch's writes are recorded as they
are made, so a failed commit keeps them (``kept``): the next ``begin`` or
``commit`` redoes them in a fresh transaction, and the entry's commit is
simply tried again (``raftsched.raft.adapter`` holds the entry meanwhile). A write
LMDB itself refused mid-batch (a full map), or a batch that cannot be
redone (``load_sorted``'s bulk rows are not recorded), is not kept: the
writer drops it with ``abort`` and applies the entry again. Installing a
copy the disk has no room for leaves the environment as it was. (An
environment whose meta page LMDB failed to write, which it then refuses
with MDB_PANIC, is not opened again while the node runs: its readers share
it. Such a node stays unfit until it is restarted.)

Snapshots and installs (``raftsched.raft.adapter`` through ``StateFiles``):
``open_copy`` pins the committed state at once (a read transaction taken on
the writer's thread between entries) and its ``write_to(fd)`` — in a
background thread — is LMDB's compacting copy of exactly that state;
``install`` replaces the environment with a copy (written beside, fsynced,
renamed) once no read is running.
"""

from __future__ import annotations

import contextlib
import os
import threading
from threading import get_ident
from typing import Any, BinaryIO, Iterable, Iterator

import lmdb

from raftsched.cluster.domain.errors import RaftschedError
from raftsched.cluster.fsm.store import SCAN_LIMIT, StoreFailure, Table
from raftsched.raft import disk_trouble
from raftsched.storage import state_trust
from raftsched.storage.disk.durable_files import FILE_MODE, fsync_dir, replace_freeing_later, sweep_old
from raftsched.storage.disk.lmdb_check import lmdb_short_by
from raftsched.storage.disk.lmdb_owner import check_abort, check_commit
from raftsched.storage.disk.paced_io import PacedWrites, Writeback
from raftsched.storage.rw_gate import RWGate

MARKER_KEY = b"raftsched"
MARKER = b"state 1"
#: the state's LMDB map by default: the most it may hold (``[state] max_bytes``); the file grows as needed
MAP_SIZE = 64 << 30
_COPY_CHUNK = 8 << 20


class StateFileError(RaftschedError):
    """A state environment that is damaged, foreign or from a newer version (the message names it)."""


def check_state_file(path: str) -> None:
    """Raise ``StateFileError`` for a file at ``path`` that LMDB would crash on or that is not ours."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    short = lmdb_short_by(path)
    if short:
        raise StateFileError(f"the state file {path} is truncated ({short}); move it away to rebuild this node from its peers")
    try:
        env = lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=len(Table.ALL) + 1)
    except lmdb.Error as exc:
        raise StateFileError(f"{path} is not a raftsched state file ({exc}); it belongs to something else: move it away") from exc
    try:
        with env.begin() as txn:
            marker = txn.get(MARKER_KEY)
    except lmdb.Error as exc:
        raise StateFileError(
            f"the state file {path} is damaged ({exc}); move it away to rebuild this node from its peers"
        ) from exc
    finally:
        env.close()
    if marker is None:
        raise StateFileError(
            f"{path} is not a raftsched state file (no raftsched marker); it belongs to something else: move it away"
        )
    if marker != MARKER:
        raise StateFileError(
            f"the state file {path} is {marker.decode(errors='replace')!r}, newer than this version understands "
            f"({MARKER.decode()!r}); upgrade raftsched on this node"
        )


class EnvCopy:
    """The committed state at one moment, pinned by a read transaction: ``write_to`` copies it (any thread)."""

    def __init__(self, store: "LmdbTableStore", txn: Any) -> None:
        self._store, self._txn = store, txn

    def write_to(self, fd: int) -> None:
        """LMDB's compacting copy of the pinned state, written at ``fd``'s current offset."""
        with self._store.gate.shared():
            self._store.env.copyfd(fd, compact=True, txn=self._txn)

    def close(self) -> None:
        if self._txn is not None:
            self._txn.abort()
            self._txn = None


class LmdbTableStore:
    """``TableStore`` in an LMDB environment file (see the module docstring)."""

    def __init__(self, path: str, map_size: int = MAP_SIZE) -> None:
        self.path = path
        self.map_size = map_size
        self._boot = state_trust.boot_id()
        #: set when the environment found at open was set aside (why, and where it is now)
        self.set_aside = ""
        check_state_file(path)
        sweep_old(path)  # old environments an install replaced and a crash left behind
        why = state_trust.untrusted_reason(path, self._boot)
        if why:
            self.set_aside = f"the state file {path} is not trusted: {why}; moved to {state_trust.set_aside(path, why)}"
        self.gate = RWGate()
        self._local = threading.local()
        self._txn: Any = None
        self._writer = 0
        #: the open batch's writes, in order (db, key, value; value None: a delete; key None: a drop), to redo it
        #: after a failed commit; ``_replayable`` False once a write was not recorded (``load_sorted``)
        self._ops: list[tuple[Any, bytes | None, bytes | None]] = []
        self._replayable = True
        self._open()

    # ------------------------------------------------------------ the environment

    def _open(self) -> None:
        safe = not self._boot  # no boot id to tell an OS crash by: let LMDB keep the file whole itself
        if not safe:
            state_trust.mark_open(self.path, self._boot)  # before anything this process may write
        try:
            self.env = lmdb.open(
                self.path, subdir=False, map_size=self.map_size, max_dbs=len(Table.ALL) + 1, sync=safe, metasync=False,
                readahead=False, mode=FILE_MODE, max_readers=512,
            )  # fmt: skip
            with self.env.begin(write=True) as txn:
                self._dbs = {t: self.env.open_db(t.encode(), txn=txn) for t in Table.ALL}
                if txn.get(MARKER_KEY) is None:
                    txn.put(MARKER_KEY, MARKER)
        except lmdb.Error as exc:
            raise StateFileError(f"cannot open the state file {self.path}: {exc}; if it is damaged, move it away") from exc
        self._psize = int(self.env.stat()["psize"])
        self.env.sync(True)
        fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        # commits are not synced: their pages go to disk as they come, not in bursts (raftsched.storage.disk.paced_io)
        self._writeback = None if safe else Writeback(self.path)

    def close(self) -> None:
        """A clean close: everything synced, the environment trusted at the next open."""
        with self.gate.exclusive():
            self._close_env()
        state_trust.mark_closed(self.path)

    def _close_env(self) -> None:
        self.abort()
        if self._writeback is not None:
            self._writeback.stop()
        self.env.sync(True)
        self.env.close()

    # ------------------------------------------------------------ transactions

    def _write_txn(self) -> Any:
        txn = self._txn
        if txn is None:
            txn = self._txn = self.env.begin(write=True)
            self._writer = threading.get_ident()
            for db, key, value in self._ops:  # a batch whose commit failed: redone first
                if key is None:
                    txn.drop(db, delete=False)
                elif value is None:
                    txn.delete(key, db=db)
                else:
                    txn.put(key, value, db=db)
        return txn

    def abort(self) -> None:
        """Drop the open batch (and one whose commit failed): the store is what its last commit left. On the writer's
        thread, or once it has exited (``raftsched.storage.disk.lmdb_owner``)."""
        if self._txn is not None:
            check_abort(self._writer, self.path)
            self._txn.abort()
            self._txn = None
        self._ops = []
        self._replayable = True

    def begin(self) -> None:
        self._write_txn()

    def _own_txn(self) -> Any:
        """The transaction this thread reads in without opening one: the writer's own, or its read transaction."""
        txn = self._txn
        if txn is not None and self._writer == threading.get_ident():
            return txn
        return getattr(self._local, "txn", None)

    @contextlib.contextmanager
    def _reader(self) -> Iterator[Any]:
        txn = self._own_txn()
        if txn is not None:
            yield txn
            return
        with self.gate.shared():
            with self.env.begin() as fresh:
                yield fresh

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        if self._own_txn() is not None:
            yield  # already in one (or the writer, whose reads see its own transaction)
            return
        with self.gate.shared():
            txn = self.env.begin()
            self._local.txn = txn
            try:
                yield
            finally:
                self._local.txn = None
                txn.abort()

    def commit(self) -> None:
        if self._txn is None and self._ops:
            self._redo()
        txn = self._txn
        if txn is None:
            return
        if self._writer != get_ident():
            check_commit(self._writer, self.path)
        self._txn = None
        try:
            txn.commit()
        except lmdb.Error as exc:
            raise self._failure(exc, "commit to") from exc
        self._ops = []
        self._replayable = True

    def _redo(self) -> None:
        """The batch of a failed commit, in a fresh transaction (``StoreFailure`` if the disk refuses even that)."""
        try:
            self._write_txn()
        except lmdb.Error as exc:
            self._txn = None
            raise self._failure(exc, "write to") from exc

    def _failure(self, exc: lmdb.Error, doing: str) -> StoreFailure:
        """``exc`` as a ``StoreFailure``; a batch that cannot be redone is dropped (the caller applies it again)."""
        kept = self._replayable and doing != "write to"
        if not kept:
            self._ops = []
            self._replayable = True
        if isinstance(exc, lmdb.MapFullError):
            problem = disk_trouble.full_words(
                self.path,
                f"its LMDB map, [state] max_bytes = {self.map_size / (1 << 30):.1f} GiB, is full",
                "raise [state] max_bytes on every node and restart them one at a time",
            )
            return StoreFailure(self._full_message(), problem, kept)
        problem = disk_trouble.describe(self.path, exc)
        return StoreFailure(f"cannot {doing} the state file {self.path}: {exc} ({problem})", problem, kept)

    # ------------------------------------------------------------ the port

    def get(self, table: str, key: bytes) -> bytes | None:
        if len(key) > 511 or not key:
            return None
        txn = self._txn
        if txn is not None and self._writer == get_ident():  # the hot path: the writer inside an entry
            value: bytes | None = txn.get(key, db=self._dbs[table])
            return value
        txn = getattr(self._local, "txn", None)
        if txn is not None:  # a reader inside reading()
            value = txn.get(key, db=self._dbs[table])
            return value
        with self._reader() as fresh:
            value = fresh.get(key, db=self._dbs[table])
        return value

    def put(self, table: str, key: bytes, value: bytes) -> None:
        db = self._dbs[table]
        try:
            txn = self._txn if self._txn is not None else self._write_txn()
            txn.put(key, value, db=db)
        except lmdb.BadValsizeError as exc:
            raise ValueError(f"key of {len(key)} bytes cannot be stored in {table}: {exc}") from exc
        except lmdb.Error as exc:
            raise self._failure(exc, "write to") from None
        self._ops.append((db, key, value))

    def delete(self, table: str, key: bytes) -> None:
        if len(key) > 511 or not key:
            return
        db = self._dbs[table]
        try:
            txn = self._txn if self._txn is not None else self._write_txn()
            txn.delete(key, db=db)
        except lmdb.Error as exc:
            raise self._failure(exc, "write to") from exc
        self._ops.append((db, key, None))

    def scan(
        self, table: str, start: bytes = b"", stop: bytes | None = None, limit: int = SCAN_LIMIT
    ) -> list[tuple[bytes, bytes]]:
        if limit <= 0:
            return []
        txn = self._txn
        if txn is not None and self._writer == get_ident():  # the writer inside an entry (apply's own scans)
            return self._scan_in(txn, table, start, stop, limit)
        with self._reader() as txn:
            return self._scan_in(txn, table, start, stop, limit)

    def _scan_in(self, txn: Any, table: str, start: bytes, stop: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        with txn.cursor(db=self._dbs[table]) as cur:
            if not (cur.set_range(start) if start else cur.first()):
                return out
            for row in cur.iternext():  # from the row found on: one call per row
                if stop is not None and row[0] >= stop:
                    break
                out.append(row)
                if len(out) >= limit:
                    break
        return out

    def scan_back(
        self, table: str, start: bytes = b"", stop: bytes | None = None, limit: int = SCAN_LIMIT
    ) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        if limit <= 0:
            return out
        with self._reader() as txn:
            cur = txn.cursor(db=self._dbs[table])
            if stop is None:
                found = cur.last()
            else:  # the first key >= stop, then one back (none >= stop: the last key)
                found = cur.prev() if cur.set_range(stop) else cur.last()
            while found:
                key = cur.key()
                if key < start:
                    break
                out.append((key, cur.value()))
                if len(out) >= limit:
                    break
                found = cur.prev()
        return out

    def count(self, table: str) -> int:
        with self._reader() as txn:
            return int(txn.stat(self._dbs[table])["entries"])

    def load_sorted(self, table: str, rows: Iterable[tuple[bytes, bytes]]) -> int:
        """Append ``rows`` (keys ascending, all after the table's last key) in the open batch: a tool's bulk load
        (a seeded backlog), page-filling and far cheaper than ``put`` one by one. How many were added."""
        txn = self._write_txn()
        self._replayable = False  # the rows are not kept: this batch cannot be redone
        try:
            added = txn.cursor(db=self._dbs[table]).putmulti(rows, append=True)[1]
        except lmdb.Error as exc:
            raise self._failure(exc, "write to") from None
        return int(added)

    def clear(self) -> None:
        txn = self._write_txn()
        for db in self._dbs.values():
            txn.drop(db, delete=False)
            self._ops.append((db, None, None))

    # ------------------------------------------------------------ room

    def used_bytes(self) -> int:
        return (int(self.env.info()["last_pgno"]) + 1) * self._psize

    def margin(self) -> int:
        return min(self.map_size // 16, 1 << 30)

    def has_room(self) -> bool:
        """Whether a proposal may go ahead: more than ``margin`` left in the map (any thread)."""
        return self.map_size - self.used_bytes() > self.margin()

    def _full_message(self) -> str:
        return (
            f"the state file {self.path} is full: its LMDB map ([state] max_bytes = {self.map_size} bytes, "
            f"{self.map_size / (1 << 30):.1f} GiB) has no room for this entry. Raise [state] max_bytes on every node "
            "and restart them one at a time"
        )

    def full_message(self) -> str:
        return self._full_message()

    # ------------------------------------------------------------ snapshots and installs

    def open_copy(self) -> EnvCopy:
        """Pin the committed state now (call on the writer's thread, between entries)."""
        if self._txn is not None:
            raise RuntimeError(f"{self.path}: a copy was asked for in the middle of an entry")
        return EnvCopy(self, self.env.begin())

    def install(self, source: BinaryIO, size: int) -> None:
        """Replace the environment with the ``size`` bytes of a copy read from ``source`` (the writer's thread):
        written beside, fsynced, renamed over the old one once no read is running, then reopened."""
        new = self.path + ".new"
        try:
            _write_copy(new, source, size, self.path)
        except OSError as exc:  # a full or failing disk: the environment is left as it was
            _unlink_quietly(new)
            problem = disk_trouble.describe(new, exc)
            raise StoreFailure(f"cannot write the copy of the state to {new}: {exc} ({problem})", problem) from exc
        except BaseException:
            _unlink_quietly(new)
            raise
        check_state_file(new)
        with self.gate.exclusive():
            self._close_env()
            replace_freeing_later(new, self.path)  # the old environment is freed in the background
            self._open()


def _write_copy(path: str, source: BinaryIO, size: int, copy_of: str) -> None:
    """``size`` bytes from ``source`` into a new file ``path``, synced: the copy for ``copy_of``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    paced = PacedWrites()  # gigabytes in one burst would stall every other fsync on the disk (raftsched.storage.disk.paced_io)
    try:
        left = size
        while left > 0:
            chunk = source.read(min(_COPY_CHUNK, left))
            if not chunk:
                raise StateFileError(f"the copy for {copy_of} ended {left} bytes early; nothing was replaced")
            os.write(fd, chunk)
            paced.wrote(fd, len(chunk))
            left -= len(chunk)
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
