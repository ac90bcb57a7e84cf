"""What the model test (``test_model``) holds after every step, and the helpers it checks with.

``Invariants`` is the half of ``StateMachineModel`` that checks: the LMDB twin
holds the same state, every derived row is the one the reference rebuilds
(``reference``), histories are bounded, time and cursors never go back, the
indexes match the records, and no instant is covered twice.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis.stateful import (
    invariant,
)

from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.model import (
    ACTIVE_RUN_STATUSES,
    TERMINAL_RUN_STATUSES,
    After,
    At,
    ConcurrencyPolicy,
    Every,
    JobStatus,
    RunStatus,
)
from raftsched.cluster.domain.retention import kept_apart
from raftsched.cluster.domain.run_history import steps as steps_of
from raftsched.cluster.fsm import keys as fsm_keys
from raftsched.cluster.fsm import layout
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.store import Table, iter_table, state_hash
from raftsched.storage.lmdb_state import LmdbTableStore
from tests.unit.fsm.harness import dump
from tests.unit.fsm.reference import differences, expected_tables, reference_hash, stored_hash, stored_tables


def job_replaced(m: JobStateMachine, job_id: str) -> bool:
    return m.jobs[job_id].spec.concurrency is ConcurrencyPolicy.REPLACE


class Stores:
    """LMDB environments of one test run, in a temp dir of their own (closed and removed at the end)."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="state-model-")
        self.opened: list[LmdbTableStore] = []

    def new(self) -> LmdbTableStore:
        store = LmdbTableStore(os.path.join(self.root, f"s{len(self.opened)}.mdb"), map_size=1 << 28)
        self.opened.append(store)
        return store

    def copy(self, store: LmdbTableStore) -> LmdbTableStore:
        """A snapshot as a node takes one: the compacting copy of the committed environment, opened as a store."""
        path = os.path.join(self.root, f"s{len(self.opened)}.mdb")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        copy = store.open_copy()
        try:
            copy.write_to(fd)
        finally:
            copy.close()
            os.close(fd)
        copied = LmdbTableStore(path, map_size=1 << 28)
        self.opened.append(copied)
        return copied

    def close(self) -> None:
        for store in self.opened:
            store.close()
        shutil.rmtree(self.root, ignore_errors=True)


def replay(log: list[tuple[bytes, int]], m: JobStateMachine | None = None) -> tuple[JobStateMachine, list[str]]:
    m = m or JobStateMachine()
    results = []
    for data, index in log:
        results.append(repr(m.apply(data, index)))
        m.commit()
    return m, results


def active_ids(m: JobStateMachine) -> dict[str, set[str]]:
    """job id -> its PENDING and LEASED runs, as the stored index of active runs has them."""
    out: dict[str, set[str]] = {}
    for key, _ in iter_table(m.store, Table.ACTIVE):
        job_id = key.split(b"\x00", 1)[0].decode()
        out.setdefault(job_id, set()).add(fsm_keys.job_run_from(key, len(job_id.encode()) + 1)[1])
    return out


def job_run_index(m: JobStateMachine) -> dict[str, list[tuple[int, str]]]:
    """job id -> (scheduled_ms, run_id) of its runs, as the stored per-job index has them."""
    out: dict[str, list[tuple[int, str]]] = {}
    for key, _ in iter_table(m.store, Table.JOB_RUNS):
        job_id = key.split(b"\x00", 1)[0].decode()
        out.setdefault(job_id, []).append(fsm_keys.job_run_from(key, len(job_id.encode()) + 1))
    return out


