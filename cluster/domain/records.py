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

import marshal
from typing import Any, Callable, Generic, Iterator, Mapping, TypeVar

from raftsched.cluster.domain import record_codec as rc
from raftsched.cluster.domain import snapshot_codec
from raftsched.cluster.domain.kept import Kept
from raftsched.cluster.domain.model import Job, JobSpec, Run
from raftsched.cluster.domain.state_store import StateStore, Table, iter_table

R = TypeVar("R")
_CHUNK = 256
#: the stored tuple of a row whose record was added without reading the store (``_Cache.add_new``): it never
#: equals a tuple, so ``flush`` writes the record
_UNREAD: Any = object()
#: ``_Cache._stored``'s answer from its kept tuples for an id they do not hold
_NOT_KEPT: Any = object()


class _Cache(Generic[R]):
    """One table's records of a unit of work: id -> (record, or None if dropped or missing; its tuple as stored).

    A record is compared with what was stored through its plain tuple (``snapshot_codec``): a record read
    and left as it was costs one tuple, not an encoding and a write.

    ``keep`` > 0: the stored tuples (immutable, of immutable values) of the last records read or written are
    kept across commands, within ``keep`` bytes (``Kept``, weighed by their stored bytes), so a run that is
    fired, leased and completed by consecutive commands is read from the store once. Every write of the
    table goes through ``flush`` (or clears the store: ``forget``), so a kept tuple is always what the store
    holds."""

    __slots__ = ("_store", "_table", "_from", "_to", "_rows", "_written", "_kept")

    def __init__(
        self,
        store: StateStore,
        table: str,
        from_tuple: Callable[[Any], R],
        to_tuple: Callable[[R], Any],
        written: Callable[[str, R | None], None] = lambda ident, record: None,
        keep: int = 0,
    ) -> None:
        self._store, self._table, self._from, self._to, self._written = store, table, from_tuple, to_tuple, written
        self._rows: dict[str, tuple[R | None, Any]] = {}
        #: id -> the stored tuple (None: no row), or None if nothing is kept
        self._kept: Kept[str, Any] | None = Kept(keep) if keep > 0 else None

    def _stored(self, ident: str) -> Any:
        kept = self._kept
        if kept is not None:
            stored = kept.get(ident, _NOT_KEPT)  # a kept None is a row known to be missing
            if stored is not _NOT_KEPT:
                return stored
        raw = self._store.get(self._table, ident.encode())
        if raw is None:
            if kept is not None:
                kept.put(ident, None, _ROW_OVERHEAD)
            return None
        stored = marshal.loads(raw)
        if kept is not None:
            kept.put(ident, stored, _ROW_OVERHEAD + len(raw))
        return stored

    def forget(self) -> None:
        """The store was replaced or cleared: nothing kept is known any more."""
        if self._kept is not None:
            self._kept.clear()
        self._rows.clear()

    def held(self, ident: str) -> tuple[R | None, Any] | None:
        """The row of a record this unit of work holds (read, made or dropped), or None."""
        return self._rows.get(ident)

    def get(self, ident: str) -> R | None:
        row = self._rows.get(ident)
        if row is not None:
            return row[0]
        stored = self._stored(ident)
        record = None if stored is None else self._from(stored)
        self._rows[ident] = (record, stored)
        return record

    def add(self, ident: str, record: R) -> None:
        row = self._rows.get(ident)
        self._rows[ident] = (record, row[1] if row is not None else self._stored(ident))

    def add_new(self, ident: str, record: R) -> None:
        """``add`` of a record made by this command under a fresh id: whatever the store holds under it (nothing,
        as a rule) is not read, and ``flush`` writes the record over it."""
        row = self._rows.get(ident)
        self._rows[ident] = (record, row[1] if row is not None else _UNREAD)

    def drop(self, ident: str) -> None:
        row = self._rows.get(ident)
        self._rows[ident] = (None, row[1] if row is not None else self._stored(ident))

    def flush(self) -> None:
        if not self._rows:
            return
        store, table, to_tuple, written, kept = self._store, self._table, self._to, self._written, self._kept
        for ident, (record, stored) in self._rows.items():
            if record is None:
                if stored is not None:  # _UNREAD too: a delete of a key not there does nothing
                    store.delete(table, ident.encode())
                    written(ident, None)
                if kept is not None:
                    kept.put(ident, None, _ROW_OVERHEAD)
                continue
            now = to_tuple(record)
            if now != stored:
                raw = marshal.dumps(now, rc.MARSHAL_VERSION)
                store.put(table, ident.encode(), raw)
                written(ident, record)
                if kept is not None:
                    kept.put(ident, now, _ROW_OVERHEAD + len(raw))
            # unchanged: what is kept (if it still is) equals it
        self._rows.clear()


#: what a kept row's tuples take beyond its stored bytes (measured, the memory freed by forgetting 20,000 kept
#: runs of one-off jobs: 556 bytes each fired, 831 leased, 909 completed, against 237, 329 and ~360 stored)
_ROW_OVERHEAD = 550


