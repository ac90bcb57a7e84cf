"""The replicated job state machine: pure, deterministic, no I/O and no clock.

Contract (the hashicorp/raft FSM boundary):

* ``apply(data, index, pos)`` decodes one committed command and applies it
  through its handler in ``HANDLERS``. It is deterministic (same log, same
  state, on every node), never raises for a malformed entry (a ``Rejected``
  result), and returns an ``Ok``/``Rejected`` result to the proposer. The
  one exception: an entry this code does not understand (a newer command
  format, an unknown op) raises ``UnsupportedCommand``, which stops the node
  before it applies anything else (``raftsched.raft.adapter``) instead of
  letting its replica diverge. A command newer than the cluster's format is
  refused (``membership.format_gate``). ``index`` is the entry's Raft log
  index and ``pos`` the command's position in it (an entry may carry a
  group-committed batch): together they name manual runs and fencing tokens.
* Time only comes in commands. ``now_ms`` is the largest ``now`` seen so far,
  so a new leader whose clock lags can never move time backwards.
* ``commit()`` ends a Raft entry: every write of its commands, made through
  the machine's one transaction (``tx``), and the small state are committed
  as one (LMDB: one write transaction with the applied index). An entry at or
  below the committed index is skipped (``None``): a restart replays only the
  log after it. ``load()`` rereads the small state and rebuilds the in-memory
  indexes from the store (at start, after an install, after a rollback).
* ``snapshot()`` returns every record as one blob (``body``, for tools and
  tests) that ``restore()`` turns back into the same state in the store; a
  node's snapshots are copies of its store (``raftsched.raft.snapshotter``).
* Exactly-once firing: each job keeps a ``cursor``; every instant at or
  before it was fired or skipped (``fire``).
* From the cluster's command format 3 on, each run records its attempts and
  the steps that explain it as the handlers apply commands (``run_history``);
  a command with a ``request_id`` is answered once (``requests``).

Readers on other threads read committed records through ``view`` inside
``reading()``; the in-memory state (and the queries that read it) only under
the caller's lock (``raftsched.cluster.node.replica``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import ACTIVE_RUN_STATUSES, TERMINAL_RUN_STATUSES, Job, JobInfo, JobStatus, Run
from raftsched.cluster.domain.output import OutputKey
from raftsched.cluster.domain.results import Internal, InvalidArgument, Ok, Rejected, Result
from raftsched.cluster.domain.retention import kept_apart
from raftsched.cluster.fsm import (
    backfill,
    body,
    fire,
    job_info,
    jobs,
    keys,
    layout,
    leases,
    membership,
    queries,
    requests,
    retention,
    runs,
)
from raftsched.cluster.fsm.cache import CACHE_BYTES
from raftsched.cluster.fsm.memory import Memory
from raftsched.cluster.fsm.reader import RecordMap, RecordReader
from raftsched.cluster.fsm.store import StoreFailure, Table, TableStore, iter_table
from raftsched.cluster.fsm.tx import RunEvent, Tx

Handler = Callable[[Tx, Any], Result]


def _barrier(tx: Tx, cmd: c.Barrier) -> Result:
    """A no-op: once it is applied, everything committed before it is applied too."""
    return Ok(tx.index)


#: every command's handler: a function of the transaction and the command (a unit test checks each has one)
HANDLERS: dict[type, Handler] = {
    c.CreateJob: jobs.create_job,
    c.UpdateJob: jobs.update_job,
    c.PauseJob: jobs.pause_job,
    c.ResumeJob: jobs.resume_job,
    c.DeleteJob: jobs.delete_job,
    c.TriggerJob: jobs.trigger_job,
    c.BackfillJob: backfill.backfill,
    c.CancelRun: runs.cancel_run,
    c.RetryRun: runs.retry_run,
    c.Fire: fire.fire,
    c.AcquireLeases: leases.acquire,
    c.RenewLeases: leases.renew,
    c.CompleteRun: leases.complete,
    c.ExpireLeases: leases.expire,
    c.ExpirePending: leases.expire_pending,
    c.GraceLeases: leases.grace,
    c.PruneHistory: retention.prune,
    c.Barrier: _barrier,
    c.NodeInfo: membership.node_info,
    c.SeedMembers: membership.seed_members,
    c.AddMember: membership.add_member,
    c.RemoveMember: membership.remove_member,
    c.FinishMemberChange: membership.finish_member_change,
    c.SetClusterFormat: membership.set_cluster_format,
}


class _InMemory:
    """A machine attribute that is its in-memory state's (``memory.Memory``), read and set."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, machine: Any, owner: type | None = None) -> Any:
        return getattr(machine.tx.mem, self.name)

    def __set__(self, machine: Any, value: Any) -> None:
        setattr(machine.tx.mem, self.name, value)


