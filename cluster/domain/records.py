"""Typed access to the stored jobs and runs: a unit of work for apply, a reader for everyone else.

* ``UnitOfWork`` (one per command, on the Raft tick thread): every job and
  run a command reads is decoded once and cached in it; at the command's end
  ``flush`` encodes each cached record again and writes those whose bytes
  changed (and deletes the dropped ones). A rule mutates the records it got
  and never says which: nothing it changed can be left unwritten, so the
  in-memory and the LMDB store cannot diverge on a forgotten write. The
  records handed out (in results and events) are never touched again after
  the command: callers get them detached.
* ``RecordReader``: read-only queries over committed records (any thread,
  inside ``StateStore.reading()``): a job, a run, jobs and runs in id order
  from a key, a job's runs by instant, a job's active runs. Lazy iterators
  read a chunk of keys at a time.
* ``RecordMap``: the jobs or runs as a read-only ``Mapping`` (tests, tools).
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, Mapping, TypeVar

from cluster.domain import record_codec as rc
from cluster.domain.model import Job, Run
from cluster.domain.state_store import StateStore, Table, iter_table

R = TypeVar("R")
_CHUNK = 256


class _Cache(Generic[R]):
    """One table's records of a unit of work: id -> (record or None if dropped/missing, bytes as stored)."""

    __slots__ = ("_store", "_table", "_decode", "_encode", "_rows")

    def __init__(self, store: StateStore, table: Table, decode: Callable[[bytes], R], encode: Callable[[R], bytes]) -> None:
        self._store, self._table, self._decode, self._encode = store, table, decode, encode
        self._rows: dict[str, tuple[R | None, bytes | None]] = {}

    def get(self, ident: str) -> R | None:
        row = self._rows.get(ident)
        if row is not None:
            return row[0]
        raw = self._store.get(self._table, rc.id_key(ident))
        record = None if raw is None else self._decode(raw)
        self._rows[ident] = (record, raw)
        return record

    def add(self, ident: str, record: R) -> None:
        row = self._rows.get(ident)
        stored = row[1] if row is not None else self._store.get(self._table, rc.id_key(ident))
        self._rows[ident] = (record, stored)

    def drop(self, ident: str) -> None:
        row = self._rows.get(ident)
        stored = row[1] if row is not None else self._store.get(self._table, rc.id_key(ident))
        self._rows[ident] = (None, stored)

    def flush(self) -> None:
        store, table = self._store, self._table
        for ident, (record, stored) in self._rows.items():
            if record is None:
                if stored is not None:
                    store.delete(table, rc.id_key(ident))
                continue
            raw = self._encode(record)
            if raw != stored:
                store.put(table, rc.id_key(ident), raw)
        self._rows.clear()


class UnitOfWork:
    """The jobs and runs one command reads, changes, creates and drops (see the module docstring)."""

    __slots__ = ("jobs", "runs")

    def __init__(self, store: StateStore, decoder: rc.JobDecoder) -> None:
        self.jobs: _Cache[Job] = _Cache(store, Table.JOBS, decoder.decode, rc.encode_job)
        self.runs: _Cache[Run] = _Cache(store, Table.RUNS, rc.decode_run, rc.encode_run)

    def job(self, job_id: str) -> Job | None:
        return self.jobs.get(job_id)

    def run(self, run_id: str) -> Run | None:
        return self.runs.get(run_id)

    def flush(self) -> None:
        self.jobs.flush()
        self.runs.flush()


