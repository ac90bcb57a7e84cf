"""A Raft log for pysyncobj kept in LMDB instead of its mmap'd ``FileJournal``.

Why: pysyncobj's FileJournal keeps every entry in RAM as well, caps the file
at 4 GiB, and compacts by rewriting the whole file in place (a crash in the
middle leaves only a prefix of the entries after the snapshot). Here:

* entries live in LMDB (``log``: big-endian index -> term + command), read
  lazily, so a long log costs disk, not memory;
* compaction (``deleteEntriesTo``) and truncation (``deleteEntriesFrom``)
  are single write transactions: a SIGKILL leaves the old or the new log,
  never half of one;
* term, vote and commit index live in ``meta`` in the same environment;
* group commit: on the thread bound with ``bind_thread`` (the tick thread)
  every change (appends, deletions, term, vote) goes into one open write
  transaction, and ``commit`` ends it. ``raftsched.raft.pysyncobj_patches`` commits
  before any Raft message leaves the node and at the end of every tick, so
  nothing is acknowledged, voted or counted before it is committed, and a
  batch of appends costs one commit, not one per entry. A change made on
  any other thread (pysyncobj's constructor) is committed at once: an LMDB
  write transaction belongs to the thread that began it;
* ``sync`` decides what a commit promises: True (the default) = fsynced,
  with LMDB's own ordering (data pages, sync, meta page, sync), so a power
  loss keeps every committed change and never damages the file; False = only
  handed to the OS (survives SIGKILL of the process; a power loss may lose
  the last commits, and, since the OS may write pages in any order, can
  damage the file: the node then refuses to start and is rebuilt from its
  peers). No ``writemap``: LMDB warns that NOSYNC with WRITEMAP can corrupt
  the file even without a power loss of the writes it reports done;
* a full LMDB map (``map_size``, ``[raft] max_log_bytes``) is refused before
  it is hit: ``has_room`` answers proposers (from any thread), ``add`` raises
  ``LogFullError`` without touching the transaction, and if LMDB itself
  reports MAP_FULL the transaction is rebuilt from its recorded changes, so
  what pysyncobj already wrote stays written. A map too full for the entries
  a leader sends is a ``problem`` (``on_trouble``) until a snapshot compacts
  the log;
* a commit the disk refuses (a full disk, an I/O error, a full map) is not
  retried in place and not trusted: LMDB aborted its transaction and the
  file still holds the last commit (LMDB writes the new meta page last, and
  only after the data pages are synced; a meta page it failed to write makes
  it refuse the environment until it is opened again). The log keeps every
  change it recorded since that commit, opens the environment again (except
  after MAP_FULL) and checks that the file holds the log it last committed
  (a log that does not is damaged: ``JournalError``), then redoes the
  changes in a fresh transaction, which pysyncobj's reads and writes go on
  using. ``durable`` is False until a later commit of all of them succeeds,
  tried at most every ``RETRY_EVERY_S`` (``raftsched.raft.disk_trouble``) by the next
  ``commit``; ``on_trouble`` hears the problem's words and, once a commit
  succeeds again, None. Meanwhile nothing that depends on the log may leave
  the node (``raftsched.raft.pysyncobj_patches``). On any thread but the one bound
  with ``bind_thread`` (pysyncobj's constructor, say) a failed commit
  raises ``JournalError`` instead: a node that cannot write its log when it
  starts does not start;
* the directory is ``0700``, its files ``0600``, and the directory is made
  durable in its parent when it is created;
* On open, entries before the snapshot's previous entry are dropped, so
  pysyncobj's load of the snapshot finds the log starting where the snapshot
  ends — it would otherwise throw the whole log away (``__loadDumpFile``
  clears a log whose first entries do not match the snapshot's).

pysyncobj addresses entries by position (``log[0]``, ``log[-1]``,
``log[a:b]``); positions map to ``first_index + position``.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
import time
from typing import Any, Callable, Iterator

import lmdb
from pysyncobj.journal import Journal

from raftsched.raft import disk_trouble
from raftsched.raft.errors import RaftError
from raftsched.storage.disk.durable_files import FILE_MODE, fsync_dir, make_private_dir
from raftsched.storage.disk.lmdb_check import lmdb_short_by
from raftsched.storage.disk.lmdb_owner import check_abort

FORMAT_VERSION = 1
#: the log's address space by default (8 GiB; ``[raft] max_log_bytes``); the file grows as the log does
MAP_SIZE = 8 << 30
_KEY = struct.Struct(">Q")
_TERM = struct.Struct(">Q")
Entry = tuple[bytes, int, int]
#: how many of the newest entries ``LmdbJournal`` keeps at hand (``_recent``)
_RECENT = 16


#: what to do about a full map (the node resumes by itself once a snapshot compacts the log)
_MAP_ADVICE = (
    "raise [raft] max_log_bytes on every node and restart them one at a time, or snapshot sooner "
    "([raft] snapshot_min_entries); the node resumes by itself once a snapshot compacts the log"
)


def _same_log(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two (first, one past the last) index ranges name the same log (every empty log is the same)."""
    return a == b or (a[0] >= a[1] and b[0] >= b[1])


