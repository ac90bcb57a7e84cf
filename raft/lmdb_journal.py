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
* ``sync`` decides what a commit promises: False (default) = written to the
  OS (survives SIGKILL of the process, not a power loss); True = fsynced
  (survives a power loss, slower).
* On open, entries before the snapshot's previous entry are dropped, so
  pysyncobj's load of the snapshot finds the log starting where the snapshot
  ends — it would otherwise throw the whole log away (``__loadDumpFile``
  clears a log whose first entries do not match the snapshot's).

pysyncobj addresses entries by position (``log[0]``, ``log[-1]``,
``log[a:b]``); positions map to ``first_index + position``.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, Iterator

import lmdb
from pysyncobj.journal import Journal

from raft.lmdb_check import lmdb_short_by

FORMAT_VERSION = 1
#: the log's address space; with writemap the file is sparse at this apparent size (8 GiB)
MAP_SIZE = 8 << 30
_KEY = struct.Struct(">Q")
_TERM = struct.Struct(">Q")
Entry = tuple[bytes, int, int]


class JournalError(Exception):
    """The log on disk is damaged, foreign, or from a newer version."""


def _probe(path: str) -> None:
    """Open an existing log read-only and walk its structure; raise JournalError if it is damaged."""
    if not os.path.exists(os.path.join(path, "data.mdb")):
        return
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


class LmdbJournal(Journal):  # type: ignore[misc]
    def __init__(self, path: str, sync: bool = False, keep_from_index: int | None = None) -> None:
        self._path = path
        _probe(path)  # read-only first: a damaged log is reported, never grown or rewritten
        try:
            # writemap: a commit writes into the shared mapping, no syscall (12 us instead of 55 us an
            # append here); the pages are in the OS page cache at once, so a SIGKILL loses nothing
            self._env = lmdb.open(
                path, subdir=True, map_size=MAP_SIZE, max_dbs=4, sync=sync, metasync=sync, readahead=False, writemap=True
            )
        except lmdb.Error as exc:
            raise JournalError(
                f"cannot open the Raft log {path}: {exc}; if it is damaged, move it away to rebuild this node from its peers"
            ) from exc
        try:
            self._log = self._env.open_db(b"log")
            self._meta_db = self._env.open_db(b"meta")
            self._meta = self._load_meta()
            self._first, self._next = self._bounds()
        except lmdb.Error as exc:
            self._env.close()
            raise JournalError(
                f"the Raft log {path} is damaged ({exc}); move it away to rebuild this node from its peers"
            ) from exc
        if keep_from_index is not None and self._first < keep_from_index < self._next:
            self._delete_range(self._first, keep_from_index)
            self._first = keep_from_index
        self._dirty_commit = False

    # ---------------------------------------------------------- on-disk checks

    def _load_meta(self) -> dict[str, Any]:
        with self._env.begin(db=self._meta_db) as txn:
            raw = txn.get(b"meta")
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
        with self._env.begin(db=self._log) as txn:
            cur = txn.cursor()
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
        with self._env.begin(write=True, db=self._meta_db) as txn:
            txn.put(b"meta", json.dumps(meta).encode())

    # ---------------------------------------------------------- reads

    def _get(self, index: int) -> Entry:
        with self._env.begin(db=self._log, buffers=False) as txn:
            raw = txn.get(_KEY.pack(index))
        if raw is None:
            raise JournalError(f"the Raft log {self._path} has no entry {index} though it should")
        return (raw[8:], index, _TERM.unpack_from(raw)[0])

    def _iter(self, start: int, stop: int) -> Iterator[Entry]:
        with self._env.begin(db=self._log) as txn:
            cur = txn.cursor()
            if not cur.set_key(_KEY.pack(self._first + start)):
                return
            for key, raw in cur:
                index = _KEY.unpack(key)[0]
                if index >= self._first + stop:
                    return
                yield (raw[8:], index, _TERM.unpack_from(raw)[0])

    def __len__(self) -> int:
        return self._next - self._first

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
        with self._env.begin(write=True, db=self._log) as txn:
            txn.put(_KEY.pack(idx), _TERM.pack(term) + bytes(command))
        if not len(self):
            self._first = idx
        self._next = idx + 1

    def _delete_range(self, start: int, stop: int) -> None:
        """Delete entries with start <= index < stop, in one transaction."""
        with self._env.begin(write=True, db=self._log) as txn:
            cur = txn.cursor()
            if not cur.set_range(_KEY.pack(start)):
                return
            while True:
                key = cur.key()
                if not key or _KEY.unpack(key)[0] >= stop or not cur.delete():
                    return

    def clear(self) -> None:
        with self._env.begin(write=True, db=self._log) as txn:
            txn.drop(self._log, delete=False)
        self._first = self._next = 1

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
        self._write_meta(self._meta)  # before any vote leaves this node

    def getCurrentTerm(self) -> int:
        return int(self._meta.get("term", 0))

    def getVotedForNodeId(self) -> Any:
        return self._meta.get("vote")

    def onOneSecondTimer(self) -> None:
        if self._dirty_commit:
            self._write_meta(self._meta)
            self._dirty_commit = False

    def flush(self) -> None:
        self._env.sync(True)

    def _destroy(self) -> None:
        self.onOneSecondTimer()
        self._env.close()
