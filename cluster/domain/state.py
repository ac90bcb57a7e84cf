"""The replicated job state machine: pure, deterministic, no I/O and no clock.

Contract (the hashicorp/raft FSM boundary):

* ``apply(data, index, pos)`` decodes one committed command and applies it.
  It is deterministic (same log, same state, on every node), never raises for
  a malformed entry (a ``Rejected`` result), and returns an ``Ok``/``Rejected``
  result to the proposer. The one exception: an entry this code does not
  understand (a newer command format, an unknown op) raises
  ``UnsupportedCommand``, which stops the node before it applies anything
  else (``raftsched.raft.adapter``) instead of letting its replica diverge. A command
  newer than the cluster's format is refused (``MembershipRules.format_gate``). ``index`` is the entry's Raft
  log index and ``pos`` the command's position in it (an entry may carry a
  group-committed batch): together they name manual runs and fencing tokens.
* Time only comes in commands. ``now_ms`` is the largest ``now`` seen so far,
  so a new leader whose clock lags can never move time backwards.
* Records and indexes live in a ``StateStore`` (``state_base``): a unit of
  work per command writes back what it changed, ``commit()`` ends a Raft
  entry (one store transaction with the applied index), and an entry at or
  below the store's committed index is skipped (``None``): a restart replays
  only the log after it.
* ``snapshot()`` returns every record as bytes (``snapshot_codec``, for
  tools and tests) that ``restore()`` turns back into the same state in the
  store; a node's snapshots are copies of its store (``raftsched.raft.snapshotter``).
* Exactly-once firing: each job keeps a ``cursor``; every instant at or
  before it was fired or skipped. Cron instants follow the rules of the
  cluster's command format (``raftsched.cluster.domain.cron_legacy``), switched at the
  same entry on every node. A ``Fire`` item applies only while the
  job's ``next_fire_ms`` still equals the proposer's expectation.

* From the cluster's command format 3 on, each run records its attempts and
  the steps that explain it as the rules apply commands (``run_history``);
  a command with a ``request_id`` is answered once (``request_rules``).

Readers on other threads read committed records through ``view`` inside ``reading()``; the in-memory
indexes (and the queries here that read them) only under the caller's lock (``raftsched.cluster.node.replicated_state``).
"""

from __future__ import annotations

from typing import Iterator

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain import record_codec as rc
from raftsched.cluster.domain import snapshot_codec
from raftsched.cluster.domain.cron_legacy import under_rules
from raftsched.cluster.domain.firing import FireAt, Skip, Window, plan, skip_through
from raftsched.cluster.domain.lease_rules import LeaseRules
from raftsched.cluster.domain.membership_rules import MembershipRules
from raftsched.cluster.domain.model import (
    ACTIVE_RUN_STATUSES,
    TERMINAL_RUN_STATUSES,
    ConcurrencyPolicy,
    Job,
    JobStatus,
    Run,
    RunStatus,
    manual_run_id,
    run_id_for,
)
from raftsched.cluster.domain.records import UnitOfWork
from raftsched.cluster.domain.recovery_rules import RecoveryRules
from raftsched.cluster.domain.request_rules import RequestRules
from raftsched.cluster.domain.results import (
    AlreadyExists,
    FailedPrecondition,
    FireReport,
    Internal,
    InvalidArgument,
    NotFound,
    Ok,
    ResourceExhausted,
    Result,
)
from raftsched.cluster.domain.retention_rules import RetentionRules, kept_apart
from raftsched.cluster.domain.run_history import fired_detail, skipped_detail
from raftsched.cluster.domain.schedule import first_fire, next_fire
from raftsched.cluster.domain.spec_codec import spec_fingerprint
from raftsched.cluster.domain.state_base import RunEvent
from raftsched.cluster.domain.state_store import StateStore, StoreFailure, Table, iter_table

SNAPSHOT_FORMAT = snapshot_codec.FORMAT


