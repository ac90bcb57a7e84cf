"""The records and indexes of the job state machine, and the run bookkeeping every rule shares.

``StateBase`` is the data half of ``raftsched.cluster.domain.state.JobStateMachine``.
What grows with the backlog lives in a ``StateStore`` (``state_store``:
in memory for unit tests, LMDB on a node): jobs, runs, idempotency keys,
each job's runs, the active runs, the due index, the retention indexes.
In memory stays only what is small and must be fast, rebuilt from the store
by ``load``: PENDING runs per queue (and per queue and type), live leases
and their deadlines, counts by status, the membership, ``now`` and the
applied index. The rules (jobs and firing in ``state``, leases in
``lease_rules``, retention in ``retention_rules``) build on it; the two
hooks below are theirs.

Apply and store:

* Each command gets a unit of work (``records.UnitOfWork``): rules read jobs
  and runs through ``self.uow`` and mutate them; the command's end writes
  back every record whose bytes changed. Index rows are written as they
  change.
* ``commit()`` ends a Raft entry: the small state goes into ``meta`` and the
  store commits, all in one batch (LMDB: one transaction with the applied
  index). An entry at or below the committed index is already in the store
  and is skipped (a restart replays the log after it).
* A store failure (``StoreFailure``: full, I/O) is never turned into a
  result: the Raft adapter holds the entry back and stores it later
  (``raftsched.raft.adapter``) instead of letting this replica skip what the others
  applied; after a batch the store lost, ``load`` rebuilds what is kept in
  memory from what the store holds.

Pure: no I/O of its own, no clock, no threads. Readers on other threads use
``view`` (a ``RecordReader``) inside ``store.reading()``; the in-memory
indexes only under the caller's lock (``raftsched.cluster.node.replicated_state``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from sortedcontainers import SortedList

from raftsched.cluster.domain import record_codec as rc
from raftsched.cluster.domain.model import ACTIVE_RUN_STATUSES, Job, JobStatus, Member, MemberChange, Run, RunStatus
from raftsched.cluster.domain.records import RecordMap, RecordReader, UnitOfWork
from raftsched.cluster.domain.run_history import HISTORY_FORMAT, add_step
from raftsched.cluster.domain.state_store import MemoryStore, StateStore, Table, iter_table

#: (kind, run) pairs describing what an apply changed, for WatchRuns (``raftsched.cluster.node.event_hub``) and
#: the metrics; ``lease_expired`` (an ExpireLeases entry expired the run's lease: its retry or end
#: follows as its own event) is for the metrics only
RunEvent = tuple[str, Run]

#: the layout of the tables (``record_codec``); a store with a newer one is refused
LAYOUT = 1
_META_KEYS = (b"layout", b"applied", b"now", b"counts", b"membership")
#: the statuses in the order ``meta``'s counts are stored (an enum's iteration costs ~2 us on every entry)
_RUN_STATUSES = tuple(RunStatus)
_JOB_STATUSES = tuple(JobStatus)


class IdempotencyMap:
    """The stored idempotency keys: key -> (job_id, fingerprint of the spec it was created with)."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def get(self, key: str) -> tuple[str, str] | None:
        raw = self._store.get(Table.IDEMPOTENCY, rc.idem_key(key))
        if raw is None:
            return None
        stored, job_id, fingerprint = rc.decode_idem(raw)
        return (job_id, fingerprint) if stored == key else None

    def items(self) -> Iterator[tuple[str, tuple[str, str]]]:
        for _, raw in iter_table(self._store, Table.IDEMPOTENCY):
            key, job_id, fingerprint = rc.decode_idem(raw)
            yield key, (job_id, fingerprint)

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self.items())

    def __getitem__(self, key: str) -> tuple[str, str]:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def keys(self) -> Iterator[str]:
        return iter(self)


