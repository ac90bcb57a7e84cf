"""The state machine's storage port: named tables of ordered byte keys and values, written per Raft entry.

The job state machine (``raftsched.cluster.fsm``) keeps every record and every
index that grows with the backlog in a ``TableStore``: jobs, runs,
idempotency keys, each job's runs, the active runs, the due index, the
retention indexes and the machine's small state (``meta``). Two
implementations: ``MemoryStore`` here (pure, for unit tests) and
``raftsched.storage.lmdb_state.LmdbTableStore`` (an LMDB environment on every node).
Both hold the same bytes: the typed encoding is the machine's
(``raftsched.cluster.fsm.keys`` and ``layout``), so the same commands give byte-identical
tables in both (``state_hash``).

Contract (who calls, on which thread, what may be assumed):

* One writer: the state machine's transaction (``raftsched.cluster.fsm.tx``), on the Raft tick thread.
  ``begin`` opens a batch (the first ``put``/``delete`` does too);
  ``put``/``delete`` go into the open batch; the writer's own reads see them
  at once; ``commit`` ends the batch (LMDB: one write transaction per Raft
  entry, with the applied index in it). Readers on other threads see a whole
  batch or none of it. A write or commit the disk refuses raises
  ``StoreFailure`` (the LMDB store's ``abort`` then drops the batch: the
  store is what its last commit left).
* ``reading()``: a context in which this thread's reads see one committed
  state (LMDB: a read transaction; no lock that the writer needs). Outside
  one, a read on another thread sees the latest commit.
* ``scan`` answers a list of at most ``limit`` pairs with ``start <= key <
  stop`` in key order (bytewise), never a lazy iterator: a caller may write
  while it walks what it got.
* ``get`` of a key the store cannot hold (LMDB: longer than its key size) is
  ``None``, not an error: such a key can never have been written.
* ``MemoryStore`` is for one thread (the unit tests) or readers that hold
  the writer's lock: it has no read transactions.
"""

from __future__ import annotations

import contextlib
import hashlib
import struct
from typing import Iterator, Protocol

from sortedcontainers import SortedDict

from raftsched.cluster.domain.errors import RaftschedError


class Table:
    """The names of the state's tables, in the order ``state_hash`` reads them (``ALL``; ``keys``: their keys).
    Plain strings, not an enum: one is looked up on every read and write."""

    META = "meta"  # the machine's small state: applied index, now, counts, membership
    JOBS = "jobs"  # job_id -> job
    RUNS = "runs"  # run_id -> run, or for a run kept in RANKED, b"\x00" + its key there (``keys.ranked_ref``)
    IDEMPOTENCY = "idem"  # idempotency key -> (key, job_id, fingerprint)
    JOB_RUNS = "job_runs"  # job_id, scheduled_ms, run_id -> "": every run of a job, by instant
    ACTIVE = "active"  # job_id, scheduled_ms, run_id -> "": PENDING and LEASED runs
    DUE = "due"  # next_fire_ms, job_id -> "": ACTIVE jobs by their next instant
    EXPIRY = "expiry"  # finished_ms + history_ttl_ms, run_id -> "": finished runs by when they go
    PURGE = "purge"  # when, job_id -> "": DELETED jobs by when they are looked at again
    FINISHED = "finished"  # job_id -> how many finished runs it keeps
    REQUESTS = "requests"  # request_id -> (request_id, fingerprint, kind, ref, expires_ms): answered requests
    REQUEST_EXPIRY = "req_expiry"  # expires_ms, request_id -> "": answered requests by when they are forgotten
    FAILED_RUNS = "failed_runs"  # job_id, scheduled_ms, run_id -> "": FAILED/DEAD_LETTER runs kept apart (format 3)
    FAILED = "failed"  # job_id -> how many of its finished runs FAILED_RUNS holds
    JOB_INFO = "job_info"  # job_id -> its summary and pause note (format 5: ``job_info``)
    RANKED = "ranked_runs"  # rank, not_before_ms, run_id -> run: runs in grant order (format 6: of jobs with a priority; 7: every new run)

    ALL = (
        META, JOBS, RUNS, IDEMPOTENCY, JOB_RUNS, ACTIVE, DUE, EXPIRY, PURGE, FINISHED, REQUESTS, REQUEST_EXPIRY, FAILED_RUNS,
        FAILED, JOB_INFO, RANKED,
    )  # fmt: skip


