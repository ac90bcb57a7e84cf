"""The state machine's one transaction: the only writer of the store's records and index rows.

A handler (``jobs``, ``fire``, ``leases``, ``retention``, ``requests``,
``membership``, ``runs``) is a function ``(tx, cmd) -> Result`` and sees
the state only through its ``Tx``; nothing else of the machine writes the
store (``JobStateMachine`` owns its ``Tx``), so the write rule is held by a
structure rather than a convention:

* Records. ``job``, ``run`` and ``spec`` read a record (decoded once per
  command); a handler mutates the records it got and never says which.
  ``end_command`` — after every command — encodes each record the command
  held and writes those whose bytes changed (and deletes the dropped ones):
  nothing a rule changed can be left unwritten. The records a command
  handed out (in its result and events) are never touched again: the next
  command reads fresh ones. A record is compared with what was stored
  through its tuple (``layout``): one read and left as it was costs a
  tuple, not an encoding and a write.
* Where a run's record is stored: under its id in ``RUNS``, but for a run
  of a job with a priority made from command format 6 on (``place``),
  whose record is in ``RANKED`` in the order grants take runs for its whole
  life, its ``RUNS`` row pointing there (``keys.ranked_ref``): grants and
  completions taken by priority then rewrite records side by side.
  ``memory.placed`` knows where each active one is (rebuilt by reading
  every active run at ``load``); an ended one's place is read from its row.
* Index rows and the small tables (``put``, ``delete``, ``get``, ``scan``;
  keys from ``keys``): into the store's open batch at once, so the
  command's own reads see them. The record tables and ``meta`` are written
  only by ``end_command`` and ``commit`` (a unit test holds it).
* Events: what a command changed, ``(kind, run)`` (``events``), each with
  the bytes its command wrote for that run (``records``, handed over by
  ``drain_with_records``): the event hub keeps its history of changes in
  them instead of the runs (so that the collector does not walk tens of
  thousands of them) without encoding each run a second time. A dropped
  run's record is the one it was read from.
* ``commit`` ends the Raft entry: the records of its last command, the small
  state (``memory``) into ``meta`` where it changed, and the store commits
  the batch (LMDB: one write transaction with the applied index): an entry's
  records and rows are stored together or not at all.

What is kept between commands is in one cache with one budget (``cache``):
the stored bytes of runs (``kept_runs``) and the specs of jobs
(``kept_specs``). Every write of those tables goes through here, and a
cleared store forgets them (``forget``), so a kept value is always what the
store holds. (The decoder's interning and ``memory``'s membership bytes are
found by value, so never stale.)

Pure: no I/O of its own, no clock, no threads; on the Raft tick thread.
"""

from __future__ import annotations

import marshal
from typing import Any, Callable, Iterator

from raftsched.cluster.domain.model import Job, JobSpec, Run, RunStatus
from raftsched.cluster.fsm import keys, layout
from raftsched.cluster.fsm.cache import CACHE_BYTES, Budget, Kept, KeptSpecs, run_weight, spec_weight
from raftsched.cluster.fsm.memory import META_KEYS, Memory
from raftsched.cluster.fsm.reader import job_keys
from raftsched.cluster.fsm.store import MemoryStore, Table, TableStore, iter_table

#: (kind, run) pairs describing what an apply changed, for WatchRuns (``raftsched.cluster.node.event_hub``) and the
#: metrics; ``lease_expired`` (an ExpireLeases entry expired the run's lease: its retry or end follows as its own
#: event) is for the metrics only
RunEvent = tuple[str, Run]

#: the statuses of runs kept once written: an active run is read again by the command that leases, renews,
#: completes or expires it; an ended one seldom is, and under a backlog of live runs larger than the budget it
#: would push out runs that are about to be read
_READ_AGAIN = frozenset({RunStatus.PENDING, RunStatus.LEASED})
_ACTIVE_VALUES = frozenset(s.value for s in _READ_AGAIN)

#: the stored tuple of a run added without reading the store (``add_new_run``): it never equals a tuple, so
#: ``end_command`` writes the run
_UNREAD: Any = object()
#: the cache's answer for a run it does not hold
_NOT_KEPT: Any = object()