class RecordReader:
    """Read-only queries of committed jobs and runs (see the module docstring)."""

    def __init__(self, store: StateStore, decoder: rc.JobDecoder | None = None) -> None:
        self.store = store
        self._decoder = decoder or rc.JobDecoder()

    def job(self, job_id: str) -> Job | None:
        raw = self.store.get(Table.JOBS, rc.id_key(job_id))
        return None if raw is None else self._decoder.decode(raw)

    def run(self, run_id: str) -> Run | None:
        raw = self.store.get(Table.RUNS, rc.id_key(run_id))
        return None if raw is None else rc.decode_run(raw)

    def has_job(self, job_id: str) -> bool:
        return self.store.get(Table.JOBS, rc.id_key(job_id)) is not None

    def iter_jobs(self, after_id: str = "") -> Iterator[Job]:
        """Jobs with ids after ``after_id`` (all: ""), in id order."""
        start = rc.id_key(after_id) + b"\x00" if after_id else b""
        for _, raw in iter_table(self.store, Table.JOBS, start, chunk=_CHUNK):
            yield self._decoder.decode(raw)

    def iter_runs(self, after_id: str = "") -> Iterator[Run]:
        start = rc.id_key(after_id) + b"\x00" if after_id else b""
        for _, raw in iter_table(self.store, Table.RUNS, start, chunk=_CHUNK):
            yield rc.decode_run(raw)

    def job_run_keys(self, job_id: str, after: tuple[int, str] | None = None, limit: int = _CHUNK) -> list[tuple[int, str]]:
        """At most ``limit`` ``(scheduled_ms, run_id)`` of ``job_id``'s runs after ``after`` (None: from the first)."""
        return _job_keys(self.store, Table.JOB_RUNS, job_id, after, limit)

    def iter_job_runs(self, job_id: str, after: tuple[int, str] | None = None) -> Iterator[Run]:
        """``job_id``'s runs by (scheduled_ms, run_id), after ``after``."""
        while True:
            keys = self.job_run_keys(job_id, after, _CHUNK)
            for _, run_id in keys:
                run = self.run(run_id)
                if run is not None:
                    yield run
            if len(keys) < _CHUNK:
                return
            after = keys[-1]

    def active_keys(self, job_id: str, after: tuple[int, str] | None = None, limit: int = _CHUNK) -> list[tuple[int, str]]:
        """``(scheduled_ms, run_id)`` of ``job_id``'s PENDING and LEASED runs, by instant."""
        return _job_keys(self.store, Table.ACTIVE, job_id, after, limit)

    def active_runs(self, job_id: str, after: tuple[int, str] | None = None, limit: int = _CHUNK) -> list[Run]:
        runs = (self.run(run_id) for _, run_id in self.active_keys(job_id, after, limit))
        return [r for r in runs if r is not None]

    def active_page(self, job_id: str, after: bytes, limit: int) -> list[tuple[bytes, str]]:
        """(key, run_id) of at most ``limit`` active runs after key ``after`` (b"": from the first), in the index's
        order (job id, scheduled time): of ``job_id`` only, or of every job ("")."""
        if job_id:
            prefix = rc.job_prefix(job_id)
            start, stop = (after + b"\x00" if after else prefix), rc.prefix_end(prefix)
        else:
            start, stop = (after + b"\x00" if after else b""), None
        rows = self.store.scan(Table.ACTIVE, start, stop, limit)
        return [(key, rc.job_run_from(key, key.index(b"\x00") + 1)[1]) for key, _ in rows]


def _job_keys(store: StateStore, table: Table, job_id: str, after: tuple[int, str] | None, limit: int) -> list[tuple[int, str]]:
    prefix = rc.job_prefix(job_id)
    start = rc.job_run_key(job_id, after[0], after[1]) + b"\x00" if after is not None else prefix
    rows = store.scan(table, start, rc.prefix_end(prefix), limit)
    n = len(prefix)
    return [rc.job_run_from(key, n) for key, _ in rows]


class RecordMap(Mapping[str, R]):
    """The stored jobs (or runs) as a read-only mapping, in id order: every access reads the store."""

    def __init__(self, store: StateStore, table: Table, decode: Callable[[bytes], R]) -> None:
        self._store, self._table, self._decode = store, table, decode

    def __getitem__(self, ident: str) -> R:
        raw = self._store.get(self._table, rc.id_key(ident))
        if raw is None:
            raise KeyError(ident)
        return self._decode(raw)

    def __contains__(self, ident: object) -> bool:
        return isinstance(ident, str) and self._store.get(self._table, rc.id_key(ident)) is not None

    def __iter__(self) -> Iterator[str]:
        for key, _ in iter_table(self._store, self._table):
            yield key.decode("utf-8")

    def __len__(self) -> int:
        return self._store.count(self._table)

    def __bool__(self) -> bool:
        return bool(self._store.scan(self._table, limit=1))