class StoreFailure(RaftschedError):
    """The store cannot write the entry now (its disk or map is full, an I/O error). The Raft adapter holds the
    entry back and tries it again later, rather than skip what the others apply or stop the node
    (``raftsched.raft.adapter``). The message names the store and what to do.

    ``storage_problem``: the words for the node's health (``disk full: <path> ...``); ``kept``: the store kept
    the batch's writes and its next ``commit`` tries them again, else the batch is lost and the entry must be
    applied again once the machine is rolled back to what the store holds."""

    def __init__(self, message: str, storage_problem: str = "", kept: bool = False) -> None:
        super().__init__(message)
        self.storage_problem = storage_problem or message
        self.kept = kept


#: the most pairs one ``scan`` answers unless told
SCAN_LIMIT = 1000


class TableStore(Protocol):
    def get(self, table: str, key: bytes) -> bytes | None: ...

    def put(self, table: str, key: bytes, value: bytes) -> None: ...

    def delete(self, table: str, key: bytes) -> None:
        """Remove ``key`` (nothing if it is not there)."""
        ...

    def scan(
        self, table: str, start: bytes = b"", stop: bytes | None = None, limit: int = SCAN_LIMIT
    ) -> list[tuple[bytes, bytes]]:
        """At most ``limit`` pairs with ``start <= key < stop`` (no ``stop``: to the end), in key order."""
        ...

    def scan_back(
        self, table: str, start: bytes = b"", stop: bytes | None = None, limit: int = SCAN_LIMIT
    ) -> list[tuple[bytes, bytes]]:
        """As ``scan``, from the other end: the pairs nearest below ``stop`` (no ``stop``: the last ones) first."""
        ...

    def count(self, table: str) -> int: ...

    def begin(self) -> None:
        """Open a batch of writes now, if none is open (the writer's reads then see it)."""
        ...

    def commit(self) -> None:
        """End the open batch of writes (LMDB: commit the write transaction)."""
        ...

    def reading(self) -> contextlib.AbstractContextManager[None]:
        """Reads of this thread inside the context see one committed state."""
        ...

    def clear(self) -> None:
        """Empty every table (in the open batch): a restore starts from nothing."""
        ...


class MemoryStore:
    """``TableStore`` in sorted dicts of bytes: what the LMDB store holds, without a file."""

    def __init__(self) -> None:
        self._tables: dict[str, SortedDict] = {t: SortedDict() for t in Table.ALL}
        self.commits = 0

    def get(self, table: str, key: bytes) -> bytes | None:
        value: bytes | None = self._tables[table].get(key)
        return value

    def put(self, table: str, key: bytes, value: bytes) -> None:
        self._tables[table][bytes(key)] = bytes(value)

    def delete(self, table: str, key: bytes) -> None:
        self._tables[table].pop(key, None)

    def scan(
        self, table: str, start: bytes = b"", stop: bytes | None = None, limit: int = SCAN_LIMIT
    ) -> list[tuple[bytes, bytes]]:
        rows = self._tables[table]
        out: list[tuple[bytes, bytes]] = []
        if limit <= 0:
            return out
        keys = rows.irange(minimum=start, maximum=stop, inclusive=(True, False)) if stop is not None else rows.irange(start)
        for key in keys:
            out.append((key, rows[key]))
            if len(out) >= limit:
                break
        return out

    def scan_back(
        self, table: str, start: bytes = b"", stop: bytes | None = None, limit: int = SCAN_LIMIT
    ) -> list[tuple[bytes, bytes]]:
        rows = self._tables[table]
        out: list[tuple[bytes, bytes]] = []
        if limit <= 0:
            return out
        keys = rows.irange(start, stop, (True, False), reverse=True) if stop is not None else rows.irange(start, reverse=True)
        for key in keys:
            out.append((key, rows[key]))
            if len(out) >= limit:
                break
        return out

    def count(self, table: str) -> int:
        return len(self._tables[table])

    def begin(self) -> None:
        pass

    def commit(self) -> None:
        self.commits += 1

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        yield

    def clear(self) -> None:
        for rows in self._tables.values():
            rows.clear()


def iter_table(
    store: TableStore, table: str, start: bytes = b"", stop: bytes | None = None, chunk: int = SCAN_LIMIT
) -> Iterator[tuple[bytes, bytes]]:
    """Every pair of ``table`` from ``start`` (to ``stop``), read ``chunk`` at a time."""
    while True:
        rows = store.scan(table, start, stop, chunk)
        yield from rows
        if len(rows) < chunk:
            return
        start = rows[-1][0] + b"\x00"  # the next key after the last one


_LEN = struct.Struct(">I")


def state_hash(store: TableStore) -> str:
    """SHA-256 of every table's bytes in key order: equal for equal states, whatever the store."""
    h = hashlib.sha256()
    for table in Table.ALL:
        h.update(table.encode() + b"\x00")
        for key, value in iter_table(store, table):
            h.update(_LEN.pack(len(key)) + key + _LEN.pack(len(value)) + value)
    return h.hexdigest()
