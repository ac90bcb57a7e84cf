"""Random command sequences against the job state machine, checked against invariants
and a simple reference model (a hypothesis RuleBasedStateMachine).

What must hold after every step, whatever the order of creates, pauses,
resumes, deletes, triggers, cancels, updates, (duplicate, stale, lagging)
fires, lease grants, renewals, completions (also by zombies), expiries and
snapshot/restore cycles:

* no instant of a job is ever covered twice (fired, or skipped with a record);
* an ``every`` job that was never rescheduled has covered exactly the grid
  ``anchor + k * every`` up to its cursor: no gap, no duplicate (paused or
  not, whatever its misfire and concurrency policies);
* cursors and ``now`` never go backwards; fencing tokens only grow; the
  derived indexes match the records (the per-type index of PENDING runs too);
* a grant for some job types takes the oldest leasable runs of those types
  and no other (a reference filter over every run says which); a completion
  by an executor that does not hold the lease changes nothing;
* replaying the same command log into fresh machines gives identical snapshots;
* every index row, count and the small state the machine stores is what a reference rebuilds from
  the records and from what was applied, with its own encoding (``state_reference``): a write every
  replica misses alike fails here, where comparing replicas cannot see it;
* the same commands give the same results and byte-identical stores in the in-memory
  store and in an LMDB environment (a twin machine on LMDB takes every command, one
  Raft entry each, and its state hash and everything observable must match after
  every step), snapshot/restore round trips included: the blob (``body``)
  for the in-memory store, a compacting copy of the environment for LMDB. The twin keeps
  no run records and no specs across commands (``cache_bytes=0``), the first
  does: what is kept never changes a result or a byte.
"""

from __future__ import annotations

import marshal
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    multiple,
    precondition,
    rule,
)

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.model import (
    TERMINAL_RUN_STATUSES,
    After,
    At,
    ConcurrencyPolicy,
    Every,
    JobSpec,
    JobStatus,
    MisfirePolicy,
    RunStatus,
    Schedule,
)
from raftsched.cluster.domain.results import AlreadyExists, FailedPrecondition, FireReport, Internal, NotFound, Ok, Result
from raftsched.cluster.domain.run_history import steps as steps_of
from raftsched.cluster.domain.spec_codec import job_to_plain, run_to_plain, spec_fingerprint
from raftsched.cluster.fsm import layout
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.store import MemoryStore, state_hash
from tests.unit.fsm.harness import dump
from tests.unit.fsm.model_checks import Invariants, Stores, active_ids, job_replaced, replay

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000
#: job types, and the sets of them an executor may serve (empty: any type, as entries from before types)
TYPES = ["noop", "shell"]
SERVED = [(), ("noop",), ("shell",), ("noop", "shell"), ("http",)]