class UnitOfWork:
    """The jobs and runs one command reads, changes, creates and drops (see the module docstring).

    ``spec(job_id)`` reads only a job's spec (immutable: nothing to write back), as the lease and retention
    rules need it for every run they touch; a job the command holds whole answers with its own.

    Specs are kept across commands, each with the stored fields it was decoded from or written as
    (``snapshot_codec.spec_part``), by job id, within a budget of bytes (``SPEC_BYTES``, estimated per
    spec by ``spec_weight``: payloads of up to 1 MiB count for what they hold); when it is full the oldest
    half is forgotten, so the specs of the jobs a burst fires are still there when their runs are leased
    and completed (a count of specs forgotten all at once kept none across a 100,000-job burst, and did
    not bound payloads at all). A job read again whose stored fields are those reuses the spec instead of
    decoding it, and a job written with the same spec reuses the fields instead of encoding them. Every
    write of the jobs table goes through ``flush`` (which keeps what it wrote) or clears the store
    (``forget``), so a kept spec is the one the store holds and ``spec()`` answers from it without a read;
    a spec is reused for a read only if the stored fields are equal too, so no kept spec can change a
    result."""

    #: the bytes of memory kept specs may take (``spec_weight``): ~115,000 specs of the usual size
    SPEC_BYTES = 128 << 20
    #: the bytes of memory stored run tuples kept across commands may take (``_Cache``): ~110,000 runs
    #: (fewer as their histories and results grow)
    RUN_BYTES = 96 << 20
    __slots__ = ("jobs", "runs", "_store", "_decoder", "_specs")

    def __init__(
        self, store: StateStore, decoder: rc.JobDecoder, run_bytes: int = RUN_BYTES, spec_bytes: int = SPEC_BYTES
    ) -> None:
        #: job_id -> (its stored spec fields, the spec)
        self._specs: Kept[str, tuple[tuple[Any, ...], JobSpec]] = Kept(spec_bytes)
        self.jobs: _Cache[Job] = _Cache(store, Table.JOBS, self._job_from, self._job_to, self._job_written)
        self.runs: _Cache[Run] = _Cache(
            store, Table.RUNS, snapshot_codec.run_from_tuple, snapshot_codec.run_to_tuple, keep=run_bytes
        )
        self._store, self._decoder = store, decoder

    def _keep_spec(self, job_id: str, part: tuple[Any, ...], spec: JobSpec) -> None:
        self._specs.put(job_id, (part, spec), spec_weight(spec))

    def _job_from(self, t: tuple[Any, ...]) -> Job:
        kept = self._specs.get(t[0])
        if kept is not None and kept[0] == t[9:]:
            return self._decoder.job(t, kept[1])
        job = self._decoder.job(t)
        self._keep_spec(job.job_id, t[9:], job.spec)
        return job

    def _job_to(self, job: Job) -> tuple[Any, ...]:
        """The job's tuple as ``flush`` stores it (written, or equal to what the store holds): its spec is kept."""
        kept = self._specs.get(job.job_id)
        spec = job.spec
        if kept is not None and kept[1] is spec:
            part = kept[0]
        else:
            part = snapshot_codec.spec_part(spec)
            self._keep_spec(job.job_id, part, spec)
        return snapshot_codec.job_head(job) + part

    def _job_written(self, job_id: str, job: Job | None) -> None:
        if job is None:  # dropped (a written job's spec was kept by ``_job_to``)
            self._specs.forget(job_id)

    def forget(self) -> None:
        """The store was replaced or cleared (a restore, an install): nothing read before is known any more."""
        self._specs.clear()
        self.jobs.forget()
        self.runs.forget()

    def job(self, job_id: str) -> Job | None:
        return self.jobs.get(job_id)

    def spec(self, job_id: str) -> JobSpec | None:
        held = self.jobs.held(job_id)
        if held is not None:
            return None if held[0] is None else held[0].spec
        kept = self._specs.get(job_id)
        if kept is not None:
            return kept[1]
        raw = self._store.get(Table.JOBS, job_id.encode())
        if raw is None:
            return None
        t = marshal.loads(raw)
        spec = self._decoder.spec(t)
        self._keep_spec(job_id, t[9:], spec)
        return spec

    def run(self, run_id: str) -> Run | None:
        return self.runs.get(run_id)

    def flush(self) -> None:
        self.jobs.flush()
        self.runs.flush()


#: what a kept spec takes beyond its name and payload: the spec, its stored fields, their numbers and strings
#: (measured, the memory freed by forgetting 20,000 kept specs of one-off jobs: ~1,140 bytes each; the 640 this
#: was before counted them at half what they took)
_SPEC_OVERHEAD = 1150


def spec_weight(spec: JobSpec) -> int:
    """The bytes of memory a kept spec is counted for: an estimate, cheap enough to take on every keep."""
    return _SPEC_OVERHEAD + len(spec.name) + len(spec.payload)


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

    def iter_job_runs(self, job_id: str, after: tuple[int, str] | None = None, newest_first: bool = False) -> Iterator[Run]:
        """``job_id``'s runs by (scheduled_ms, run_id), after ``after``; ``newest_first``: the other way, from
        before ``after`` (None: from the newest)."""
        while True:
            keys = (_job_keys_back if newest_first else _job_keys)(self.store, Table.JOB_RUNS, job_id, after, _CHUNK)
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


def _job_keys(store: StateStore, table: str, job_id: str, after: tuple[int, str] | None, limit: int) -> list[tuple[int, str]]:
    prefix = rc.job_prefix(job_id)
    start = rc.job_run_key(job_id, after[0], after[1]) + b"\x00" if after is not None else prefix
    rows = store.scan(table, start, rc.prefix_end(prefix), limit)
    n = len(prefix)
    return [rc.job_run_from(key, n) for key, _ in rows]


def _job_keys_back(
    store: StateStore, table: str, job_id: str, before: tuple[int, str] | None, limit: int
) -> list[tuple[int, str]]:
    prefix = rc.job_prefix(job_id)
    stop = rc.job_run_key(job_id, before[0], before[1]) if before is not None else rc.prefix_end(prefix)
    rows = store.scan_back(table, prefix, stop, limit)
    n = len(prefix)
    return [rc.job_run_from(key, n) for key, _ in rows]


class RecordMap(Mapping[str, R]):
    """The stored jobs (or runs) as a read-only mapping, in id order: every access reads the store."""

    def __init__(self, store: StateStore, table: str, decode: Callable[[bytes], R]) -> None:
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