class Invariants:
    """The invariants of ``StateMachineModel`` (its rules keep the attributes they read)."""

    m: JobStateMachine
    twin: JobStateMachine
    index: int
    max_now: int
    max_lookahead: int
    rescheduled: set[str]
    cursors: dict[str, int]
    anchors: dict[str, int]
    created: set[str]
    idem: dict[str, tuple[str, str]]
    requests: dict[str, tuple[str, str, str, str, int]]
    format: int

    @invariant()
    def the_lmdb_twin_holds_the_same_state(self) -> None:
        assert state_hash(self.twin.store) == state_hash(self.m.store)
        assert dump(self.twin) == dump(self.m)

    @invariant()
    def every_derived_row_is_the_one_the_reference_rebuilds(self) -> None:
        expected = expected_tables(
            dict(self.m.jobs.items()), dict(self.m.runs.items()), created=self.created, applied=self.index,
            now_ms=self.max_now, cluster_format=self.format, idempotency=self.idem, requests=self.requests,
        )  # fmt: skip
        assert differences(expected, stored_tables(self.m.store)) == []
        assert reference_hash(expected) == stored_hash(self.m.store) == stored_hash(self.twin.store)

    @invariant()
    def histories_are_bounded_and_consistent(self) -> None:
        for run in self.m.runs.values():
            assert len(steps_of(run)) <= lim.MAX_RUN_STEPS and len(run.attempts) <= lim.MAX_RUN_ATTEMPTS_KEPT
            numbers = [a.attempt for a in run.attempts]
            assert numbers == sorted(set(numbers)) and all(n <= run.attempt for n in numbers), run
            assert [s.at_ms for s in steps_of(run)] == sorted(s.at_ms for s in steps_of(run))
            running = [a for a in run.attempts if not a.outcome]
            assert len(running) <= 1 and (not running or running[0] == run.attempts[-1])
            if running:
                assert run.status is RunStatus.LEASED and running[0].fencing_token == run.fencing_token
            if run.attempts and run.status is RunStatus.LEASED and run.attempts[-1].fencing_token == run.fencing_token:
                assert not run.attempts[-1].outcome

    @invariant()
    def time_never_goes_backwards(self) -> None:
        assert self.m.now_ms == self.max_now

    @invariant()
    def cursors_only_grow_and_lead_next_fire(self) -> None:
        for job_id, job in self.m.jobs.items():
            assert job.cursor_ms >= self.cursors.get(job_id, job.cursor_ms), job_id
            self.cursors[job_id] = job.cursor_ms
            assert job.next_fire_ms is None or job.next_fire_ms > job.cursor_ms, job
            if job.status is JobStatus.ACTIVE:
                assert job.next_fire_ms is not None, job
            if job.status is JobStatus.COMPLETED:
                assert job.next_fire_ms is None, job

    @invariant()
    def indexes_match_the_records(self) -> None:
        m = self.m
        active_jobs = [(k, j) for k, j in m.jobs.items() if j.status is JobStatus.ACTIVE]
        due = sorted((j.next_fire_ms, k) for k, j in active_jobs if j.next_fire_ms is not None)
        assert m.due_keys() == due
        active: dict[str, set[str]] = {}
        pending: dict[str, list[tuple[int, str]]] = {}
        by_job: dict[str, list[tuple[int, str]]] = {}
        for run_id, run in m.runs.items():
            by_job.setdefault(run.job_id, []).append((run.scheduled_ms, run_id))
            if run.status in ACTIVE_RUN_STATUSES:
                active.setdefault(run.job_id, set()).add(run_id)
            if run.status is RunStatus.PENDING:
                pending.setdefault(run.queue, []).append((run.not_before_ms, run_id))
        assert active_ids(m) == active
        # PENDING runs by queue (and type), apart by their job's priority (0: ``pending``)
        plain: dict[str, list[tuple[int, str]]] = {}
        typed: dict[tuple[str, str], list[tuple[int, str]]] = {}
        prio: dict[tuple[str, int], list[tuple[int, str]]] = {}
        prio_typed: dict[tuple[str, str, int], list[tuple[int, str]]] = {}
        for key in (key for keys in pending.values() for key in keys):
            run = m.runs[key[1]]
            spec = m.jobs[run.job_id].spec
            if spec.priority:
                prio.setdefault((run.queue, spec.priority), []).append(key)
                prio_typed.setdefault((run.queue, spec.type, spec.priority), []).append(key)
            else:
                plain.setdefault(run.queue, []).append(key)
                typed.setdefault((run.queue, spec.type), []).append(key)
        assert {k: list(v) for k, v in m.pending.items() if v} == {k: sorted(v) for k, v in plain.items()}
        assert {k: list(v) for k, v in m.pending_by_type.items()} == {k: sorted(v) for k, v in typed.items()}
        mem = m.tx.mem
        assert {k: list(v) for k, v in mem.prio_pending.items()} == {k: sorted(v) for k, v in prio.items()}
        assert {k: list(v) for k, v in mem.prio_by_type.items()} == {k: sorted(v) for k, v in prio_typed.items()}
        # the records kept in grant order: each pointed to by its row in RUNS, and every active one known
        ranked = {key[9:].decode(): key for key, _ in iter_table(m.store, Table.RANKED)}
        assert mem.placed == {r: key for r, key in ranked.items() if m.runs[r].status in ACTIVE_RUN_STATUSES}
        for run_id, key in ranked.items():
            assert m.store.get(Table.RUNS, run_id.encode()) == fsm_keys.ranked_ref(key)
        pointers = [key for key, raw in iter_table(m.store, Table.RUNS) if raw[:1] == fsm_keys.RANKED_REF]
        assert sorted(k.decode() for k in pointers) == sorted(ranked)
        assert job_run_index(m) == {k: sorted(v) for k, v in by_job.items()}
        finished: dict[str, int] = {}
        for run in m.runs.values():
            if run.status in TERMINAL_RUN_STATUSES:
                finished[run.job_id] = finished.get(run.job_id, 0) + 1
        assert {key.decode(): layout.decode_int(raw) for key, raw in iter_table(m.store, Table.FINISHED)} == finished
        apart = sorted(fsm_keys.job_run_key(r.job_id, r.scheduled_ms, r.run_id) for r in m.runs.values() if kept_apart(r))
        assert [key for key, _ in iter_table(m.store, Table.FAILED_RUNS)] == apart
        failed: dict[str, int] = {}
        for run in m.runs.values():
            if kept_apart(run):
                failed[run.job_id] = failed.get(run.job_id, 0) + 1
        assert {key.decode(): layout.decode_int(raw) for key, raw in iter_table(m.store, Table.FAILED)} == failed
        for job_id, job in m.jobs.items():
            assert failed.get(job_id, 0) <= job.spec.failed_history_limit
            assert finished.get(job_id, 0) - failed.get(job_id, 0) <= job.spec.history_limit
        leased = [r for r in m.runs.values() if r.status is RunStatus.LEASED]
        assert m.leases == {r.lease_id: r.run_id for r in leased}
        assert list(m.lease_deadlines) == sorted((r.lease_expires_ms, r.lease_id) for r in leased)
        counts = dict.fromkeys(RunStatus, 0)
        for run in m.runs.values():
            counts[run.status] += 1
        assert m.run_counts == counts
        job_counts = dict.fromkeys(JobStatus, 0)
        for job in m.jobs.values():
            job_counts[job.status] += 1
        assert m.job_counts == job_counts

    @invariant()
    def no_instant_is_covered_twice_and_grids_have_no_gaps(self) -> None:
        m = self.m
        for job_id, job in m.jobs.items():
            schedule = job.spec.schedule
            spans: list[tuple[int, int]] = []  # [first, last] instants each run stands for
            covered: list[int] = []
            for run in m.iter_job_runs(job_id):
                if run.manual:
                    assert run.run_id.startswith(f"{job_id}@manual-")
                    continue
                assert run.run_id == f"{job_id}@{run.scheduled_ms}"
                assert run.not_before_ms >= run.scheduled_ms  # never leasable before its instant
                assert run.scheduled_ms <= job.cursor_ms, (run, job)
                assert run.fired_ms + self.max_lookahead >= run.scheduled_ms, run
                last = run.skipped_until_ms if run.status is RunStatus.SKIPPED else run.scheduled_ms
                if run.status is RunStatus.SKIPPED:
                    assert run.skipped_count >= 1 and run.error
                spans.append((run.scheduled_ms, last))
                if isinstance(schedule, Every) and job_id not in self.rescheduled:
                    step = schedule.every_ms
                    count = run.skipped_count if run.status is RunStatus.SKIPPED else 1
                    assert last == run.scheduled_ms + (count - 1) * step, run
                    covered.extend(run.scheduled_ms + k * step for k in range(count))
            spans.sort()
            for (_, prev_last), (first, _) in zip(spans, spans[1:], strict=False):
                assert first > prev_last, (job_id, spans)  # disjoint: nothing fired or skipped twice
            if job_id in self.rescheduled:
                continue
            if job_id in self.anchors:
                assert job.anchor_ms == self.anchors[job_id] == job.created_ms
            if isinstance(schedule, Every):
                assert all(first > job.created_ms for first, _ in spans)
                grid = list(range(job.anchor_ms + schedule.every_ms, job.cursor_ms + 1, schedule.every_ms))
                assert sorted(covered) == grid, (job_id, sorted(covered), grid)
            elif isinstance(schedule, (At, After)):
                instant = schedule.at_ms if isinstance(schedule, At) else job.anchor_ms + schedule.after_ms
                assert [first for first, _ in spans] in ([], [instant])
                if job.status is JobStatus.COMPLETED:
                    assert len(spans) == 1