class JournalError(RaftError):
    """The log on disk is damaged, foreign, or from a newer version."""


class LogFullError(RaftError):
    """The log's LMDB map has no room for this write; the message names the size and the key that raises it."""


_Op = Callable[[Any], None]


def _probe(path: str) -> None:
    """Open an existing log read-only and walk its structure; raise JournalError if it is damaged."""
    data = os.path.join(path, "data.mdb")
    if not os.path.exists(data) or os.path.getsize(data) == 0:
        return  # nothing yet (an empty file: created, never synced, then a power loss with fsync off): LMDB starts it
    short = lmdb_short_by(os.path.join(path, "data.mdb"))
    if short:
        raise JournalError(f"the Raft log {path} is truncated ({short}); move it away to rebuild this node from its peers")
    try:
        env = lmdb.open(path, subdir=True, readonly=True, lock=False, max_dbs=4)
    except lmdb.Error as exc:
        raise JournalError(
            f"cannot open the Raft log {path}: {exc}; if it is damaged, move it away to rebuild this node from its peers"
        ) from exc
    try:
        with env.begin() as txn:
            for name in (b"log", b"meta"):
                if txn.get(name) is None:
                    continue
                db = env.open_db(name, txn=txn, create=False)
                for _ in txn.cursor(db).iternext(keys=True, values=False):
                    pass
    except lmdb.Error as exc:
        raise JournalError(f"the Raft log {path} is damaged ({exc}); move it away to rebuild this node from its peers") from exc
    finally:
        env.close()


class _LazySlice:
    """A slice of the log read on demand: pysyncobj slices to the end of the log, walks it until a
    size budget is spent, then cuts (that cut is a list: it gets pickled)."""

    def __init__(self, journal: "LmdbJournal", start: int, stop: int) -> None:
        self._j, self._start, self._stop = journal, start, max(start, stop)

    def __len__(self) -> int:
        return self._stop - self._start

    def __bool__(self) -> bool:
        return self._stop > self._start

    def __iter__(self) -> Iterator[Entry]:
        return self._j._iter(self._start, self._stop)

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, slice):  # the final cut pysyncobj sends over the wire: a real list
            start, stop, step = item.indices(len(self))
            assert step == 1
            return list(self._j._iter(self._start + start, self._start + stop))
        if item < 0:
            item += len(self)
        if not 0 <= item < len(self):
            raise IndexError(item)
        return self._j[self._start + item]  # a position in the log, like _start

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other)  # type: ignore[call-overload]