class StateMachineModel(Invariants, RuleBasedStateMachine):
    jobs = Bundle("jobs")

    def __init__(self) -> None:
        super().__init__()
        self.stores = Stores()
        self.m = JobStateMachine(MemoryStore())
        #: the same commands, applied to a machine on an LMDB environment (one entry, one commit each)
        self.twin = JobStateMachine(self.stores.new(), cache_bytes=0)  # keeping nothing
        self.index = 0
        self.now = T0
        self.max_now = 0
        self.log: list[tuple[bytes, int]] = []
        self.results: list[str] = []
        self.counter = 0
        #: jobs whose schedule was changed: their grid moved, so only the generic checks apply
        self.rescheduled: set[str] = set()
        #: the largest lookahead any fire used
        self.max_lookahead = 0
        self.cursors: dict[str, int] = {}
        self.creates: dict[str, c.CreateJob] = {}
        #: jobs that took an UpdateJob: a replayed CreateJob no longer matches their spec
        self.updated: set[str] = set()
        #: each job's anchor when it was created
        self.anchors: dict[str, int] = {}
        #: run id -> the fencing token of its latest lease; every (lease id, token) ever granted
        self.tokens: dict[str, int] = {}
        self.granted: list[tuple[str, int]] = []
        #: what the reference rebuilds the derived tables from (``state_reference``): the jobs created, the
        #: idempotency keys taken, the requests answered, the cluster's command format
        self.created: set[str] = set()
        self.idem: dict[str, tuple[str, str]] = {}
        self.requests: dict[str, tuple[str, str, str, str, int]] = {}
        self.format = 1

    @initialize(
        target=jobs,
        every=st.sampled_from([100, 300, 1_000]),
        concurrency=st.sampled_from(list(ConcurrencyPolicy)),
    )
    def first_job(self, every: int, concurrency: ConcurrencyPolicy) -> str:
        """Every sequence starts with a FIRE_ALL every-job, the reference model's main subject."""
        return self.create_every(every, MisfirePolicy.FIRE_ALL, concurrency, 24 * 3600 * 1000, "")

    @initialize(
        target=jobs,
        every=st.sampled_from([100, 300, 1_000]),
        misfire=st.sampled_from([MisfirePolicy.FIRE_ONCE, MisfirePolicy.SKIP]),
        catchup=st.sampled_from([0, 400, 3_000]),
    )
    def second_job(self, every: int, misfire: MisfirePolicy, catchup: int) -> str:
        """And one whose missed instants are skipped: coalesced, skipped, or too old."""
        return self.create_every(every, misfire, ConcurrencyPolicy.ALLOW, catchup, "")

    # ------------------------------------------------------------ plumbing

    def apply(self, cmd: c.Command) -> Result:
        self.index += 1
        data = c.encode(cmd)
        self.log.append((data, self.index))
        self.max_now = max(self.max_now, cmd.now_ms)
        result = self.m.apply(data, self.index)
        self.m.commit()
        assert not isinstance(result, Internal), result
        twin = self.twin.apply(data, self.index)
        self.twin.commit()
        assert repr(twin) == repr(result)
        self.results.append(repr(result))
        self.check_records(self.m.drain_changes(), self.twin.drain_changes())
        return result

    @staticmethod
    def check_records(*drained: tuple[list[Any], list[bytes | None]]) -> None:
        """The record handed over with each change (the event hub's history) is its run's state, byte for byte the
        same on both machines, and is missing for no run written with a new state."""
        for events, records in drained:
            assert len(records) == len(events)
            for (kind, run), raw in zip(events, records):
                if raw is not None:
                    assert marshal.loads(raw) == layout.run_to_tuple(run), (kind, run.run_id)
                elif kind in ("fired", "leased", "finished"):
                    raise AssertionError(f"no record for a {kind!r} change of {run.run_id}")
        assert drained[0][1] == drained[1][1]

    def new_id(self) -> str:
        self.counter += 1
        return f"j{self.counter:03d}"

    # ------------------------------------------------------------ rules: jobs

    @rule(
        target=jobs,
        every=st.sampled_from([100, 300, 1_000, 2_500]),
        misfire=st.sampled_from(list(MisfirePolicy)),
        concurrency=st.sampled_from(list(ConcurrencyPolicy)),
        catchup=st.sampled_from([0, 400, 3_000, 24 * 3600 * 1000]),
        key=st.sampled_from(["", "", "k1", "k2"]),
    )
    def create_every(self, every: int, misfire: MisfirePolicy, concurrency: ConcurrencyPolicy, catchup: int, key: str) -> Any:
        job_id = self.new_id()
        spec = JobSpec("e", Every(every), type="noop", misfire=misfire, concurrency=concurrency, catchup_window_ms=catchup)
        known = self.m.idempotency.get(key) if key else None
        cmd = c.CreateJob(self.now, job_id, spec, key)
        result = self.apply(cmd)
        if known is None:
            assert isinstance(result, Ok) and result.value.job_id == job_id
            self.created.add(job_id)
            if key:
                self.idem[key] = (job_id, spec_fingerprint(spec))
            assert result.value.anchor_ms == self.m.now_ms  # the machine's time, never a lagging proposer's
            self.anchors[job_id] = result.value.anchor_ms
            self.creates[job_id] = cmd
            return job_id
        if isinstance(result, Ok):  # the same key with the same spec: the first job
            assert result.value.job_id == known[0] and job_id not in self.m.jobs
        else:  # the same key with another spec
            assert isinstance(result, AlreadyExists) and key in result.message
        return multiple()

    @rule(target=jobs, offset=st.integers(-3_000, 6_000), misfire=st.sampled_from(list(MisfirePolicy)))
    def create_at(self, offset: int, misfire: MisfirePolicy) -> str:
        job_id = self.new_id()
        spec = JobSpec("a", At(self.now + offset), type="noop", misfire=misfire, catchup_window_ms=2_000)
        self.creates[job_id] = c.CreateJob(self.now, job_id, spec)
        assert isinstance(self.apply(self.creates[job_id]), Ok)
        self.created.add(job_id)
        return job_id

    @rule(target=jobs, after=st.integers(0, 6_000), job_type=st.sampled_from(TYPES))
    def create_after(self, after: int, job_type: str) -> str:
        job_id = self.new_id()
        self.creates[job_id] = c.CreateJob(self.now, job_id, JobSpec("f", After(after), type=job_type))
        assert isinstance(self.apply(self.creates[job_id]), Ok)
        self.created.add(job_id)
        return job_id

    @rule(job=jobs)
    def create_again(self, job: str) -> None:
        """The same CreateJob proposal applied twice returns the same job."""
        existing = self.m.jobs[job]
        snapshot = job_to_plain(existing)
        result = self.apply(self.creates[job])
        if job in self.updated and not existing.idempotency_key:
            assert isinstance(result, (Ok, AlreadyExists))  # its spec changed since
        else:
            assert isinstance(result, Ok) and job_to_plain(result.value) == snapshot
        assert job_to_plain(self.m.jobs[job]) == snapshot

    @rule(job=jobs)
    def pause(self, job: str) -> None:
        before = self.m.jobs[job].status
        result = self.apply(c.PauseJob(self.now, job))
        if before in (JobStatus.ACTIVE, JobStatus.PAUSED):
            assert isinstance(result, Ok) and result.value.status is JobStatus.PAUSED
        else:
            assert isinstance(result, FailedPrecondition)

    @rule(job=jobs)
    def resume(self, job: str) -> None:
        before = self.m.jobs[job].status
        result = self.apply(c.ResumeJob(self.now, job))
        if before in (JobStatus.ACTIVE, JobStatus.PAUSED):
            assert isinstance(result, Ok)
            j = result.value
            assert j.status in (JobStatus.ACTIVE, JobStatus.COMPLETED)
            assert j.next_fire_ms is None or j.next_fire_ms > self.m.now_ms or before is JobStatus.ACTIVE
        else:
            assert isinstance(result, FailedPrecondition)

    @rule(job=jobs)
    def delete(self, job: str) -> None:
        result = self.apply(c.DeleteJob(self.now, job))
        assert isinstance(result, Ok) and result.value.status is JobStatus.DELETED
        assert not any(self.m.runs[r].status is RunStatus.PENDING for r in active_ids(self.m).get(job, ()))

    @rule(job=jobs)
    def trigger(self, job: str) -> None:
        deleted = self.m.jobs[job].status is JobStatus.DELETED
        result = self.apply(c.TriggerJob(self.now, job))
        if deleted:
            assert isinstance(result, FailedPrecondition)
        else:
            assert isinstance(result, Ok)
            assert result.value.run_id == f"{job}@manual-{self.index}" and result.value.manual

    @precondition(lambda self: self.format <= 3)
    @rule()
    def switch_to_format_3(self) -> None:
        """The cluster's command format 3: runs record their attempts and steps from here on."""
        self.apply(c.SetClusterFormat(self.now, 3))
        self.format = 3

    @precondition(lambda self: 3 <= self.format <= 6)
    @rule()
    def switch_to_format_6(self) -> None:
        """Command format 6: jobs may have priorities (a format 5 field), and the runs of those made from here on
        are kept in grant order (``RANKED``)."""
        self.apply(c.SetClusterFormat(self.now, 6))
        self.format = 6

    @precondition(lambda self: self.format == 6)
    @rule()
    def switch_to_format_7(self) -> None:
        """Command format 7: every run made from here on is kept in grant order, of priority 0 too (the runs made
        before stay where they are)."""
        self.apply(c.SetClusterFormat(self.now, 7))
        self.format = 7

    @precondition(lambda self: self.format >= 6)
    @rule(target=jobs, every=st.sampled_from([100, 300, 1_000]), priority=st.integers(1, 9), job_type=st.sampled_from(TYPES))
    def create_prioritized(self, every: int, priority: int, job_type: str) -> str:
        job_id = self.new_id()
        self.creates[job_id] = c.CreateJob(self.now, job_id, JobSpec("p", Every(every), type=job_type, priority=priority))
        result = self.apply(self.creates[job_id])
        assert isinstance(result, Ok), result
        self.created.add(job_id)
        self.anchors[job_id] = result.value.anchor_ms
        return job_id

    @precondition(lambda self: self.m.cluster_format >= 3)
    @rule(job=jobs, again=st.booleans(), other=st.booleans())
    def trigger_with_a_request_id(self, job: str, again: bool, other: bool) -> None:
        """The same request_id twice gives one run; the id with another request is refused."""
        rid = f"req-{self.index}"
        cmd = c.TriggerJob(self.now, job, request_id=rid)
        first = self.apply(cmd)
        if not isinstance(first, Ok):
            return
        self.requests[rid] = (rid, c.request_fingerprint(cmd), "run", first.value.run_id, self.m.now_ms + lim.REQUEST_ID_TTL_MS)
        runs = len(self.m.runs)
        if again:
            second = self.apply(c.TriggerJob(self.now + 1, job, request_id=rid))
            assert isinstance(second, Ok) and second.value.run_id == first.value.run_id
            assert len(self.m.runs) == runs
        if other:
            assert not isinstance(self.apply(c.PauseJob(self.now, job, request_id=rid)), Ok)

    @precondition(lambda self: self.m.cluster_format >= 3 and bool(self.m.runs))
    @rule(pick=st.integers(0, 10**6))
    def retry(self, pick: int) -> None:
        run_ids = list(self.m.runs)
        run = self.m.runs[run_ids[pick % len(run_ids)]]
        before, deleted = run.status, self.m.jobs[run.job_id].status is JobStatus.DELETED
        result = self.apply(c.RetryRun(self.now, run.run_id, "tester"))
        if before in (RunStatus.DEAD_LETTER, RunStatus.FAILED, RunStatus.CANCELLED) and not deleted:
            assert isinstance(result, Ok)
            after = self.m.runs[run.run_id]
            assert after.status is RunStatus.PENDING and after.budget_base == after.attempt
            assert steps_of(after)[-1].kind == "manual_retry"
        else:
            assert isinstance(result, FailedPrecondition) and before.value in result.message or deleted

    @rule(
        job=jobs,
        every=st.sampled_from([200, 1_000]),
        at_offset=st.none() | st.integers(-2_000, 4_000),
        job_type=st.sampled_from(TYPES),
        priority=st.sampled_from([0, 0, 4, 9]),
    )
    def update(self, job: str, every: int, at_offset: int | None, job_type: str, priority: int) -> None:
        old = self.m.jobs[job]  # a live record: read what matters before the update changes it
        old_schedule = old.spec.schedule
        schedule: Schedule = Every(every) if at_offset is None else At(self.now + at_offset)
        spec = JobSpec(old.spec.name, schedule, type=job_type, misfire=old.spec.misfire, concurrency=old.spec.concurrency)
        if self.format >= 6:  # a priority, changed or dropped: the job's active runs move to it
            spec = spec._replace(priority=priority)
        deleted = old.status is JobStatus.DELETED
        result = self.apply(c.UpdateJob(self.now, job, spec))
        if deleted:
            assert isinstance(result, FailedPrecondition)
            return
        assert isinstance(result, Ok)
        self.updated.add(job)
        if schedule != old_schedule:
            self.rescheduled.add(job)

    # ------------------------------------------------------------ rules: runs

    @rule(pick=st.integers(0, 10**6))
    def cancel(self, pick: int) -> None:
        if not self.m.runs:
            assert isinstance(self.apply(c.CancelRun(self.now, "nope@1")), NotFound)
            return
        run_ids = list(self.m.runs)
        run = self.m.runs[run_ids[pick % len(run_ids)]]
        before = run.status
        result = self.apply(c.CancelRun(self.now, run.run_id))
        run = self.m.runs[run.run_id]
        if before is RunStatus.PENDING:
            assert isinstance(result, Ok) and run.status is RunStatus.CANCELLED
        elif before is RunStatus.LEASED:
            assert isinstance(result, Ok) and run.status is RunStatus.LEASED and run.cancel_requested
        else:
            assert before in TERMINAL_RUN_STATUSES and isinstance(result, FailedPrecondition)

    # ------------------------------------------------------------ rules: leases

    @rule(executor=st.sampled_from(["ex-a", "ex-b"]), max_runs=st.integers(1, 3), types=st.sampled_from(SERVED))
    def acquire(self, executor: str, max_runs: int, types: tuple[str, ...]) -> None:
        leasable = self.leasable(types)
        result = self.apply(c.AcquireLeases(self.now, executor, ("default",), max_runs, types))
        assert isinstance(result, Ok) and len(result.value) == min(max_runs, len(leasable))
        if types or self.format >= 6:  # the first by priority, then the oldest, of its types; no other run moves
            assert [g.run.run_id for g in result.value] == [run_id for _, run_id in leasable[:max_runs]]
        for k, grant in enumerate(result.value, start=1):
            run = grant.run
            assert not types or grant.spec.type in types  # never a run of a type the executor does not serve
            assert run.status is RunStatus.LEASED and run.executor_id == executor
            assert run.not_before_ms <= self.m.now_ms  # never leased before its instant or its backoff
            assert run.fencing_token == self.index * 1000 + k
            assert run.fencing_token > self.tokens.get(run.run_id, 0)  # tokens only grow
            self.tokens[run.run_id] = run.fencing_token
            self.granted.append((run.lease_id, run.fencing_token))

    def leasable(self, types: tuple[str, ...]) -> list[tuple[int, str]]:
        """The reference: PENDING runs of the queue that may be leased now, of ``types`` (empty: any), in the
        order a grant takes them: by their job's priority (highest first; every job has 0 before format 6, where
        priorities come in here), then the oldest."""
        now = max(self.m.now_ms, self.now)
        keys = []
        for run_id, run in self.m.runs.items():
            if run.status is RunStatus.PENDING and run.queue == "default" and run.not_before_ms <= now:
                spec = self.m.jobs[run.job_id].spec
                if not types or spec.type in types:
                    keys.append((-spec.priority, run.not_before_ms, run_id))
        return [(ms, run_id) for _, ms, run_id in sorted(keys)]

    @precondition(lambda self: bool(self.m.leases))
    @rule(pick=st.integers(0, 10**6), succeeded=st.booleans(), draw=st.floats(0, 0.999), named=st.booleans())
    def complete(self, pick: int, succeeded: bool, draw: float, named: bool) -> None:
        lease_ids = sorted(self.m.leases)
        run = self.m.runs[self.m.leases[lease_ids[pick % len(lease_ids)]]]
        asked_to_cancel = run.cancel_requested
        holder = run.executor_id if named else None  # None: a completion from before they were named
        result = self.apply(c.CompleteRun(self.now, run.lease_id, run.fencing_token, succeeded, b"", "boom", "", draw, holder))
        assert isinstance(result, Ok) and result.value.run_id == run.run_id
        run = self.m.runs[run.run_id]
        assert run_to_plain(result.value) == run_to_plain(run)
        if asked_to_cancel:
            assert run.status is RunStatus.CANCELLED
        elif succeeded:
            assert run.status is RunStatus.SUCCEEDED
        else:
            assert run.status in (RunStatus.PENDING, RunStatus.DEAD_LETTER)

    @precondition(lambda self: bool(self.granted))
    @rule(pick=st.integers(0, 10**6), succeeded=st.booleans())
    def complete_with_an_old_lease(self, pick: int, succeeded: bool) -> None:
        """A zombie executor: its lease was completed, expired or superseded."""
        lease_id, token = self.granted[pick % len(self.granted)]
        live = lease_id in self.m.leases
        before = dump(self.m) if not live else None
        bad_token = token + 1 if live else token  # a live lease with a wrong token is refused too
        result = self.apply(c.CompleteRun(self.now, lease_id, bad_token, succeeded))
        assert isinstance(result, FailedPrecondition), result
        if before is not None:
            after = dump(self.m)
            assert {k: v for k, v in after.items() if k not in ("now", "applied")} == {
                k: v for k, v in before.items() if k not in ("now", "applied")
            }

    @precondition(lambda self: bool(self.m.leases))
    @rule(pick=st.integers(0, 10**6), succeeded=st.booleans())
    def complete_as_another_executor(self, pick: int, succeeded: bool) -> None:
        """The right lease and token from an executor that does not hold it: refused, nothing changes."""
        lease_ids = sorted(self.m.leases)
        run = self.m.runs[self.m.leases[lease_ids[pick % len(lease_ids)]]]
        other = "ex-b" if run.executor_id == "ex-a" else "ex-a"
        before = dump(self.m)
        result = self.apply(c.CompleteRun(self.now, run.lease_id, run.fencing_token, succeeded, executor_id=other))
        assert isinstance(result, FailedPrecondition) and run.lease_id in result.message, result
        after = dump(self.m)
        assert {k: v for k, v in after.items() if k not in ("now", "applied")} == {
            k: v for k, v in before.items() if k not in ("now", "applied")
        }

    @rule(dt=st.integers(0, 40_000), draw=st.floats(0, 0.999))
    def expire(self, dt: int, draw: float) -> None:
        """The leader proposes the expiry of every lease past its deadline (time passes first)."""
        self.now += dt
        due = self.m.expired_leases(self.now - 1, 100)
        result = self.apply(c.ExpireLeases(self.now, tuple((lid, tok, draw) for lid, tok in due)))
        assert isinstance(result, Ok) and result.value == len(due)
        for lease_id, _ in due:
            assert lease_id not in self.m.leases

    @rule(executor=st.sampled_from(["ex-a", "ex-b"]))
    def renew(self, executor: str) -> None:
        held = [(lid, self.m.runs[rid].fencing_token) for lid, rid in sorted(self.m.leases.items())]
        result = self.apply(c.RenewLeases(self.now, executor, tuple(held)))
        assert isinstance(result, Ok)
        for renewal, (lease_id, _) in zip(result.value, held, strict=True):
            run = self.m.runs[self.m.leases[lease_id]]
            assert renewal.ok == (run.executor_id == executor)
            if renewal.ok:
                assert renewal.expires_ms == run.lease_expires_ms >= self.m.now_ms

    @rule(grace=st.integers(0, 3_000))
    def grace(self, grace: int) -> None:
        before = {lid: self.m.runs[rid].lease_expires_ms for lid, rid in self.m.leases.items()}
        assert isinstance(self.apply(c.GraceLeases(self.now, grace)), Ok)
        for lease_id, old in before.items():
            new = self.m.runs[self.m.leases[lease_id]].lease_expires_ms
            assert new == max(old, self.m.now_ms + grace)  # extended to the floor, never shortened

    # ------------------------------------------------------------ rules: time and firing

    @rule(dt=st.integers(0, 8_000))
    def advance(self, dt: int) -> None:
        """Time passes with no leader firing: instants are missed."""
        self.now += dt

    @rule(
        lookahead=st.sampled_from([0, 0, 100, 1_000]),
        threshold=st.sampled_from([0, 500, 5_000]),
        lag=st.sampled_from([0, 0, 0, 700, 4_000]),
        limit=st.integers(1, 8),
        duplicate=st.booleans(),
        dt=st.integers(0, 1_500),
    )
    def fire_due(self, lookahead: int, threshold: int, lag: int, limit: int, duplicate: bool, dt: int) -> None:
        """What a leader does a little later (maybe with a lagging clock), sometimes proposing a batch twice."""
        self.now += dt
        now = self.now - lag
        items = tuple(self.m.due_jobs(now + lookahead, limit))
        cmd = c.Fire(now, items, lookahead, threshold)
        self.max_lookahead = max(self.max_lookahead, lookahead)
        result = self.apply(cmd)
        assert isinstance(result, Ok) and isinstance(result.value, FireReport)
        assert result.value.stale == 0
        for run_id in result.value.created:
            run = self.m.runs[run_id]
            assert run.scheduled_ms <= self.m.now_ms + lookahead
            assert run.fired_ms == self.m.now_ms
            # PENDING, or already CANCELLED by a later instant of the same batch (REPLACE)
            assert run.status is RunStatus.PENDING or job_replaced(self.m, run.job_id)
        if duplicate:
            again = self.apply(cmd)
            assert isinstance(again, Ok)
            assert again.value.created == [] and again.value.skipped == 0
            assert again.value.stale == len(items)

    @rule(lookahead=st.sampled_from([0, 100]), dt=st.integers(0, 1_500))
    def fire_all_due(self, lookahead: int, dt: int) -> None:
        """A prompt leader with a working clock, firing until nothing is due (a batch may hit the budget)."""
        self.fire_due(lookahead, 5_000, 0, 1_000, False, dt)
        for _ in range(10):
            if not self.m.due_jobs(self.now + lookahead, 1):
                break
            self.fire_due(lookahead, 5_000, 0, 1_000, False, 0)
        assert self.m.due_jobs(self.now + lookahead, 1) == []

    @rule(job=jobs, delta=st.integers(-5_000, 5_000).filter(lambda d: d != 0))
    def fire_stale(self, job: str, delta: int) -> None:
        """A fire whose expectation is not the job's next fire time changes nothing."""
        j = self.m.jobs[job]
        expected = (j.next_fire_ms or self.now) + delta
        runs_before = len(self.m.runs)
        result = self.apply(c.Fire(self.now, ((job, expected),), 0, 500))
        assert isinstance(result, Ok) and result.value.stale == 1 and result.value.created == []
        assert len(self.m.runs) == runs_before

    @rule(lag=st.integers(1, 10_000))
    def lagging_barrier(self, lag: int) -> None:
        before = self.m.now_ms
        self.apply(c.Barrier(self.now - lag))
        assert self.m.now_ms >= before

    @rule()
    def snapshot_and_restore(self) -> None:
        data = self.m.snapshot()
        fresh = JobStateMachine()
        fresh.restore(data)
        assert dump(fresh) == dump(self.m)
        assert fresh.snapshot() == data
        self.m = fresh
        copied = JobStateMachine(self.stores.copy(self.twin.store), cache_bytes=0)  # an LMDB node's snapshot: a copy of its env
        assert dump(copied) == dump(self.twin)
        assert state_hash(copied.store) == state_hash(self.twin.store)
        self.twin = copied

    @precondition(lambda self: len(self.log) > 0)
    @rule()
    def replay_is_deterministic(self) -> None:
        self._check_replay()

    def _check_replay(self) -> None:
        a, results_a = replay(self.log)
        b, results_b = replay(self.log, JobStateMachine(self.stores.new()))
        assert results_a == results_b == self.results
        assert a.snapshot() == b.snapshot() == self.m.snapshot()
        assert state_hash(a.store) == state_hash(b.store) == state_hash(self.m.store) == state_hash(self.twin.store)

    def teardown(self) -> None:
        try:
            self._check_replay()
        finally:
            self.stores.close()


TestStateMachineModel = StateMachineModel.TestCase
TestStateMachineModel.settings = settings(
    max_examples=50,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