class Tx:
    """The transaction of the entry being applied (see the module docstring)."""

    __slots__ = (
        "_store", "_decoder", "budget", "kept_runs", "kept_specs", "mem", "events", "records", "index", "pos",
        "token_entry", "tokens_used", "_jobs", "_runs", "_written", "_dropping", "_raw", "_placing", "_where", "_spent",
        "_saved", "get", "put", "delete", "scan",
    )  # fmt: skip

    def __init__(self, store: TableStore | None = None, cache_bytes: int = CACHE_BYTES) -> None:
        self._store: TableStore = store if store is not None else MemoryStore()
        self._decoder = layout.Decoder()
        #: what is kept between commands, in one budget: run_id -> the run's stored bytes (None: no row); job_id ->
        #: (the job's stored ``JOB_SPEC`` fields, its spec)
        self.budget = Budget(cache_bytes)
        self.kept_runs: Kept[str, bytes | None] = Kept(self.budget)
        self.kept_specs = KeptSpecs(self.budget)
        self.mem = Memory()
        #: what the commands applied since the last ``drain`` changed
        self.events: list[RunEvent] = []
        #: for each of ``events`` whose command has ended, its run's record as that command wrote it (the bytes of
        #: that very state: a run an event holds is never changed once its command ended), or None (not written:
        #: dropped, or unchanged); the event hub keeps its history of changes in these bytes
        self.records: list[bytes | None] = []
        #: the entry being applied and the command's position in it: together they name manual runs and tokens
        self.index = 0
        self.pos = 0
        #: the entry that handed out fencing tokens last, and how many (not state: an entry is applied whole)
        self.token_entry = 0
        self.tokens_used = 0
        #: the records the command holds: id -> (record, or None if dropped or missing; its tuple as stored)
        self._jobs: dict[str, tuple[Job | None, Any]] = {}
        self._runs: dict[str, tuple[Run | None, Any]] = {}
        #: run_id -> (the run, its record) as this command wrote them (``records``)
        self._written: dict[str, tuple[Run, bytes]] = {}
        #: run_id -> (the run, its stored bytes) of runs read to be dropped (``run(keep=False)``): a dropped run's
        #: record is the one it was read from
        self._dropping: dict[str, tuple[Run, bytes]] = {}
        #: the bytes ``_stored_run`` decoded last
        self._raw: bytes | None = None
        #: runs this command placed in ``RANKED`` (``place``): their ``RUNS`` rows point there once it ends
        self._placing: set[str] = set()
        #: run_id -> the ``RANKED`` key of an ended run kept there that this command read (an active one's is in
        #: ``memory.placed``)
        self._where: dict[str, bytes] = {}
        #: jobs whose kept spec goes at the end of the command (``spec_spent``)
        self._spent: set[str] = set()
        #: ``meta``'s values as last written
        self._saved: dict[bytes, bytes] = {}
        store = self._store
        #: a row of an index or a small table (the store's own methods: see the rows section below)
        self.get: Callable[[str, bytes], bytes | None] = store.get
        self.put: Callable[[str, bytes, bytes], None] = store.put
        self.delete: Callable[[str, bytes], None] = store.delete
        #: at most ``limit`` rows of ``table`` with ``start <= key < stop``, in key order (``TableStore.scan``)
        self.scan: Callable[..., list[tuple[bytes, bytes]]] = store.scan

    @property
    def store(self) -> TableStore:
        return self._store

    # ------------------------------------------------------------ the entry

    def begin(self, index: int, pos: int) -> None:
        """Command ``pos`` of entry ``index`` begins: the store's batch is open (its reads see it)."""
        self._store.begin()
        self.index, self.pos = index, pos

    def end_command(self) -> None:
        """Write back every record the command held whose bytes changed (see the module docstring)."""
        if self._jobs:
            self._write_jobs()
        if self._runs:
            self._write_runs()
        if len(self.records) < len(self.events):
            self._record_events()
        if self._written:
            self._written.clear()
        if self._dropping:
            self._dropping.clear()
        if self._spent:
            for job_id in self._spent:
                self.kept_specs.forget(job_id)
            self._spent.clear()

    def _record_events(self) -> None:
        """``records`` of the events the command added: the bytes it wrote for each event's run."""
        written, records = self._written, self.records
        for _, run in self.events[len(records) :]:
            row = written.get(run.run_id)
            records.append(row[1] if row is not None and row[0] is run else None)

    def spec_spent(self, job_id: str) -> None:
        """The job's spec will seldom be read again (its run ended and its schedule has no instant left): its kept
        spec makes room once the command ends (the command itself may still read it)."""
        self._spent.add(job_id)

    def commit(self) -> None:
        """End of a Raft entry: its last records, the small state, and the store commits them as one."""
        self.end_command()
        saved = self._saved
        for key, raw in self.mem.meta_values().items():
            if saved.get(key) != raw:
                self._store.put(Table.META, key, raw)
                saved[key] = raw
        self._store.commit()
        self.mem.committed_index = self.mem.applied_index

    def reset(self) -> Memory:
        """Start over from what the store holds: a new small state read from ``meta``, nothing kept or held."""
        self.forget()
        self.mem = Memory()
        self.events = []
        self.records = []
        self.token_entry = self.tokens_used = 0
        get = self._store.get
        self.mem.read_meta(lambda key: get(Table.META, key))
        self._saved = {key: raw for key in META_KEYS if (raw := get(Table.META, key)) is not None}
        return self.mem

    def forget(self) -> None:
        """The store was replaced or cleared: nothing read or kept before is known any more."""
        self.budget.clear()
        self._jobs.clear()
        self._runs.clear()
        self._written.clear()
        self._dropping.clear()
        self._placing.clear()
        self._where.clear()
        self._spent.clear()

    def clear(self) -> None:
        """Empty every table in the open batch (a restore starts from nothing)."""
        self._store.clear()
        self.forget()
        self._saved = {}

    def drain(self) -> list[RunEvent]:
        events, self.events, self.records = self.events, [], []
        return events

    def drain_with_records(self) -> tuple[list[RunEvent], list[bytes | None]]:
        """``drain``, with each event's record (``records``; None for an event no command ended after)."""
        events, records = self.events, self.records
        self.events, self.records = [], []
        if len(records) < len(events):
            records += [None] * (len(events) - len(records))
        return events, records

    # ------------------------------------------------------------ rows
    # ``get``, ``put``, ``delete`` and ``scan`` are the store's own (bound in ``__init__``: one call each on the
    # hottest path); the record tables and ``meta`` are written only here (``end_command``, ``commit``), which a
    # unit test holds (tests/unit/fsm/test_structure.py)

    def rows(self, table: str) -> Iterator[tuple[bytes, bytes]]:
        """Every row of ``table``, read a chunk at a time."""
        return iter_table(self._store, table)

    def job_keys(self, table: str, job_id: str, after: tuple[int, str] | None, limit: int) -> list[tuple[int, str]]:
        """At most ``limit`` ``(scheduled_ms, run_id)`` of ``job_id``'s rows in ``table`` after ``after``."""
        return job_keys(self._store, table, job_id, after, limit)

    # ------------------------------------------------------------ jobs

    def job(self, job_id: str) -> Job | None:
        row = self._jobs.get(job_id)
        if row is not None:
            return row[0]
        stored = self._stored_job(job_id)
        job = None if stored is None else self._job_from(stored)
        self._jobs[job_id] = (job, stored)
        return job

    def add_job(self, job: Job) -> None:
        """A job this command made: ``end_command`` stores it."""
        row = self._jobs.get(job.job_id)
        self._jobs[job.job_id] = (job, row[1] if row is not None else self._stored_job(job.job_id))

    def drop_job(self, job_id: str) -> None:
        row = self._jobs.get(job_id)
        self._jobs[job_id] = (None, row[1] if row is not None else self._stored_job(job_id))

    def _stored_job(self, job_id: str) -> Any:
        raw = self._store.get(Table.JOBS, job_id.encode())
        return None if raw is None else marshal.loads(raw)

    def spec(self, job_id: str) -> JobSpec | None:
        """A job's spec (immutable: nothing to write back): the job's own if the command holds it, else kept, else
        read (and kept)."""
        held = self._jobs.get(job_id)
        if held is not None:
            return None if held[0] is None else held[0].spec
        kept = self.kept_specs.get(job_id)
        if kept is not None:
            return kept[1]
        raw = self._store.get(Table.JOBS, job_id.encode())
        if raw is None:
            return None
        part, spec, shared = self._decoder.spec_form(marshal.loads(raw))
        self._keep_spec(job_id, part, spec, shared)
        return spec

    def _keep_spec(self, job_id: str, part: tuple[Any, ...], spec: JobSpec, shared: bool) -> None:
        if shared:  # one form of many jobs: counted once (``KeptSpecs``)
            self.kept_specs.put_shared(job_id, part, spec)
        else:
            self.kept_specs.put(job_id, (part, spec), spec_weight(spec))

    def _job_from(self, t: tuple[Any, ...]) -> Job:
        """A stored job; its spec reused from the cache only if it was decoded from (or written as) these fields."""
        kept = self.kept_specs.get(t[layout.JOB_ID])
        part = t[layout.JOB_SPEC]
        if kept is not None and kept[0] == part:
            return self._decoder.job(t, kept[1])
        part, spec, shared = self._decoder.spec_form(t)
        job = self._decoder.job(t, spec)
        self._keep_spec(job.job_id, part, spec, shared)
        return job

    def _job_to(self, job: Job) -> tuple[Any, ...]:
        """The job's tuple as it is stored (written, or equal to what the store holds): its spec is kept."""
        kept = self.kept_specs.get(job.job_id)
        spec = job.spec
        if kept is not None and kept[1] is spec:
            part = kept[0]
        else:
            part = layout.spec_part(spec)
            form = self._decoder.intern_written(part, spec)
            if form is None:
                self.kept_specs.put(job.job_id, (part, spec), spec_weight(spec))
            else:  # one form of many jobs: counted once, as when the job is read back (``_job_from``)
                part = form[0]
                self.kept_specs.put_shared(job.job_id, part, form[1])
        return layout.job_head(job) + part

    def _write_jobs(self) -> None:
        store = self._store
        for job_id, (job, stored) in self._jobs.items():
            if job is None:
                if stored is not None:
                    store.delete(Table.JOBS, job_id.encode())
                    self.kept_specs.forget(job_id)
                continue
            now = self._job_to(job)
            if now != stored:
                store.put(Table.JOBS, job_id.encode(), marshal.dumps(now, layout.MARSHAL_VERSION))
        self._jobs.clear()

    # ------------------------------------------------------------ runs

    def run(self, run_id: str, keep: bool = True) -> Run | None:
        """The run (held for the command, written back by ``end_command``). ``keep=False``: one about to be dropped
        (retention), whose stored bytes are read without making room for them in the cache."""
        row = self._runs.get(run_id)
        if row is not None:
            return row[0]
        stored = self._stored_run(run_id, keep)
        run = None if stored is None else layout.run_from_tuple(stored)
        self._runs[run_id] = (run, stored)
        if not keep and run is not None and self._raw is not None:
            self._dropping[run_id] = (run, self._raw)
        return run

    def add_run(self, run: Run) -> None:
        """A run this command made, under an id the store may hold (``end_command`` writes it over)."""
        row = self._runs.get(run.run_id)
        self._runs[run.run_id] = (run, row[1] if row is not None else self._stored_run(run.run_id))

    def add_new_run(self, run: Run) -> None:
        """``add_run`` of a run made under a fresh id: whatever the store holds under it (nothing, as a rule) is not
        read, and ``end_command`` writes the run over it."""
        row = self._runs.get(run.run_id)
        self._runs[run.run_id] = (run, row[1] if row is not None else _UNREAD)

    def place(self, run_id: str, key: bytes) -> None:
        """Keep the run this command made (``add_new_run``) in ``RANKED`` under ``key``: ``end_command`` writes its
        record there and a pointer to it under its id in ``RUNS``, where it stays until the run is dropped."""
        self.mem.placed[run_id] = key
        self._placing.add(run_id)

    def drop_run(self, run_id: str) -> None:
        row = self._runs.get(run_id)
        self._runs[run_id] = (None, row[1] if row is not None else self._stored_run(run_id))
        read = self._dropping.pop(run_id, None) if self._dropping else None
        if read is not None and row is not None and row[0] is read[0]:
            self._written[run_id] = read  # its record (``records``): the bytes it was read from

    def _stored_run(self, run_id: str, keep: bool = True) -> Any:
        kept = self.kept_runs
        raw = kept.get(run_id, _NOT_KEPT)  # a kept None is a row known to be missing
        if raw is not _NOT_KEPT:
            self._raw = raw
            return None if raw is None else marshal.loads(raw)
        placed = self.mem.placed
        ranked = placed.get(run_id) if placed else None
        if ranked is not None:  # an active run kept in RANKED: read there, not through its row in RUNS
            raw = self._store.get(Table.RANKED, ranked)
        else:
            raw = self._store.get(Table.RUNS, run_id.encode())
            if raw is not None and raw[:1] == keys.RANKED_REF:  # kept in RANKED: known from here to the command's end
                ranked = self._where[run_id] = raw[1:]
                raw = self._raw = self._store.get(Table.RANKED, ranked)
                if raw is None:
                    return None
                t = marshal.loads(raw)
                if t[layout.RUN_STATUS] not in _ACTIVE_VALUES:
                    return t  # an ended run's place is known only through its row: never kept apart from it
                placed[run_id] = ranked  # (the first read since the indexes were rebuilt)
                if keep:
                    kept.put(run_id, raw, run_weight(len(raw)))
                return t
        self._raw = raw
        if not keep:
            return None if raw is None else marshal.loads(raw)
        if raw is None:
            kept.put(run_id, None, run_weight(0))
            return None
        kept.put(run_id, raw, run_weight(len(raw)))
        return marshal.loads(raw)

    def _write_runs(self) -> None:
        store, kept, placed = self._store, self.kept_runs, self.mem.placed
        where = self._where
        for run_id, (run, stored) in self._runs.items():
            ranked = placed.get(run_id) if placed else None
            if ranked is None and where:
                ranked = where.get(run_id)
            if ranked is not None:
                self._write_ranked(run_id, run, stored, ranked)
                continue
            if run is None:
                if stored is not None:  # _UNREAD too: a delete of a key not there does nothing
                    store.delete(Table.RUNS, run_id.encode())
                kept.forget(run_id)  # a dropped run is seldom asked for again: no room taken for its absence
                continue
            now = layout.run_to_tuple(run)
            if now != stored:
                raw = marshal.dumps(now, layout.MARSHAL_VERSION)
                store.put(Table.RUNS, run_id.encode(), raw)
                self._written[run_id] = (run, raw)
                if run.status in _READ_AGAIN:
                    kept.put(run_id, raw, run_weight(len(raw)))
                else:  # ended: read again rarely (retention drops it long after), so it makes room for live runs
                    kept.forget(run_id)
            # unchanged: what is kept (if it still is) equals it
        self._runs.clear()
        self._placing.clear()
        where.clear()

    def _write_ranked(self, run_id: str, run: Run | None, stored: Any, ranked: bytes) -> None:
        """``_write_runs`` of a run kept in ``RANKED`` under ``ranked`` (or placed there by this command): its record
        is written there, its row in ``RUNS`` points there, and both go when the run is dropped."""
        store, kept, placed = self._store, self.kept_runs, self.mem.placed
        new = run_id in self._placing
        if run is None:
            placed.pop(run_id, None)
            store.delete(Table.RANKED, ranked)
            if not new:
                store.delete(Table.RUNS, run_id.encode())
            kept.forget(run_id)
            return
        now = layout.run_to_tuple(run)
        raw = marshal.dumps(now, layout.MARSHAL_VERSION) if new or now != stored else None
        if raw is not None:
            store.put(Table.RANKED, ranked, raw)
            self._written[run_id] = (run, raw)
        if new:
            store.put(Table.RUNS, run_id.encode(), keys.ranked_ref(ranked))
        if run.status in _READ_AGAIN:
            placed[run_id] = ranked
            if raw is not None:
                kept.put(run_id, raw, run_weight(len(raw)))
        else:  # ended: its place is known through its row from now on (``_stored_run``)
            placed.pop(run_id, None)
            kept.forget(run_id)