class LmdbJournal(Journal):
    """pysyncobj's ``Journal`` in LMDB. Every method but ``has_room`` runs on the tick thread."""

    def __init__(self, path: str, sync: bool = True, keep_from_index: int | None = None, map_size: int = MAP_SIZE) -> None:
        self._path = path
        self.map_size = map_size
        self._sync = sync
        _probe(path)  # read-only first: a damaged log is reported, never grown or rewritten
        created = make_private_dir(path)
        self._env = self._open_env()
        self._txn: Any = None  # the open write transaction: every change since the last commit
        self._group_thread: int | None = None  # the thread whose changes wait for ``commit``
        self._txn_thread: int | None = None  # the thread that began the open transaction
        self._ops: list[_Op] = []  # those changes, to redo them in a new transaction (MAP_FULL, a failed commit)
        self._pending_bytes = 0
        #: the newest entries added, by index, and the first one read: pysyncobj reads ``log[-1]`` and ``log[0]``
        #: many times a tick, and each read from LMDB copies the entry (a batch: up to 192 KiB). Dropped on deletes.
        self._recent: dict[int, Entry] = {}
        self._head: Entry | None = None
        self._room = map_size  # measured once the log is open
        self._refused_bytes = 0  # the entry ``add`` refused last for want of room (0: the last one fitted)
        self._full = False
        self._freed = False
        #: why the last commit failed (the disk's words), None while every change is committed or being gathered
        self._trouble: str | None = None
        self._told: str | None = None  # the problem ``on_trouble`` heard last
        self._retry_at = 0.0
        #: called on the committing thread with the seconds each commit took (the metrics; keep it short)
        self.on_commit: Callable[[float], None] | None = None
        #: called on the tick thread with ``problem`` whenever it changes (keep it short)
        self.on_trouble: Callable[[str | None], None] | None = None
        self._psize = int(self._env.stat()["psize"])
        try:
            self._open_dbs()
            self._first, self._next = self._bounds()
            self._committed = (self._first, self._next)  # the log the file holds (checked after a failed commit)
            self._meta = self._load_meta()
            if keep_from_index is not None and self._first < keep_from_index < self._next:
                self._delete_range(self._first, keep_from_index)
                self._first = keep_from_index
            self._dirty_commit = False
            self.commit()
        except lmdb.Error as exc:
            self._env.close()
            raise JournalError(
                f"the Raft log {path} is damaged ({exc}); move it away to rebuild this node from its peers"
            ) from exc
        except JournalError:
            self._abandon_txn()
            self._env.close()
            raise
        if created:
            fsync_dir(path)  # data.mdb and lock.mdb are in the directory for good
        self._room = self._measure_room()

    def _open_env(self) -> Any:
        try:
            return lmdb.open(
                self._path, subdir=True, map_size=self.map_size, max_dbs=4, sync=self._sync, metasync=self._sync,
                readahead=False, mode=FILE_MODE,
            )  # fmt: skip
        except lmdb.Error as exc:
            raise JournalError(
                f"cannot open the Raft log {self._path}: {exc}; if it is damaged, move it away to rebuild this node from its peers"
            ) from exc

    def _open_dbs(self) -> None:
        self._log = self._env.open_db(b"log")
        self._meta_db = self._env.open_db(b"meta")

    # ---------------------------------------------------------- on-disk checks

    def _load_meta(self) -> dict[str, Any]:
        with self._reader() as txn:
            raw = txn.get(b"meta", db=self._meta_db)
        if raw is None:
            meta: dict[str, Any] = {"format": FORMAT_VERSION, "term": 0, "vote": None, "commit": 1}
            self._write_meta(meta)
            return meta
        try:
            meta = json.loads(raw)
        except ValueError as exc:
            raise JournalError(f"the Raft log {self._path} has damaged metadata; move it away to rebuild this node") from exc
        if meta.get("format", 0) > FORMAT_VERSION:
            raise JournalError(
                f"the Raft log {self._path} has format {meta.get('format')}, newer than this version "
                f"understands ({FORMAT_VERSION}); upgrade raftsched on this node"
            )
        return meta

    def _bounds(self) -> tuple[int, int]:
        """First index and one past the last; checks that the indexes are contiguous."""
        with self._reader() as txn:
            cur = txn.cursor(db=self._log)
            if not cur.first():
                return 1, 1
            first = _KEY.unpack(cur.key())[0]
            cur.last()
            last = _KEY.unpack(cur.key())[0]
            count = txn.stat(self._log)["entries"]
        if count != last - first + 1:
            raise JournalError(
                f"the Raft log {self._path} has a gap ({count} entries between index {first} and {last}); "
                "it is damaged: move it away to rebuild this node from its peers"
            )
        return first, last + 1

    def _write_meta(self, meta: dict[str, Any]) -> None:
        raw = json.dumps(meta).encode()
        self._write(lambda txn: txn.put(b"meta", raw, db=self._meta_db))

    # ---------------------------------------------------------- the write transaction

    def _write(self, op: _Op) -> None:
        if self._txn is None:
            self._begin()
        elif self._txn_thread != threading.get_ident():
            raise RuntimeError(f"the Raft log {self._path} was written by two threads at once; only the tick thread may")
        try:
            op(self._txn)
        except lmdb.MapFullError:
            self._full = True
            self._txn.abort()
            self._begin()  # LMDB's transaction is unusable after MAP_FULL: the changes it held, in a new one
            self._tell()
            raise LogFullError(self._full_message()) from None
        self._ops.append(op)
        if threading.get_ident() != self._group_thread:
            self.commit()

    def _begin(self) -> None:
        """A new write transaction on this thread, holding every change recorded since the last commit."""
        self._txn = self._env.begin(write=True)
        self._txn_thread = threading.get_ident()
        for op in self._ops:
            op(self._txn)

    def bind_thread(self) -> None:
        """Group the calling thread's changes until ``commit`` (pysyncobj's tick thread calls this every tick)."""
        self._group_thread = threading.get_ident()

    @property
    def durable(self) -> bool:
        """Whether every change made before the last ``commit`` is committed (see the module docstring)."""
        return self._trouble is None

    @property
    def problem(self) -> str | None:
        """Why the log cannot take writes now: a commit the disk refused (``trouble``), or a map too full for the
        entries a leader sends; None while it can."""
        if self._trouble is not None:
            return self._trouble
        if self._map_full():
            return disk_trouble.full_words(self._path, self._map_words(), _MAP_ADVICE)
        return None

    def _map_full(self) -> bool:
        return self._full or self._room - self._pending_bytes - self._refused_bytes < self.map_size // 32

    def _tell(self) -> None:
        problem = self.problem
        if problem != self._told:
            self._told = problem
            if self.on_trouble is not None:
                self.on_trouble(problem)

    @property
    def unwritten_bytes(self) -> int:
        """Bytes of entries added since the last commit that succeeded (any thread)."""
        return self._pending_bytes

    @property
    def trouble(self) -> str | None:
        """Why the log is not durable now (``raftsched.raft.disk_trouble``'s words), None while it is."""
        return self._trouble

    def commit(self) -> None:
        """End the write transaction: durable with ``sync``, else handed to the OS.

        Only the thread that began the transaction can end it (LMDB's rule); on any other it does nothing. A commit
        that fails is kept and tried again from ``RETRY_EVERY_S`` later, by the next call (see ``durable``)."""
        if self._txn is None and self._ops and self._trouble is not None:
            self._begin()  # the changes of a failed commit whose redo failed too
        if self._txn is None or self._txn_thread != threading.get_ident():
            return
        if self._trouble is not None and time.monotonic() < self._retry_at:
            return  # gathering until the next try
        txn, self._txn = self._txn, None
        began = time.monotonic()
        try:
            txn.commit()
        except lmdb.Error as exc:
            self._failed(exc)
            return
        if self.on_commit is not None:
            self.on_commit(time.monotonic() - began)
        self._ops = []
        self._pending_bytes = 0
        self._committed = (self._first, self._next)
        if self._freed:
            self._full, self._freed = False, False
        self._room = self._measure_room()
        self._trouble = None
        self._tell()

    def _failed(self, exc: lmdb.Error) -> None:
        """A commit failed: LMDB aborted it. Keep its changes and redo them in a new transaction (the environment
        opened again and checked first, unless the map was full); raise ``JournalError`` off the bound thread."""
        if isinstance(exc, lmdb.MapFullError):  # LMDB needed pages for its free list
            self._full = True
            problem = disk_trouble.full_words(self._path, self._map_words(), _MAP_ADVICE)
        else:
            problem = disk_trouble.describe(self._path, exc)
            self._reopen()
        self._retry_at = time.monotonic() + disk_trouble.RETRY_EVERY_S
        self._trouble = problem
        if threading.get_ident() != self._group_thread:  # the changes stay recorded for whoever writes next
            raise JournalError(f"cannot write the Raft log {self._path}: {problem}")
        try:
            self._begin()
        except lmdb.Error:  # redone by the next commit
            self._abandon_txn()
        self._tell()

    def _reopen(self) -> None:
        """Open the environment again after a failed commit and check the file holds the log last committed."""
        self._abandon_txn()
        self._env.close()
        self._env = self._open_env()
        self._open_dbs()
        try:
            held = self._bounds()
        except (lmdb.Error, JournalError) as exc:
            raise JournalError(f"the Raft log {self._path} is damaged after a failed write ({exc}); stop this node") from exc
        if not _same_log(held, self._committed):
            raise JournalError(
                f"the Raft log {self._path} holds entries {held[0]}..{held[1] - 1} after a failed write, not the "
                f"{self._committed[0]}..{self._committed[1] - 1} last committed: it is damaged; stop this node and "
                "move the log away to rebuild it from its peers"
            )

    def _map_words(self) -> str:
        return f"its LMDB map, [raft] max_log_bytes = {self.map_size / (1 << 20):.0f} MiB, is full"

    def _abandon_txn(self) -> None:
        if self._txn is not None:
            try:
                self._txn.abort()
            except lmdb.Error:
                pass
            self._txn = None

    @contextlib.contextmanager
    def _reader(self) -> Iterator[Any]:
        """The open write transaction (it sees its own changes), else a read transaction."""
        if self._txn is not None:
            yield self._txn
            return
        with self._env.begin() as txn:
            yield txn

    # ---------------------------------------------------------- room

    def _measure_room(self) -> int:
        with self._env.begin() as txn:
            stats = (txn.stat(self._log), txn.stat(self._meta_db), self._env.stat())
        pages = 4 + sum(s["branch_pages"] + s["leaf_pages"] + s["overflow_pages"] for s in stats)
        return self.map_size - pages * self._psize

    def has_room(self, nbytes: int) -> bool:
        """Whether a proposal of ``nbytes`` may go ahead: it leaves ``map_size / 16`` free (any thread)."""
        return not self._full and self._room - self._pending_bytes - nbytes >= self.map_size // 16

    def _full_message(self) -> str:
        return (
            f"the Raft log {self._path} is full: its LMDB map holds {self.map_size} bytes "
            f"({self.map_size / (1 << 20):.0f} MiB) and has no room for more; raise [raft] max_log_bytes in the "
            "cluster config on every node and restart them one at a time (or snapshot sooner: [raft] snapshot_min_entries)"
        )

    # ---------------------------------------------------------- reads

    def _get(self, index: int) -> Entry:
        entry = self._recent.get(index)
        if entry is not None:
            return entry
        head = self._head
        if head is not None and head[1] == index:
            return head
        with self._reader() as txn:
            raw = txn.get(_KEY.pack(index), db=self._log)
        if raw is None:
            raise JournalError(f"the Raft log {self._path} has no entry {index} though it should")
        entry = (raw[8:], index, _TERM.unpack_from(raw)[0])
        if index == self._first:
            self._head = entry
        return entry

    def _iter(self, start: int, stop: int) -> Iterator[Entry]:
        with self._reader() as txn:
            cur = txn.cursor(db=self._log)
            if not cur.set_key(_KEY.pack(self._first + start)):
                return
            for key, raw in cur:
                index = _KEY.unpack(key)[0]
                if index >= self._first + stop:
                    return
                yield (raw[8:], index, _TERM.unpack_from(raw)[0])

    def __len__(self) -> int:
        return self._next - self._first

    # the reads ``raftsched.raft.log_overlap`` makes of every AppendEntries (no entry is read to know the bounds)

    def first_index(self) -> int:
        return self._first

    def last_index(self) -> int:
        return self._next - 1

    def term_at(self, index: int) -> int:
        return self._get(index)[2]

    def __getitem__(self, item: Any) -> Any:
        n = len(self)
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            assert step == 1, "pysyncobj never steps"
            return _LazySlice(self, start, stop)
        if item < 0:
            item += n
        if not 0 <= item < n:
            raise IndexError(item)
        return self._get(self._first + item)

    # ---------------------------------------------------------- writes

    def add(self, command: bytes, idx: int, term: int) -> None:
        if len(self) and idx != self._next:
            raise JournalError(f"Raft log append at {idx} but the log ends at {self._next - 1}")
        data = bytes(command)
        key, value = _KEY.pack(idx), _TERM.pack(term) + data
        if self._full or self._room - self._pending_bytes - len(value) < self.map_size // 32:
            self._refused_bytes = len(value)
            self._tell()
            raise LogFullError(self._full_message())
        self._refused_bytes = 0
        self._write(lambda txn: txn.put(key, value, db=self._log))
        self._pending_bytes += len(value)
        if not len(self):
            self._first = idx
            self._head = None
        self._next = idx + 1
        self._recent[idx] = (data, idx, term)
        if len(self._recent) > _RECENT:
            del self._recent[next(iter(self._recent))]  # the oldest (indexes are added in order)

    def _delete_range(self, start: int, stop: int) -> None:
        """Delete entries with start <= index < stop."""

        def op(txn: Any) -> None:
            cur = txn.cursor(db=self._log)
            if not cur.set_range(_KEY.pack(start)):
                return
            while True:
                key = cur.key()
                if not key or _KEY.unpack(key)[0] >= stop or not cur.delete():
                    return

        self._write(op)
        self._freed = True
        self._recent, self._head = {}, None

    def clear(self) -> None:
        self._write(lambda txn: txn.drop(self._log, delete=False))
        self._freed = True
        self._first = self._next = 1
        self._recent, self._head = {}, None

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        self._delete_range(self._first + entryFrom, self._next)
        self._next = max(self._first, self._first + entryFrom)

    def deleteEntriesTo(self, entryTo: int) -> None:
        stop = min(self._next, self._first + entryTo)
        self._delete_range(self._first, stop)
        self._first = stop

    # ---------------------------------------------------------- metadata

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        self._meta["commit"] = raftCommitIndex
        self._dirty_commit = True

    def getRaftCommitIndex(self) -> int:
        return int(self._meta.get("commit", 1))

    def setCurrentTerm(self, term: int, votedForNodeId: Any) -> None:
        self._meta["term"], self._meta["vote"] = term, votedForNodeId
        self._write_meta(self._meta)  # committed before any vote or message leaves this node

    def getCurrentTerm(self) -> int:
        return int(self._meta.get("term", 0))

    def getVotedForNodeId(self) -> Any:
        return self._meta.get("vote")

    def onOneSecondTimer(self) -> None:
        if self._dirty_commit:
            self._write_meta(self._meta)
            self._dirty_commit = False

    def flush(self) -> None:
        self.commit()
        self._env.sync(True)

    def _destroy(self) -> None:
        try:
            self.onOneSecondTimer()
            self.commit()
        finally:
            if self._txn is not None:  # only on the thread that began it, or once that one has exited
                check_abort(self._txn_thread or 0, self._path)
                self._txn.abort()
                self._txn = None
            self._env.close()