class IdempotencyMap:
    """The stored idempotency keys: key -> (job_id, fingerprint of the spec it was created with)."""

    def __init__(self, store: TableStore) -> None:
        self._store = store

    def get(self, key: str) -> tuple[str, str] | None:
        raw = self._store.get(Table.IDEMPOTENCY, keys.idem_key(key))
        if raw is None:
            return None
        stored, job_id, fingerprint = layout.decode_idem(raw)
        return (job_id, fingerprint) if stored == key else None

    def items(self) -> Iterator[tuple[str, tuple[str, str]]]:
        for _, raw in iter_table(self._store, Table.IDEMPOTENCY):
            key, job_id, fingerprint = layout.decode_idem(raw)
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


class JobStateMachine:
    """All jobs and runs, and the indexes the leader and the API read (see the module docstring)."""

    now_ms = _InMemory()
    applied_index = _InMemory()
    committed_index = _InMemory()
    cluster_format = _InMemory()
    members = _InMemory()
    member_rafts = _InMemory()
    roster = _InMemory()
    member_change = _InMemory()
    removed_members = _InMemory()
    run_counts = _InMemory()
    job_counts = _InMemory()
    pending = _InMemory()
    pending_by_type = _InMemory()
    leases = _InMemory()
    lease_deadlines = _InMemory()

    def __init__(self, store: TableStore | None = None, cache_bytes: int = CACHE_BYTES) -> None:
        #: the one writer of the store (``tx``)
        self.tx = Tx(store, cache_bytes)
        store = self.tx.store
        #: read-only queries of committed records (any thread, inside ``reading()``)
        self.view = RecordReader(store)
        decoder = layout.Decoder()
        self.jobs: RecordMap[Job] = RecordMap(store, Table.JOBS, lambda raw: self.view.with_info(decoder.decode(raw)))
        self.runs: RecordMap[Run] = RecordMap(store, Table.RUNS, layout.decode_run)
        self.idempotency = IdempotencyMap(store)
        self.load()

    @property
    def store(self) -> TableStore:
        return self.tx.store

    # ------------------------------------------------------------ apply, commit, load

    def apply(self, data: bytes, index: int, pos: int = 0) -> Result | None:
        """Apply one committed command (command ``pos`` of entry ``index``); None for an entry the store already
        holds. Raises only to stop the replica (``UnsupportedCommand``) or to have the entry held back
        (``StoreFailure``: the store cannot write it now)."""
        if index <= self.tx.mem.committed_index:
            return None
        try:
            cmd = c.decode(data)
        except c.UnsupportedCommand as exc:
            newer = sorted(
                f"{node} runs {ver} (command format {fmt})" for node, (ver, fmt) in self.members.items() if fmt > exc.known
            )
            told = f" ({'; '.join(newer)})" if newer else ""
            raise c.UnsupportedCommand(f"entry {index}: {exc}{told}", exc.command_format, exc.op, exc.known) from exc
        except c.CommandFormatError as exc:
            return InvalidArgument(f"entry {index} was not applied: {exc}")
        return self.apply_command(cmd, index, pos)

    def apply_command(self, cmd: c.Command, index: int, pos: int = 0) -> Result:
        tx = self.tx
        mem = tx.mem
        if index > mem.applied_index:
            mem.applied_index = index
        tx.begin(index, pos)  # the entry's reads and writes in one batch
        if cmd.now_ms > mem.now_ms:
            mem.now_ms = cmd.now_ms
        refused = membership.format_gate(mem, cmd)
        if refused is not None:
            return refused
        handler = HANDLERS[type(cmd)]
        request_id: str = getattr(cmd, "request_id", "")
        try:
            seen = requests.seen(tx, cmd, request_id) if request_id else None
            if seen is not None:
                result: Result = seen  # the first answer, again: nothing else is applied
            else:
                result = handler(tx, cmd)
                if request_id:
                    requests.remember(tx, cmd, request_id, result)
        except StoreFailure:
            raise  # this replica cannot write now: the entry is held back, never skipped (raftsched.raft.adapter)
        except Exception as exc:  # a bug: report it identically on every node rather than wedge Raft
            result = Internal(f"entry {index} ({type(cmd).__name__}) failed to apply: {exc!r}")
        tx.end_command()
        return result

    def commit(self) -> None:
        """End of a Raft entry: the small state joins the entry's writes, and the store commits them as one."""
        self.tx.commit()

    def load(self) -> None:
        """(Re)read the small state from the store and rebuild the in-memory indexes. Raises ValueError for a store
        this code cannot read (a newer layout, or a cluster on a newer command format)."""
        tx = self.tx
        tx.reset()
        for key, _ in tx.rows(Table.ACTIVE):
            run = tx.run(keys.run_id_of(key))
            if run is not None and run.status in ACTIVE_RUN_STATUSES:
                runs.index_live(tx, run)
        tx.end_command()
        membership.check_format_number(tx.mem.cluster_format)

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """This thread's reads of the store inside see one committed state."""
        with self.tx.store.reading():
            yield

    def drain_events(self) -> list[RunEvent]:
        return self.tx.drain()

    def drain_changes(self) -> tuple[list[RunEvent], list[bytes | None]]:
        """``drain_events``, with the record each event's command wrote for its run (``Tx.records``)."""
        return self.tx.drain_with_records()

    # ------------------------------------------------------------ the blob

    def snapshot(self) -> bytes:
        """Every record as one blob (``body``): for tools and tests. A node's snapshots are copies of its store."""
        mem = self.tx.mem
        return body.encode(
            mem.now_ms, mem.applied_index, self.view.iter_jobs(), self.view.iter_runs(), dict(self.idempotency.items()),
            mem.members, mem.membership(), requests.rows(self.tx),
            [(key.decode("utf-8"), tuple(job_info.decode(raw))) for key, raw in self.tx.rows(Table.JOB_INFO)],
            {key[9:].decode("utf-8"): key for key, _ in self.tx.rows(Table.RANKED)},
        )  # fmt: skip

    def restore(self, data: bytes) -> None:
        """Discard all state and load ``data`` (from ``snapshot``, or a snapshot body of a version that kept its state
        in memory), then commit it. Raises ValueError on a bad snapshot (or one whose cluster uses a command format
        this code does not understand), before anything is changed."""
        state = body.decode(data)
        membership.check_format_number(state.membership.cluster_format, "snapshot")
        tx = self.tx
        tx.clear()
        mem = tx.mem = Memory()
        mem.now_ms, mem.applied_index = state.now_ms, state.applied
        mem.set_membership(state.members, state.membership)
        _restore_records(tx, state)
        requests.restore(tx, state.requests)
        tx.commit()
        self.load()

    # ------------------------------------------------------------ queries (under the caller's lock)

    def due_jobs(self, until_ms: int, limit: int) -> list[tuple[str, int]]:
        """(job_id, next_fire_ms) of ACTIVE jobs due at or before ``until_ms``, earliest first (a cursor over the
        stored due index: never a scan of all jobs)."""
        return [queries.due_item(key) for key in queries.due_page(self.tx, until_ms, limit)]

    def due_page(self, until_ms: int, limit: int) -> list[bytes]:
        """``due_jobs`` as the due index's keys (``due_item`` reads one): the leader loop, which scans past the items
        it already proposed on every look, decodes only those it proposes."""
        return queries.due_page(self.tx, until_ms, limit)

    def next_due_ms(self) -> int | None:
        return queries.next_due_ms(self.tx)

    def due_keys(self) -> list[tuple[int, str]]:
        return queries.due_keys(self.tx)

    def expired_leases(self, now_ms: int, limit: int) -> list[tuple[str, int]]:
        return queries.expired_leases(self.tx, now_ms, limit)

    def expired_pending(self, now_ms: int, limit: int) -> list[str]:
        """Ids of PENDING runs past their job's ``pending_ttl`` at ``now_ms``, earliest first (in memory only)."""
        out: list[str] = []
        for _, run_id in self.tx.mem.pending_deadlines.irange(maximum=(now_ms, "\uffff")):
            out.append(run_id)
            if len(out) >= limit:
                break
        return out

    def queue_depths(self) -> dict[str, int]:
        """PENDING runs per queue (of every priority), only queues that have any."""
        mem = self.tx.mem
        depths = {q: len(found) for q, found in mem.pending.items() if found}
        for (q, _), found in mem.prio_pending.items():
            depths[q] = depths.get(q, 0) + len(found)
        return depths

    def next_pending_deadline(self) -> int | None:
        deadlines = self.tx.mem.pending_deadlines
        return int(deadlines[0][0]) if deadlines else None

    def lease_output(self, lease_id: str, token: int) -> OutputKey | None:
        return queries.lease_output(self.tx, lease_id, token)

    def lease_ttls(self, lease_ids: list[str]) -> dict[str, int]:
        return queries.lease_ttls(self.tx, lease_ids)

    def next_lease_deadline(self) -> int | None:
        return queries.next_lease_deadline(self.tx)

    def next_leasable_ms(self, queues: list[str], types: tuple[str, ...] | list[str] = ()) -> int | None:
        return queries.next_leasable_ms(self.tx, queues, types)

    def next_prune_ms(self) -> int | None:
        return queries.next_prune_ms(self.tx)

    def active_runs(self, job_id: str = "") -> list[Run]:
        return queries.active_runs(self.tx, self.view, job_id)

    def iter_jobs(self, after_id: str = "") -> Iterator[Job]:
        return self.view.iter_jobs(after_id)

    def iter_runs(self, after_id: str = "") -> Iterator[Run]:
        return self.view.iter_runs(after_id)

    def iter_job_runs(self, job_id: str, after: tuple[int, str] | None = None, newest_first: bool = False) -> Iterator[Run]:
        """A job's runs by (scheduled instant, run id) after ``after``; ``newest_first``: the other way, from before
        ``after`` (None: from the newest)."""
        return self.view.iter_job_runs(job_id, after, newest_first)

    def failed_count(self, job_id: str) -> int:
        """How many of the job's finished runs are kept apart as failures (``retention``)."""
        return layout.decode_int(self.tx.get(Table.FAILED, keys.id_key(job_id)))

    def request_rows(self) -> list[body.RequestRow]:
        return requests.rows(self.tx)

    def format_gate(self, cmd: object) -> Rejected | None:
        return membership.format_gate(self.tx.mem, cmd)

    def change_in_flight(self, action: str, node_id: str) -> Rejected | None:
        return membership.change_in_flight(self.tx.mem, action, node_id)

    def is_removing(self, node_id: str) -> bool:
        return membership.is_removing(self.tx.mem, node_id)

    def forget_membership(self) -> None:
        """A restore into a new cluster forgets the old one's members (``membership.forget``). Not a command: a tool
        does it before any node of the new cluster starts (``raftsched.cluster.app.backup_restore``)."""
        membership.forget(self.tx.mem)