class JobStateMachine(LeaseRules, RetentionRules, RecoveryRules, RequestRules, MembershipRules):
    """All jobs and runs, and the indexes the leader and the API read."""

    def __init__(
        self, store: StateStore | None = None, run_bytes: int = UnitOfWork.RUN_BYTES, spec_bytes: int = UnitOfWork.SPEC_BYTES
    ) -> None:
        super().__init__(store, run_bytes, spec_bytes)

    # ------------------------------------------------------------ apply

    def apply(self, data: bytes, index: int, pos: int = 0) -> Result | None:
        """Apply one committed command (command ``pos`` of entry ``index``); None for an entry the store
        already holds. Raises only to stop the replica (``UnsupportedCommand``) or to have the entry held back
        (``StoreFailure``: the store cannot write it now)."""
        if index <= self.committed_index:
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
        if index > self.applied_index:
            self.applied_index = index
        self.store.begin()  # the entry's reads and writes in one batch
        self._pos = pos
        if cmd.now_ms > self.now_ms:
            self.now_ms = cmd.now_ms
        refused = self.format_gate(cmd)
        if refused is not None:
            return refused
        handler = c.HANDLERS[type(cmd)]
        request_id: str = getattr(cmd, "request_id", "")
        try:
            seen = self.seen_request(cmd, request_id) if request_id else None
            if seen is not None:
                result: Result = seen  # the first answer, again: nothing else is applied
            else:
                result = handler(self, cmd, index)
                if request_id:
                    self.remember_request(cmd, request_id, result)
        except StoreFailure:
            raise  # this replica cannot write now: the entry is held back, never skipped (raftsched.raft.adapter)
        except Exception as exc:  # a bug: report it identically on every node rather than wedge Raft
            result = Internal(f"entry {index} ({type(cmd).__name__}) failed to apply: {exc!r}")
        self.uow.flush()
        return result

    # ------------------------------------------------------------ jobs

    @c.handles(c.CreateJob)
    def _create_job(self, cmd: c.CreateJob, index: int) -> Result:
        # the spec's fingerprint is read only to compare with a kept one (a JSON encoding and a SHA-256: not
        # worth it for the common create, with neither an idempotency key nor a job under its id)
        fingerprint = cmd.fingerprint or (spec_fingerprint(cmd.spec) if cmd.idempotency_key else "")
        if cmd.idempotency_key:
            known = self.idempotency.get(cmd.idempotency_key)
            if known is not None:
                known_id, known_fp = known
                if known_fp == fingerprint:
                    return Ok(self.uow.job(known_id))
                return AlreadyExists(
                    f"idempotency key {cmd.idempotency_key!r} was already used for job {known_id} with a "
                    "different spec; use a new key for a new job"
                )
        existing = self.uow.job(cmd.job_id)
        if existing is not None:  # the same proposal applied twice
            if spec_fingerprint(existing.spec) == (fingerprint or spec_fingerprint(cmd.spec)):
                return Ok(existing)
            return AlreadyExists(f"job {cmd.job_id} already exists")
        kept = sum(self.job_counts.values())
        if cmd.max_jobs and kept >= cmd.max_jobs:
            return ResourceExhausted(
                f"the cluster keeps {kept} jobs, its limit [limits] max_jobs = {cmd.max_jobs} "
                "(deleted jobs count until purged): delete jobs or raise max_jobs"
            )
        anchor = self.now_ms
        nxt = first_fire(under_rules(cmd.spec.schedule, self.cluster_format), anchor)
        cursor = anchor if nxt is None else min(anchor, nxt - 1)
        status = JobStatus.ACTIVE if nxt is not None else JobStatus.COMPLETED
        job = Job(cmd.job_id, cmd.spec, status, anchor, cursor, nxt, anchor, anchor, cmd.idempotency_key)
        self.uow.jobs.add(job.job_id, job)
        self.job_counts[job.status] += 1
        if cmd.idempotency_key:
            key = cmd.idempotency_key
            self.store.put(Table.IDEMPOTENCY, rc.idem_key(key), rc.encode_idem(key, job.job_id, fingerprint))
        self._index_job(job)
        return Ok(job)

    def _get_job_for_change(self, job_id: str) -> Job | NotFound:
        job = self.uow.job(job_id)
        if job is None:
            return NotFound(f"job {job_id} not found")
        return job

    @c.handles(c.UpdateJob)
    def _update_job(self, cmd: c.UpdateJob, index: int) -> Result:
        job = self._get_job_for_change(cmd.job_id)
        if isinstance(job, NotFound):
            return job
        if job.status is JobStatus.DELETED:
            return FailedPrecondition(f"job {job.job_id} is deleted; create a new job instead")
        self._unindex_job(job)
        if job.spec.schedule != cmd.spec.schedule:
            job.anchor_ms = self.now_ms
            schedule = under_rules(cmd.spec.schedule, self.cluster_format)
            nxt = first_fire(schedule, job.anchor_ms)
            if nxt is not None and nxt <= job.cursor_ms:
                nxt = next_fire(schedule, job.cursor_ms, job.anchor_ms)
            job.next_fire_ms = nxt
            if job.status is JobStatus.COMPLETED and nxt is not None:
                self._set_job_status(job, JobStatus.ACTIVE)
            elif job.status is JobStatus.ACTIVE and nxt is None:
                self._set_job_status(job, JobStatus.COMPLETED)
        retyped = self._pending_runs(job) if job.spec.type != cmd.spec.type else []
        for run in retyped:  # PENDING runs are indexed by their job's type: move them to the new one
            self._unindex_pending(run)
        job.spec = cmd.spec
        for run in retyped:
            self._index_pending(run)
        job.updated_ms = self.now_ms
        self._index_job(job)
        return Ok(job)

    def _pending_runs(self, job: Job) -> list[Run]:
        runs = [self._run(run_id) for run_id in self._active_ids(job.job_id)]
        return [run for run in runs if run.status is RunStatus.PENDING]

    def _run(self, run_id: str) -> Run:
        """A run an index names (it exists: the indexes follow the records)."""
        run = self.uow.run(run_id)
        if run is None:
            raise LookupError(f"run {run_id} is indexed but not stored")
        return run

    @c.handles(c.PauseJob)
    def _pause_job(self, cmd: c.PauseJob, index: int) -> Result:
        job = self._get_job_for_change(cmd.job_id)
        if isinstance(job, NotFound):
            return job
        if job.status is JobStatus.PAUSED:
            return Ok(job)
        if job.status is not JobStatus.ACTIVE:
            return FailedPrecondition(f"job {job.job_id} is {job.status.value}; only an ACTIVE job can be paused")
        self._unindex_job(job)
        self._set_job_status(job, JobStatus.PAUSED)
        job.updated_ms = self.now_ms
        return Ok(job)

    @c.handles(c.ResumeJob)
    def _resume_job(self, cmd: c.ResumeJob, index: int) -> Result:
        job = self._get_job_for_change(cmd.job_id)
        if isinstance(job, NotFound):
            return job
        if job.status is JobStatus.ACTIVE:
            return Ok(job)
        if job.status is not JobStatus.PAUSED:
            return FailedPrecondition(f"job {job.job_id} is {job.status.value}; only a PAUSED job can be resumed")
        self._set_job_status(job, JobStatus.ACTIVE)
        job.updated_ms = self.now_ms
        if job.next_fire_ms is not None and job.next_fire_ms <= self.now_ms:
            self._skip_paused(job)
        if job.next_fire_ms is None:
            self._set_job_status(job, JobStatus.COMPLETED)
        self._index_job(job)
        return Ok(job)

    def _skip_paused(self, job: Job) -> None:
        """Instants that came due while the job was paused are skipped, with a record."""
        first = job.next_fire_ms
        assert first is not None
        reason = "the job was paused when this instant came due"
        skip, nxt = skip_through(under_rules(job.spec.schedule, self.cluster_format), job.anchor_ms, first, self.now_ms, reason)
        self._record_skip(job, skip)
        job.cursor_ms = max(job.cursor_ms, skip.last_ms)
        job.next_fire_ms = nxt

    @c.handles(c.DeleteJob)
    def _delete_job(self, cmd: c.DeleteJob, index: int) -> Result:
        job = self._get_job_for_change(cmd.job_id)
        if isinstance(job, NotFound):
            return job
        if job.status is JobStatus.DELETED:
            return Ok(job)
        self._unindex_job(job)
        self._set_job_status(job, JobStatus.DELETED)
        job.updated_ms = self.now_ms
        self._schedule_purge(job, self.now_ms + job.spec.history_ttl_ms)
        for run_id in self._active_ids(job.job_id):
            run = self._run(run_id)
            if run.status is RunStatus.PENDING:
                self._finish(run, RunStatus.CANCELLED, "the job was deleted")
            elif not run.cancel_requested:  # LEASED: its executor learns it at the next renewal
                self._request_cancel(run, "the job was deleted")
        return Ok(job)

    @c.handles(c.TriggerJob)
    def _trigger_job(self, cmd: c.TriggerJob, index: int) -> Result:
        job = self._get_job_for_change(cmd.job_id)
        if isinstance(job, NotFound):
            return job
        if job.status is JobStatus.DELETED:
            return FailedPrecondition(f"job {job.job_id} is deleted; it cannot be triggered")
        if self._pending_full(cmd.max_pending):
            return ResourceExhausted(self._pending_full_message(cmd.max_pending))
        run = self._new_run(job, manual_run_id(job.job_id, index, self._pos), self.now_ms, manual=True)
        self._step(run, "triggered", f"a manual run requested with TriggerJob (entry {index})")
        return Ok(run)

    # ------------------------------------------------------------ runs

    @c.handles(c.CancelRun)
    def _cancel_run(self, cmd: c.CancelRun, index: int) -> Result:
        run = self.uow.run(cmd.run_id)
        if run is None:
            return NotFound(f"run {cmd.run_id} not found")
        if run.status is RunStatus.PENDING:
            self._finish(run, RunStatus.CANCELLED, "cancelled by request")
            return Ok(run)
        if run.status is RunStatus.LEASED:
            if not run.cancel_requested:
                self._request_cancel(run, "CancelRun")
            return Ok(run)
        return FailedPrecondition(f"run {run.run_id} is already {run.status.value}; only PENDING or LEASED runs can be cancelled")

    def _request_cancel(self, run: Run, why: str) -> None:
        """A LEASED run is asked to stop: its executor learns it at its next renewal."""
        run.cancel_requested = True
        self._step(run, "cancel_requested", f"{why}: executor {run.executor_id!r} is told at its next lease renewal")
        self.events.append(("cancel_requested", run))

    def _record_skip(self, job: Job, skip: Skip) -> None:
        run_id = run_id_for(job.job_id, skip.instant_ms)
        if self.uow.run(run_id) is not None:
            return
        run = Run(run_id, job.job_id, job.spec.queue, skip.instant_ms, self.now_ms, RunStatus.SKIPPED)
        run.error = skip.reason
        run.skipped_count = skip.count
        run.skipped_until_ms = skip.last_ms
        run.finished_ms = self.now_ms
        self._step(run, "skipped", skipped_detail(job.spec, skip))
        self.uow.runs.add(run_id, run)
        self.run_counts[RunStatus.SKIPPED] += 1
        self._job_runs_add(run)
        self.events.append(("skipped", run))
        self._retain(run)

    # ------------------------------------------------------------ firing

    @c.handles(c.Fire)
    def _fire(self, cmd: c.Fire, index: int) -> Result:
        created: list[str] = []
        skipped = stale = 0
        for job_id, expected in cmd.items:
            job = self.uow.job(job_id)
            if job is None or job.status is not JobStatus.ACTIVE or job.next_fire_ms != expected:
                stale += 1
                continue
            skipped += self._fire_job(job, cmd, created, index)
        return Ok(FireReport(created, skipped, stale))  # FireReport is frozen: build it once

    def _fire_job(self, job: Job, cmd: c.Fire, created: list[str], index: int) -> int:
        """Fire or skip the job's due instants; append the new run ids; return how many were skipped."""
        spec = job.spec
        window = Window(self.now_ms, cmd.lookahead_ms, cmd.misfire_threshold_ms, spec.catchup_window_ms, spec.misfire)
        assert job.next_fire_ms is not None
        self._unindex_job(job)
        decisions, nxt = plan(under_rules(spec.schedule, self.cluster_format), job.anchor_ms, job.next_fire_ms, window)
        pending_skip: Skip | None = None
        skipped = 0
        for d in decisions:
            if isinstance(d, FireAt) and spec.concurrency is ConcurrencyPolicy.FORBID and self._has_active(job.job_id):
                d = Skip(d.instant_ms, d.instant_ms, 1, "the previous run is still active (concurrency FORBID)")
            if isinstance(d, FireAt) and self._pending_full(cmd.max_pending):
                d = Skip(d.instant_ms, d.instant_ms, 1, self._pending_full_message(cmd.max_pending))
            if isinstance(d, Skip):
                skipped += d.count
                if pending_skip is not None and pending_skip.reason == d.reason:
                    pending_skip = Skip(pending_skip.instant_ms, d.last_ms, pending_skip.count + d.count, d.reason)
                else:
                    if pending_skip is not None:
                        self._record_skip(job, pending_skip)
                    pending_skip = d
                job.cursor_ms = d.last_ms
                continue
            if pending_skip is not None:
                self._record_skip(job, pending_skip)
                pending_skip = None
            if spec.concurrency is ConcurrencyPolicy.REPLACE:
                self._replace_active(job)
            run = self._new_run(job, run_id_for(job.job_id, d.instant_ms), d.instant_ms)
            self._step(run, "fired", fired_detail(spec, d.instant_ms, self.now_ms, cmd, index), cmd.node_id)
            created.append(run.run_id)
            job.fire_count += 1
            job.cursor_ms = d.instant_ms
        if pending_skip is not None:
            self._record_skip(job, pending_skip)
        job.next_fire_ms = nxt
        if nxt is None:
            self._set_job_status(job, JobStatus.COMPLETED)
            job.updated_ms = self.now_ms
        self._index_job(job)
        return skipped

    def _replace_active(self, job: Job) -> None:
        for run_id in self._active_ids(job.job_id):
            run = self._run(run_id)
            if run.status is RunStatus.PENDING:
                self._finish(run, RunStatus.CANCELLED, "replaced by a newer run (concurrency REPLACE)")
            elif not run.cancel_requested:
                self._request_cancel(run, "a newer run replaces it (concurrency REPLACE)")

    def _pending_full(self, max_pending: int) -> bool:
        return bool(max_pending) and self.run_counts[RunStatus.PENDING] >= max_pending

    def _pending_full_message(self, max_pending: int) -> str:
        return (
            f"the cluster holds {self.run_counts[RunStatus.PENDING]} PENDING runs, its limit "
            f"[limits] max_pending_runs = {max_pending}: add executors or raise max_pending_runs"
        )

    @c.handles(c.NodeInfo)
    def _node_info(self, cmd: c.NodeInfo, index: int) -> Result:
        self.members[cmd.node_id] = (cmd.version, cmd.command_format)
        if cmd.raft:
            self.member_rafts[cmd.node_id] = cmd.raft
        return Ok(None)

    @c.handles(c.Barrier)
    def _barrier(self, cmd: c.Barrier, index: int) -> Result:
        return Ok(index)

    # ------------------------------------------------------------ indexes

    def _index_job(self, job: Job) -> None:
        if job.status is JobStatus.ACTIVE and job.next_fire_ms is not None:
            self.store.put(Table.DUE, rc.timed_key(job.next_fire_ms, job.job_id), b"")

    def _unindex_job(self, job: Job) -> None:
        if job.next_fire_ms is not None:
            self.store.delete(Table.DUE, rc.timed_key(job.next_fire_ms, job.job_id))

    # ------------------------------------------------------------ queries

    def due_jobs(self, until_ms: int, limit: int) -> list[tuple[str, int]]:
        """(job_id, next_fire_ms) of ACTIVE jobs due at or before ``until_ms``, earliest first (a cursor over
        the stored due index: never a scan of all jobs)."""
        return [due_item(key) for key in self.due_page(until_ms, limit)]

    def due_page(self, until_ms: int, limit: int) -> list[bytes]:
        """``due_jobs`` as the due index's keys (``due_item`` reads one): the leader loop, which scans past the
        items it already proposed on every look, decodes only those it proposes."""
        return [key for key, _ in self.store.scan(Table.DUE, b"", rc.ms_bytes(until_ms + 1), limit)]

    def next_due_ms(self) -> int | None:
        rows = self.store.scan(Table.DUE, limit=1)
        return rc.ms_from(rows[0][0]) if rows else None

    def due_keys(self) -> list[tuple[int, str]]:
        """The whole due index, (next_fire_ms, job_id) in order (tests and tools)."""
        return [rc.timed_from(key) for key, _ in iter_table(self.store, Table.DUE)]

    def iter_jobs(self, after_id: str = "") -> Iterator[Job]:
        return self.view.iter_jobs(after_id)

    def iter_job_runs(self, job_id: str, after: tuple[int, str] | None = None, newest_first: bool = False) -> Iterator[Run]:
        """A job's runs by (scheduled instant, run id) after ``after``; ``newest_first``: the other way, from
        before ``after`` (None: from the newest)."""
        return self.view.iter_job_runs(job_id, after, newest_first)

    def active_runs(self, job_id: str = "") -> list[Run]:
        """PENDING and LEASED runs (of ``job_id``, or of every job), by scheduled time: from the
        index of active runs, never a scan of every run kept."""
        if job_id:
            runs = [r for r in (self.view.run(run_id) for run_id in self._active_ids(job_id)) if r is not None]
        else:
            ids = (rc.job_run_from(key, key.index(b"\x00") + 1)[1] for key, _ in iter_table(self.store, Table.ACTIVE))
            runs = [r for r in (self.view.run(run_id) for run_id in ids) if r is not None]
        return sorted(runs, key=lambda r: (r.scheduled_ms, r.run_id))

    def iter_runs(self, after_id: str = "") -> Iterator[Run]:
        return self.view.iter_runs(after_id)

    def drain_events(self) -> list[RunEvent]:
        events, self.events = self.events, []
        return events

    # ------------------------------------------------------------ snapshots

    def snapshot(self) -> bytes:
        """Every record as one blob (``snapshot_codec``): for tools and tests. A node's snapshots are copies
        of its store."""
        membership = snapshot_codec.Membership(
            list(self.roster.values()), self.member_change, list(self.removed_members.values()), self.cluster_format,
            dict(self.member_rafts),
        )  # fmt: skip
        return snapshot_codec.encode(
            self.now_ms, self.applied_index, self.view.iter_jobs(), self.view.iter_runs(), dict(self.idempotency.items()),
            self.members, membership, self.request_rows(),
        )  # fmt: skip

    def restore(self, data: bytes) -> None:
        """Discard all state and load ``data`` (from ``snapshot``, or a snapshot body of a version that kept
        its state in memory), then commit it. Raises ValueError on a bad snapshot (or one whose cluster uses
        a command format this code does not understand), before anything is changed."""
        now_ms, applied, jobs, runs, idempotency, members, membership, requests = snapshot_codec.decode(data)
        self.check_format_number(membership.cluster_format, "snapshot")
        self.store.clear()
        self.uow.forget()
        self._reset_memory()
        self.now_ms, self.applied_index, self.members = now_ms, applied, members
        self.roster = {m.node_id: m for m in membership.roster}
        self.member_change, self.cluster_format = membership.change, membership.cluster_format
        self.removed_members = {m.node_id: m for m in membership.removed}
        self.member_rafts = dict(membership.rafts)
        put = self.store.put
        ttl: dict[str, int] = {}
        for job in jobs:
            put(Table.JOBS, rc.id_key(job.job_id), rc.encode_job(job))
            self.job_counts[job.status] += 1
            self._index_job(job)
            ttl[job.job_id] = job.spec.history_ttl_ms
            if job.status is JobStatus.DELETED:
                self._schedule_purge(job, job.updated_ms + job.spec.history_ttl_ms)
        for key, (job_id, fingerprint) in idempotency.items():
            put(Table.IDEMPOTENCY, rc.idem_key(key), rc.encode_idem(key, job_id, fingerprint))
        finished: dict[str, int] = {}
        failed: dict[str, int] = {}
        for run in runs:
            put(Table.RUNS, rc.id_key(run.run_id), rc.encode_run(run))
            self.run_counts[run.status] += 1
            self._job_runs_add(run)
            if run.status in ACTIVE_RUN_STATUSES:
                put(Table.ACTIVE, rc.job_run_key(run.job_id, run.scheduled_ms, run.run_id), b"")
            elif run.status in TERMINAL_RUN_STATUSES:
                put(Table.EXPIRY, rc.timed_key(run.finished_ms + ttl.get(run.job_id, 0), run.run_id), b"")
                finished[run.job_id] = finished.get(run.job_id, 0) + 1
                if kept_apart(run) and run.job_id in ttl:
                    put(Table.FAILED_RUNS, rc.job_run_key(run.job_id, run.scheduled_ms, run.run_id), b"")
                    failed[run.job_id] = failed.get(run.job_id, 0) + 1
        for job_id, n in finished.items():
            put(Table.FINISHED, rc.id_key(job_id), rc.encode_int(n))
        for job_id, n in failed.items():
            put(Table.FAILED, rc.id_key(job_id), rc.encode_int(n))
        self.restore_requests(requests)
        self._saved = {}
        self.commit()
        self.load()


def due_item(key: bytes) -> tuple[str, int]:
    """(job_id, next_fire_ms) of a key of ``JobStateMachine.due_page``."""
    ms, job_id = rc.timed_from(key)
    return job_id, ms
