"""Read-only queries of committed jobs and runs, for any thread (inside ``TableStore.reading()``).

* ``RecordReader``: a job, a run, jobs and runs in id order from a key, a
  job's runs by instant, a job's active runs. Lazy iterators read a chunk of
  keys at a time.
* ``RecordMap``: the jobs or runs as a read-only ``Mapping`` (tests, tools).
* ``job_keys``: a page of one job's rows of an index, which the transaction
  reads too (``tx``).
"""

from __future__ import annotations

import marshal
from typing import Callable, Iterator, Mapping, TypeVar

from raftsched.cluster.domain.model import Job, JobInfo, Run
from raftsched.cluster.fsm import keys
from raftsched.cluster.fsm.layout import Decoder, decode_run
from raftsched.cluster.fsm.store import Table, TableStore, iter_table

R = TypeVar("R")
_CHUNK = 256


class RecordReader:
    """Read-only queries of committed jobs and runs (see the module docstring)."""

    def __init__(self, store: TableStore, decoder: Decoder | None = None) -> None:
        self.store = store
        self._decoder = decoder or Decoder()

    def job(self, job_id: str) -> Job | None:
        raw = self.store.get(Table.JOBS, keys.id_key(job_id))
        return None if raw is None else self.with_info(self._decoder.decode(raw))

    def with_info(self, job: Job) -> Job:
        """The job with its ``JobInfo`` (its summary and pause: ``raftsched.cluster.fsm.job_info``), if it has one."""
        raw = self.store.get(Table.JOB_INFO, keys.id_key(job.job_id))
        if raw is not None:
            job.info = JobInfo(*marshal.loads(raw))
        return job

    def run(self, run_id: str) -> Run | None:
        raw = run_bytes(self.store, run_id)
        return None if raw is None else decode_run(raw)

    def has_job(self, job_id: str) -> bool:
        return self.store.get(Table.JOBS, keys.id_key(job_id)) is not None

    def iter_jobs(self, after_id: str = "") -> Iterator[Job]:
        """Jobs with ids after ``after_id`` (all: ""), in id order."""
        start = keys.id_key(after_id) + b"\x00" if after_id else b""
        for _, raw in iter_table(self.store, Table.JOBS, start, chunk=_CHUNK):
            yield self.with_info(self._decoder.decode(raw))

    def iter_runs(self, after_id: str = "") -> Iterator[Run]:
        start = keys.id_key(after_id) + b"\x00" if after_id else b""
        for key, raw in iter_table(self.store, Table.RUNS, start, chunk=_CHUNK):
            if raw[:1] == keys.RANKED_REF:
                found = run_bytes(self.store, key.decode("utf-8"), raw)
                if found is None:
                    continue  # dropped since this page was read (a read outside one transaction)
                raw = found
            yield decode_run(raw)

    def iter_job_runs(self, job_id: str, after: tuple[int, str] | None = None, newest_first: bool = False) -> Iterator[Run]:
        """``job_id``'s runs by (scheduled_ms, run_id), after ``after``; ``newest_first``: the other way, from
        before ``after`` (None: from the newest)."""
        while True:
            page = (_job_keys_back if newest_first else job_keys)(self.store, Table.JOB_RUNS, job_id, after, _CHUNK)
            for _, run_id in page:
                run = self.run(run_id)
                if run is not None:
                    yield run
            if len(page) < _CHUNK:
                return
            after = page[-1]

    def active_keys(self, job_id: str, after: tuple[int, str] | None = None, limit: int = _CHUNK) -> list[tuple[int, str]]:
        """``(scheduled_ms, run_id)`` of ``job_id``'s PENDING and LEASED runs, by instant."""
        return job_keys(self.store, Table.ACTIVE, job_id, after, limit)

    def active_runs(self, job_id: str, after: tuple[int, str] | None = None, limit: int = _CHUNK) -> list[Run]:
        runs = (self.run(run_id) for _, run_id in self.active_keys(job_id, after, limit))
        return [r for r in runs if r is not None]

    def active_page(self, job_id: str, after: bytes, limit: int) -> list[tuple[bytes, str]]:
        """(key, run_id) of at most ``limit`` active runs after key ``after`` (b"": from the first), in the index's
        order (job id, scheduled time): of ``job_id`` only, or of every job ("")."""
        if job_id:
            prefix = keys.job_prefix(job_id)
            start, stop = (after + b"\x00" if after else prefix), keys.prefix_end(prefix)
        else:
            start, stop = (after + b"\x00" if after else b""), None
        rows = self.store.scan(Table.ACTIVE, start, stop, limit)
        return [(key, keys.run_id_of(key)) for key, _ in rows]


def run_bytes(store: TableStore, run_id: str, raw: bytes | None = None) -> bytes | None:
    """The stored record of ``run_id`` (``raw``: its ``RUNS`` value, if read already), following its pointer into
    ``RANKED`` for a run kept there while active. Outside one read transaction the run may end between the two
    reads (its record then moves back under its id): it is read again."""
    if raw is None:
        raw = store.get(Table.RUNS, keys.id_key(run_id))
    for _ in range(8):
        if raw is None or raw[:1] != keys.RANKED_REF:
            return raw
        live = store.get(Table.RANKED, raw[1:])
        if live is not None:
            return live
        raw = store.get(Table.RUNS, keys.id_key(run_id))
    return None


def job_keys(store: TableStore, table: str, job_id: str, after: tuple[int, str] | None, limit: int) -> list[tuple[int, str]]:
    prefix = keys.job_prefix(job_id)
    start = keys.job_run_key(job_id, after[0], after[1]) + b"\x00" if after is not None else prefix
    rows = store.scan(table, start, keys.prefix_end(prefix), limit)
    n = len(prefix)
    return [keys.job_run_from(key, n) for key, _ in rows]


def _job_keys_back(
    store: TableStore, table: str, job_id: str, before: tuple[int, str] | None, limit: int
) -> list[tuple[int, str]]:
    prefix = keys.job_prefix(job_id)
    stop = keys.job_run_key(job_id, before[0], before[1]) if before is not None else keys.prefix_end(prefix)
    rows = store.scan_back(table, prefix, stop, limit)
    n = len(prefix)
    return [keys.job_run_from(key, n) for key, _ in rows]


class RecordMap(Mapping[str, R]):
    """The stored jobs (or runs) as a read-only mapping, in id order: every access reads the store (a run's
    record where it is kept: ``run_bytes``)."""

    def __init__(self, store: TableStore, table: str, decode: Callable[[bytes], R]) -> None:
        self._store, self._table, self._decode = store, table, decode

    def __getitem__(self, ident: str) -> R:
        if self._table == Table.RUNS:
            raw = run_bytes(self._store, ident)
        else:
            raw = self._store.get(self._table, keys.id_key(ident))
        if raw is None:
            raise KeyError(ident)
        return self._decode(raw)

    def __contains__(self, ident: object) -> bool:
        return isinstance(ident, str) and self._store.get(self._table, keys.id_key(ident)) is not None

    def __iter__(self) -> Iterator[str]:
        for key, _ in iter_table(self._store, self._table):
            yield key.decode("utf-8")

    def __len__(self) -> int:
        return self._store.count(self._table)

    def __bool__(self) -> bool:
        return bool(self._store.scan(self._table, limit=1))