def _restore_records(tx: Tx, state: body.Body) -> None:
    """The blob's records and every index row that follows from them, into the cleared store."""
    mem = tx.mem
    ttl: dict[str, int] = {}
    for job in state.jobs:
        tx.add_job(job)
        mem.job_counts[job.status] += 1
        jobs.index_due(tx, job)
        ttl[job.job_id] = job.spec.history_ttl_ms
        if job.status is JobStatus.DELETED:
            retention.schedule_purge(tx, job, job.updated_ms + job.spec.history_ttl_ms)
    for idem, (job_id, fingerprint) in state.idempotency.items():
        tx.put(Table.IDEMPOTENCY, keys.idem_key(idem), layout.encode_idem(idem, job_id, fingerprint))
    tx.end_command()
    finished: dict[str, int] = {}
    failed: dict[str, int] = {}
    for run in state.runs:
        tx.add_new_run(run)
        ranked = state.placed.get(run.run_id)
        if ranked is not None:
            tx.place(run.run_id, ranked)
        mem.run_counts[run.status] += 1
        key = keys.job_run_key(run.job_id, run.scheduled_ms, run.run_id)
        tx.put(Table.JOB_RUNS, key, b"")
        if run.status in ACTIVE_RUN_STATUSES:
            tx.put(Table.ACTIVE, key, b"")
        elif run.status in TERMINAL_RUN_STATUSES:
            tx.put(Table.EXPIRY, keys.timed_key(run.finished_ms + ttl.get(run.job_id, 0), run.run_id), b"")
            finished[run.job_id] = finished.get(run.job_id, 0) + 1
            if kept_apart(run) and run.job_id in ttl:
                tx.put(Table.FAILED_RUNS, key, b"")
                failed[run.job_id] = failed.get(run.job_id, 0) + 1
    tx.end_command()
    for job_id, n in finished.items():
        tx.put(Table.FINISHED, keys.id_key(job_id), layout.encode_int(n))
    for job_id, n in failed.items():
        tx.put(Table.FAILED, keys.id_key(job_id), layout.encode_int(n))
    for job_id, t in state.infos.items():
        tx.put(Table.JOB_INFO, keys.id_key(job_id), job_info.encode(JobInfo(*t)))
        if JobInfo(*t).paused_until_ms:  # its resume is due then
            paused = tx.job(job_id)
            if paused is not None and paused.status is JobStatus.PAUSED:
                tx.put(Table.DUE, keys.timed_key(JobInfo(*t).paused_until_ms, job_id), b"")


def due_item(key: bytes) -> tuple[str, int]:
    """(job_id, next_fire_ms) of a key of ``JobStateMachine.due_page``."""
    return queries.due_item(key)