class StateBase:
    """All jobs and runs, and the indexes the leader and the API read."""

    def __init__(
        self, store: StateStore | None = None, run_bytes: int = UnitOfWork.RUN_BYTES, spec_bytes: int = UnitOfWork.SPEC_BYTES
    ) -> None:
        self.store: StateStore = store if store is not None else MemoryStore()
        self._decoder = rc.JobDecoder()
        #: read-only queries of committed records (any thread, inside ``store.reading()``)
        self.view = RecordReader(self.store)
        self.jobs: RecordMap[Job] = RecordMap(self.store, Table.JOBS, rc.JobDecoder().decode)
        self.runs: RecordMap[Run] = RecordMap(self.store, Table.RUNS, rc.decode_run)
        self.idempotency = IdempotencyMap(self.store)
        self.uow = UnitOfWork(self.store, self._decoder, run_bytes, spec_bytes)
        self.load()

    # ------------------------------------------------------------ the small state, and the store

    def _reset_memory(self) -> None:
        self.now_ms = 0
        self.applied_index = 0
        #: the applied index the store holds (entries at or below it are skipped)
        self.committed_index = 0
        #: node id -> (raftsched version, command format) as each node last reported it (``NodeInfo``)
        self.members: dict[str, tuple[str, int]] = {}
        #: node id -> Raft address each node reported with its ``NodeInfo`` (for the format switch)
        self.member_rafts: dict[str, str] = {}
        #: the cluster's members, their ids and addresses; the change in flight; members removed
        #: (``raftsched.cluster.domain.membership_rules``)
        self.roster: dict[str, Member] = {}
        self.member_change: MemberChange | None = None
        self.removed_members: dict[str, Member] = {}
        #: the command format the cluster uses (``SetClusterFormat``); 1 for a state from before formats
        self.cluster_format = 1
        self.pending: dict[str, SortedList] = {}  # queue -> (not_before_ms, run_id) of PENDING runs
        #: (queue, job type) -> the same keys as ``pending``, split by the type of each run's job (what a
        #: grant to an executor that serves some types reads; the key tuples are shared with ``pending``)
        self.pending_by_type: dict[tuple[str, str], SortedList] = {}
        self.leases: dict[str, str] = {}  # lease_id -> run_id of LEASED runs
        self.lease_deadlines: SortedList = SortedList()  # (lease_expires_ms, lease_id)
        #: how many runs (jobs) are in each status (kept as they change: GetClusterStatus, the metrics)
        self.run_counts: dict[RunStatus, int] = dict.fromkeys(RunStatus, 0)
        self.job_counts: dict[JobStatus, int] = dict.fromkeys(JobStatus, 0)
        self.events: list[RunEvent] = []
        #: the entry being applied and how many fencing tokens it handed out so far (not state:
        #: an entry is applied whole, never split by a snapshot)
        self._token_entry = 0
        self._tokens_used = 0
        self._pos = 0
        self._saved: dict[bytes, bytes] = {}
        #: the membership as last encoded, and its bytes (``_membership_raw``)
        self._membership_memo: tuple[Any, ...] | None = None

    def load(self) -> None:
        """(Re)read the small state from the store and rebuild the in-memory indexes. Raises ValueError for a
        store this code cannot read (a newer layout, or a cluster on a newer command format)."""
        self._reset_memory()
        self.uow.forget()
        get = self.store.get
        layout = rc.decode_int(get(Table.META, b"layout"), LAYOUT)
        if layout > LAYOUT:
            raise ValueError(f"the state has layout {layout}, newer than this node reads ({LAYOUT}): upgrade this node")
        self.applied_index = self.committed_index = rc.decode_int(get(Table.META, b"applied"))
        self.now_ms = rc.decode_int(get(Table.META, b"now"))
        counts = get(Table.META, b"counts")
        if counts is not None:
            runs, jobs = rc.decode_plain(counts)
            self.run_counts = dict(zip(RunStatus, runs))
            self.job_counts = dict(zip(JobStatus, jobs))
        membership = get(Table.META, b"membership")
        if membership is not None:
            self.members, m = rc.decode_membership(membership)
            self.roster = {x.node_id: x for x in m.roster}
            self.member_change, self.cluster_format = m.change, m.cluster_format
            self.removed_members = {x.node_id: x for x in m.removed}
            self.member_rafts = dict(m.rafts)
        self._saved = {key: raw for key in _META_KEYS if (raw := get(Table.META, key)) is not None}
        for key, _ in iter_table(self.store, Table.ACTIVE):
            run = self.uow.run(rc.job_run_from(key, key.index(b"\x00") + 1)[1])
            if run is not None and run.status in ACTIVE_RUN_STATUSES:
                self._index_live(run)
        self.uow.flush()
        self._check_format()

    def _check_format(self) -> None:
        """Raise ValueError if the state's cluster uses a command format this code does not know (``MembershipRules``)."""

    def _meta_values(self) -> dict[bytes, bytes]:
        run_counts, job_counts = self.run_counts, self.job_counts
        counts = (tuple([run_counts[s] for s in _RUN_STATUSES]), tuple([job_counts[s] for s in _JOB_STATUSES]))
        membership = self._membership_raw()
        return {
            b"layout": rc.encode_int(LAYOUT),
            b"applied": rc.encode_int(self.applied_index),
            b"now": rc.encode_int(self.now_ms),
            b"counts": rc.encode_plain(counts),
            b"membership": membership,
        }

    def _membership_raw(self) -> bytes:
        """The membership's bytes in ``meta``: encoded again only when it changed since the last entry (it
        rarely does, and every entry is committed with it)."""
        now = (self.members, self.member_rafts, self.roster, self.member_change, self.removed_members, self.cluster_format)
        memo = self._membership_memo
        if memo is not None and memo[:6] == now:
            raw: bytes = memo[6]
            return raw
        raw = rc.encode_membership(*now)
        members, rafts, roster, change, removed, cluster_format = now  # copies: the dicts change in place
        self._membership_memo = (dict(members), dict(rafts), dict(roster), change, dict(removed), cluster_format, raw)
        return raw

    def commit(self) -> None:
        """End of a Raft entry: the small state joins the entry's writes, and the store commits them as one."""
        self.uow.flush()
        for key, raw in self._meta_values().items():
            if self._saved.get(key) != raw:
                self.store.put(Table.META, key, raw)
                self._saved[key] = raw
        self.store.commit()
        self.committed_index = self.applied_index

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """This thread's reads of the store inside see one committed state."""
        with self.store.reading():
            yield

    # ------------------------------------------------------------ persisted indexes

    def _job_runs_add(self, run: Run) -> None:
        self.store.put(Table.JOB_RUNS, rc.job_run_key(run.job_id, run.scheduled_ms, run.run_id), b"")

    def _job_runs_discard(self, run: Run) -> None:
        self.store.delete(Table.JOB_RUNS, rc.job_run_key(run.job_id, run.scheduled_ms, run.run_id))

    def _job_run_keys(self, job_id: str, after: tuple[int, str] | None = None, limit: int = 256) -> list[tuple[int, str]]:
        return self.view.job_run_keys(job_id, after, limit)

    def _active_ids(self, job_id: str) -> list[str]:
        """Ids of ``job_id``'s PENDING and LEASED runs, by instant (read whole: callers change them)."""
        out: list[str] = []
        after: tuple[int, str] | None = None
        while True:
            keys = self.view.active_keys(job_id, after, 1000)
            out.extend(run_id for _, run_id in keys)
            if len(keys) < 1000:
                return out
            after = keys[-1]

    def _has_active(self, job_id: str) -> bool:
        return bool(self.view.active_keys(job_id, None, 1))

    # ------------------------------------------------------------ runs

    def _new_run(self, job: Job, run_id: str, scheduled_ms: int, manual: bool = False) -> Run:
        run = Run(run_id, job.job_id, job.spec.queue, scheduled_ms, self.now_ms, manual=manual)
        self.uow.runs.add_new(run_id, run)
        self.run_counts[RunStatus.PENDING] += 1
        key = rc.job_run_key(run.job_id, scheduled_ms, run_id)  # the same key in both tables: a job's runs by instant
        self.store.put(Table.JOB_RUNS, key, b"")
        self.store.put(Table.ACTIVE, key, b"")
        self._index_live(run)
        self.events.append(("fired", run))
        return run

    def _activate(self, run: Run) -> None:
        """The run becomes PENDING or LEASED: into the active runs, and the live indexes of its status."""
        self.store.put(Table.ACTIVE, rc.job_run_key(run.job_id, run.scheduled_ms, run.run_id), b"")
        self._index_live(run)

    def _deactivate(self, run: Run) -> None:
        """The run stops being PENDING or LEASED (call before its status changes)."""
        self.store.delete(Table.ACTIVE, rc.job_run_key(run.job_id, run.scheduled_ms, run.run_id))
        self._unindex_live(run)

    def _index_live(self, run: Run) -> None:
        """The in-memory indexes of an active run's status."""
        if run.status is RunStatus.PENDING:
            self._index_pending(run)
        elif run.status is RunStatus.LEASED:
            self.leases[run.lease_id] = run.run_id
            self.lease_deadlines.add((run.lease_expires_ms, run.lease_id))

    def _unindex_live(self, run: Run) -> None:
        if run.status is RunStatus.PENDING:
            self._unindex_pending(run)
        elif run.status is RunStatus.LEASED:
            self._release(run)

    def _run_type(self, run: Run) -> str:
        """The type a run executes as: its job's (current) type."""
        spec = self.uow.spec(run.job_id)
        return spec.type if spec is not None else ""

    def _index_pending(self, run: Run) -> None:
        key = (run.not_before_ms, run.run_id)
        queue = self.pending.get(run.queue)
        if queue is None:
            queue = self.pending[run.queue] = SortedList()
        queue.add(key)
        typed_key = (run.queue, self._run_type(run))
        typed = self.pending_by_type.get(typed_key)
        if typed is None:
            typed = self.pending_by_type[typed_key] = SortedList()
        typed.add(key)

    def _unindex_pending(self, run: Run) -> None:
        """Undo ``_index_pending`` (call it while the run's job still has the type it was indexed under)."""
        key = (run.not_before_ms, run.run_id)
        queue = self.pending.get(run.queue)
        if queue is not None:
            queue.discard(key)
        typed_key = (run.queue, self._run_type(run))
        typed = self.pending_by_type.get(typed_key)
        if typed is not None:
            typed.discard(key)
            if not typed:
                del self.pending_by_type[typed_key]

    def _finish(self, run: Run, status: RunStatus, error: str = "") -> None:
        self._deactivate(run)
        self._set_status(run, status)
        run.finished_ms = self.now_ms
        if error:
            run.error = error
        if self.cluster_format >= HISTORY_FORMAT and status is not RunStatus.SUCCEEDED:  # a success: its attempt says it
            add_step(run, self.now_ms, status.value.lower(), error or f"the run ended {status.value}")
        self.events.append(("finished", run))
        self._retain(run)

    def _step(self, run: Run, kind: str, detail: str | tuple[Any, ...], node_id: str = "") -> None:
        """Record a step of the run's explanation (from the cluster's command format 3 on: ``run_history``)."""
        if self.cluster_format >= HISTORY_FORMAT:
            add_step(run, self.now_ms, kind, detail, node_id)

    def _set_job_status(self, job: Job, status: JobStatus) -> None:
        """Every change of a kept job's status goes through here (``job_counts`` follows it)."""
        counts = self.job_counts
        counts[job.status] -= 1
        counts[status] += 1
        job.status = status

    def _set_status(self, run: Run, status: RunStatus) -> None:
        counts = self.run_counts
        counts[run.status] -= 1
        counts[status] += 1
        run.status = status

    # ------------------------------------------------------------ hooks of the rules

    def _release(self, run: Run) -> None:
        """A LEASED run leaves the lease indexes (``LeaseRules``)."""
        raise NotImplementedError

    def _retain(self, run: Run) -> None:
        """A run just finished: keep it within its job's history limits (``RetentionRules``)."""
        raise NotImplementedError

    def _unretain(self, run: Run) -> None:
        """A finished run becomes active again: out of the retention indexes (``RetentionRules``)."""
        raise NotImplementedError

    def prune_requests(self, limit: int) -> int:
        """Drop up to ``limit`` expired request ids (``RequestRules``)."""
        raise NotImplementedError
