"""Tests for raftsched.cluster.fsm: the pure replicated job state machine.

Every command goes through ``encode`` and ``JobStateMachine.apply`` (the
path a Raft entry takes) with an explicit ``now_ms``. No network, no clock,
no sleeps.
"""

from __future__ import annotations

import json
import marshal
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import (
    After,
    At,
    ConcurrencyPolicy,
    Cron,
    Every,
    Job,
    JobSpec,
    JobStatus,
    MisfirePolicy,
    RetryPolicy,
    Run,
    RunStatus,
    Schedule,
)
from raftsched.cluster.domain.results import (
    AlreadyExists,
    FailedPrecondition,
    FireReport,
    Internal,
    InvalidArgument,
    NotFound,
    Ok,
    Rejected,
    Result,
)
from raftsched.cluster.domain.spec_codec import job_to_plain, run_to_plain
from raftsched.cluster.fsm.machine import HANDLERS, JobStateMachine
from raftsched.cluster.fsm.store import MemoryStore, StateStore, Table, iter_table
from raftsched.cluster.fsm.tx import Tx
from raftsched.storage.lmdb_state import LmdbStateStore

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SEC = 1_000
MIN = 60 * SEC


# ------------------------------------------------------------------ helpers

_new_store: Callable[[], StateStore] = MemoryStore


@pytest.fixture(autouse=True, params=["memory", "lmdb"])
def store_kind(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Every test here runs against both stores: the in-memory one and an LMDB environment."""
    global _new_store
    opened: list[LmdbStateStore] = []

    def lmdb_store() -> StateStore:
        opened.append(LmdbStateStore(str(tmp_path / f"state-{len(opened)}.mdb"), map_size=1 << 30))
        return opened[-1]

    _new_store = lmdb_store if request.param == "lmdb" else MemoryStore
    yield request.param
    _new_store = MemoryStore
    for store in opened:
        store.close()


def new_machine() -> JobStateMachine:
    return JobStateMachine(_new_store())


def spec(schedule: Schedule, name: str = "job", **kw: Any) -> JobSpec:
    return JobSpec(name=name, schedule=schedule, type="noop", **kw)


class Harness:
    """A machine fed through encode/apply, with a Raft-like growing index."""

    def __init__(self) -> None:
        self.m = new_machine()
        self.index = 0

    def apply(self, cmd: c.Command) -> Result:
        self.index += 1
        return self.m.apply(c.encode(cmd), self.index)

    def ok(self, cmd: c.Command) -> Any:
        result = self.apply(cmd)
        assert isinstance(result, Ok), result
        return result.value

    def rejected(self, cmd: c.Command, kind: type[Rejected]) -> Rejected:
        result = self.apply(cmd)
        assert type(result) is kind, result
        assert result.message
        return result

    def create(self, job_id: str, schedule: Schedule, now: int = T0, key: str = "", **kw: Any) -> Any:
        return self.ok(c.CreateJob(now, job_id, spec(schedule, **kw), key))

    def fire(
        self,
        now: int,
        items: list[tuple[str, int]] | None = None,
        lookahead: int = 0,
        threshold: int = 5_000,
    ) -> FireReport:
        """Fire ``items``, or (like the leader) whatever ``due_jobs`` returns at ``now + lookahead``."""
        if items is None:
            items = self.m.due_jobs(now + lookahead, 10_000)
        report = self.ok(c.Fire(now, tuple(items), lookahead, threshold))
        assert isinstance(report, FireReport)
        return report

    def job(self, job_id: str) -> Any:
        return self.m.jobs[job_id]

    def runs(self, job_id: str) -> list[Run]:
        return list(self.m.iter_job_runs(job_id))

    def run_times(self, job_id: str, status: RunStatus | None = None) -> list[int]:
        return [r.scheduled_ms for r in self.runs(job_id) if status is None or r.status is status]


def dump(m: JobStateMachine) -> dict[str, Any]:
    """Everything observable about a machine, indexes included, as plain values: the records, every stored
    index (each table's rows but the small state's, which is below as values) and the in-memory indexes."""
    return {
        "now": m.now_ms,
        "applied": m.applied_index,
        "jobs": {k: job_to_plain(j) for k, j in m.jobs.items()},
        "runs": {k: run_to_plain(r) for k, r in m.runs.items()},
        "tables": {t: list(iter_table(m.store, t)) for t in Table.ALL if t != Table.META},
        "pending": {q: list(v) for q, v in m.pending.items() if v},
        "pending_by_type": {q: list(v) for q, v in m.pending_by_type.items() if v},
        "idempotency": dict(m.idempotency.items()),
        "leases": dict(m.leases),
        "lease_deadlines": list(m.lease_deadlines),
        "counts": (dict(m.run_counts), dict(m.job_counts)),
        "members": dict(m.members),
        "membership": (dict(m.roster), m.member_change, dict(m.removed_members), m.cluster_format, dict(m.member_rafts)),
    }


def same(a: Any, b: Any) -> bool:
    """Two answers name the same record with the same fields (records come back detached: compare values)."""
    plain = job_to_plain if isinstance(a, Job) else run_to_plain
    return type(a) is type(b) and plain(a) == plain(b)


def lease(h: Harness, run_id: str, executor: str = "ex-1") -> Run:
    """Lease ``run_id`` with a committed AcquireLeases (it must be the oldest leasable run of its queue)."""
    run = h.m.runs[run_id]
    grants = h.ok(c.AcquireLeases(max(h.m.now_ms, run.not_before_ms), executor, (run.queue,), 1))
    assert [g.run.run_id for g in grants] == [run_id]
    run = h.m.runs[run_id]
    assert run.status is RunStatus.LEASED
    return run


def active_ids(m: JobStateMachine, job_id: str) -> set[str]:
    """Ids of ``job_id``'s PENDING and LEASED runs, from the machine's index of active runs."""
    return {r.run_id for r in m.active_runs(job_id)}


def complete(h: Harness, run: Run, succeeded: bool, now: int | None = None) -> Any:
    return h.ok(c.CompleteRun(now or h.m.now_ms, run.lease_id, run.fencing_token, succeeded, b"out", "", "file:///log"))


# ------------------------------------------------------------------ create


@pytest.mark.parametrize(
    "schedule, next_ms, cursor_ms",
    [
        (Every(10 * SEC), T0 + 10 * SEC, T0),
        (After(5 * SEC), T0 + 5 * SEC, T0),
        (After(0), T0, T0 - 1),
        (At(T0 + 7 * SEC), T0 + 7 * SEC, T0),
        (At(T0 - 3 * SEC), T0 - 3 * SEC, T0 - 3 * SEC - 1),  # a past `at` is due at once
        (Cron("*/5 * * * *"), T0 + 5 * MIN, T0),
    ],
    ids=["every", "after", "after-zero", "at-future", "at-past", "cron"],
)
def test_create_job_sets_anchor_cursor_and_next_fire(schedule: Schedule, next_ms: int, cursor_ms: int) -> None:
    h = Harness()
    job = h.create("j1", schedule, now=T0)
    assert job.status is JobStatus.ACTIVE
    assert (job.anchor_ms, job.created_ms, job.updated_ms) == (T0, T0, T0)
    assert job.next_fire_ms == next_ms
    assert job.cursor_ms == cursor_ms
    assert job.fire_count == 0
    assert h.m.due_jobs(next_ms, 10) == [("j1", next_ms)]
    assert h.m.due_jobs(next_ms - 1, 10) == []


def test_create_job_applied_twice_returns_the_same_job() -> None:
    h = Harness()
    cmd = c.CreateJob(T0, "j1", spec(Every(SEC)))
    first = h.ok(cmd)
    again = h.ok(cmd)
    assert same(again, first)
    assert list(h.m.jobs) == ["j1"]
    assert again.anchor_ms == T0


def test_create_job_with_a_taken_id_and_another_spec_is_refused() -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    r = h.rejected(c.CreateJob(T0, "j1", spec(Every(2 * SEC))), AlreadyExists)
    assert "j1" in r.message
    assert h.job("j1").spec.schedule == Every(SEC)


def test_idempotency_key_with_same_spec_returns_the_first_job() -> None:
    h = Harness()
    first = h.create("j1", Every(SEC), key="k1")
    again = h.ok(c.CreateJob(T0 + 5, "j2", spec(Every(SEC)), "k1"))
    assert same(again, first)
    assert list(h.m.jobs) == ["j1"]


def test_idempotency_key_with_another_spec_is_already_exists() -> None:
    h = Harness()
    h.create("j1", Every(SEC), key="k1")
    r = h.rejected(c.CreateJob(T0, "j2", spec(Every(2 * SEC)), "k1"), AlreadyExists)
    assert "k1" in r.message and "j1" in r.message
    assert list(h.m.jobs) == ["j1"]


def test_idempotency_key_still_returns_the_job_after_it_changed() -> None:
    h = Harness()
    h.create("j1", Every(SEC), key="k1")
    h.ok(c.DeleteJob(T0 + 1, "j1"))
    again = h.ok(c.CreateJob(T0 + 2, "j2", spec(Every(SEC)), "k1"))
    assert again.job_id == "j1" and again.status is JobStatus.DELETED
    assert "j2" not in h.m.jobs


def test_the_proposers_fingerprint_matches_the_replicas() -> None:
    from raftsched.cluster.domain.spec_codec import spec_fingerprint

    h = Harness()
    s1 = spec(Every(SEC), retry=RetryPolicy(multiplier=3.0))
    first = h.ok(c.CreateJob(T0, "j1", s1, "k1", spec_fingerprint(s1)))
    assert same(h.ok(c.CreateJob(T0, "j2", s1, "k1")), first)  # no fingerprint in the command: computed here
    assert same(h.ok(c.CreateJob(T0, "j3", s1, "k1", spec_fingerprint(s1))), first)
    other = spec(Every(2 * SEC))
    h.rejected(c.CreateJob(T0, "j4", other, "k1", spec_fingerprint(other)), AlreadyExists)
    assert list(h.m.jobs) == ["j1"]


def test_distinct_idempotency_keys_create_distinct_jobs() -> None:
    h = Harness()
    h.create("j1", Every(SEC), key="k1")
    h.create("j2", Every(SEC), key="k2")
    assert list(h.m.jobs) == ["j1", "j2"]
    assert h.m.idempotency["k2"][0] == "j2"


# ------------------------------------------------------------------ firing


def test_on_time_fire_creates_one_pending_run_per_instant() -> None:
    h = Harness()
    h.create("j1", Every(10 * SEC), queue="q1")
    report = h.fire(T0 + 10 * SEC + 3)
    assert report.created == [f"j1@{T0 + 10 * SEC}"]
    assert (report.skipped, report.stale) == (0, 0)
    run = h.m.runs[f"j1@{T0 + 10 * SEC}"]
    assert run.status is RunStatus.PENDING
    assert (run.job_id, run.queue, run.manual) == ("j1", "q1", False)
    assert run.scheduled_ms == run.not_before_ms == T0 + 10 * SEC
    assert run.fired_ms == T0 + 10 * SEC + 3
    job = h.job("j1")
    assert job.cursor_ms == T0 + 10 * SEC
    assert job.next_fire_ms == T0 + 20 * SEC
    assert job.fire_count == 1
    assert h.m.pending["q1"][0] == (T0 + 10 * SEC, run.run_id)
    assert active_ids(h.m, "j1") == {run.run_id}


def test_the_same_fire_applied_twice_creates_no_second_run() -> None:
    h = Harness()
    h.create("j1", Every(10 * SEC))
    fire = c.Fire(T0 + 10 * SEC, (("j1", T0 + 10 * SEC),))
    first = h.ok(fire)
    second = h.ok(fire)
    assert len(first.created) == 1
    assert second.created == [] and second.stale == 1
    assert h.run_times("j1") == [T0 + 10 * SEC]
    assert h.job("j1").fire_count == 1


def test_two_leaders_proposing_the_same_item_fire_it_once() -> None:
    h = Harness()
    h.create("j1", Every(10 * SEC))
    item = ("j1", T0 + 10 * SEC)
    h.fire(T0 + 10 * SEC + 50, [item])  # old leader
    report = h.fire(T0 + 25 * SEC, [item])  # new leader, later, same expectation
    assert report.created == [] and report.stale == 1
    assert h.run_times("j1") == [T0 + 10 * SEC]


@pytest.mark.parametrize("expected", [T0, T0 + 10 * SEC - 1, T0 + 20 * SEC])
def test_a_stale_item_creates_nothing(expected: int) -> None:
    h = Harness()
    h.create("j1", Every(10 * SEC))
    report = h.fire(T0 + 30 * SEC, [("j1", expected)])
    assert (report.created, report.skipped, report.stale) == ([], 0, 1)
    assert h.runs("j1") == []
    assert h.job("j1").next_fire_ms == T0 + 10 * SEC


def test_an_item_for_an_unknown_job_is_stale() -> None:
    h = Harness()
    report = h.fire(T0, [("nope", T0)])
    assert report.stale == 1 and h.m.runs == {}


def test_a_fire_before_the_instant_without_lookahead_changes_nothing() -> None:
    h = Harness()
    h.create("j1", Every(10 * SEC))
    before = dump(h.m)
    report = h.fire(T0 + 10 * SEC - 1, [("j1", T0 + 10 * SEC)])
    assert (report.created, report.skipped, report.stale) == ([], 0, 0)
    after = dump(h.m)
    assert after["jobs"] == before["jobs"] and after["runs"] == {} and after["tables"]["due"] == before["tables"]["due"]


def test_lookahead_commits_a_run_before_its_instant_but_not_leasable_before_it() -> None:
    h = Harness()
    h.create("j1", Every(10 * SEC))
    report = h.fire(T0 + 10 * SEC - 80, lookahead=100)
    assert report.created == [f"j1@{T0 + 10 * SEC}"]
    run = h.m.runs[report.created[0]]
    assert run.fired_ms == T0 + 10 * SEC - 80 < run.scheduled_ms
    assert run.not_before_ms == T0 + 10 * SEC
    assert h.job("j1").cursor_ms == T0 + 10 * SEC


def test_a_fire_item_covers_every_due_instant_of_its_job() -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    report = h.fire(T0 + 3 * SEC + 500, [("j1", T0 + SEC)])
    assert h.run_times("j1") == [T0 + SEC, T0 + 2 * SEC, T0 + 3 * SEC]
    assert len(report.created) == 3
    assert h.job("j1").next_fire_ms == T0 + 4 * SEC
    assert h.job("j1").fire_count == 3


@pytest.mark.parametrize("schedule, instant", [(At(T0 + 5 * SEC), T0 + 5 * SEC), (After(5 * SEC), T0 + 5 * SEC)])
def test_at_and_after_jobs_complete_after_firing(schedule: Schedule, instant: int) -> None:
    h = Harness()
    h.create("j1", schedule)
    h.fire(instant + 10)
    job = h.job("j1")
    assert job.status is JobStatus.COMPLETED
    assert job.next_fire_ms is None
    assert job.cursor_ms == instant
    assert job.updated_ms == instant + 10
    assert h.run_times("j1") == [instant]
    assert h.m.due_jobs(T0 + 10**9, 10) == []
    assert h.fire(T0 + 10**9, [("j1", instant)]).stale == 1


def test_a_past_at_job_fires_at_once() -> None:
    h = Harness()
    h.create("j1", At(T0 - 2 * SEC), now=T0)
    report = h.fire(T0)
    assert report.created == [f"j1@{T0 - 2 * SEC}"]
    assert h.job("j1").status is JobStatus.COMPLETED


def test_cron_job_fires_on_its_minutes() -> None:
    h = Harness()
    h.create("j1", Cron("*/5 * * * *"))
    h.fire(T0 + 5 * MIN)
    h.fire(T0 + 10 * MIN + 20)
    assert h.run_times("j1") == [T0 + 5 * MIN, T0 + 10 * MIN]
    assert h.job("j1").next_fire_ms == T0 + 15 * MIN


# ------------------------------------------------------------------ misfires


def _late_fire(policy: MisfirePolicy, catchup: int = 24 * 3600 * SEC) -> Harness:
    """Every 1 s from T0, first fired at T0 + 10 s with a 500 ms misfire threshold."""
    h = Harness()
    h.create("j1", Every(SEC), misfire=policy, catchup_window_ms=catchup)
    h.fire(T0 + 10 * SEC, threshold=500)
    return h


def test_fire_all_fires_every_missed_instant() -> None:
    h = _late_fire(MisfirePolicy.FIRE_ALL)
    assert h.run_times("j1", RunStatus.PENDING) == [T0 + k * SEC for k in range(1, 11)]
    assert h.run_times("j1", RunStatus.SKIPPED) == []
    assert h.job("j1").cursor_ms == T0 + 10 * SEC


def test_fire_once_fires_only_the_latest_missed_instant_and_records_the_rest() -> None:
    h = _late_fire(MisfirePolicy.FIRE_ONCE)
    # 1..9 s were missed: 9 s fires, 1..8 s are coalesced into one record; 10 s is on time
    assert h.run_times("j1", RunStatus.PENDING) == [T0 + 9 * SEC, T0 + 10 * SEC]
    skipped = [r for r in h.runs("j1") if r.status is RunStatus.SKIPPED]
    assert len(skipped) == 1
    rec = skipped[0]
    assert rec.run_id == f"j1@{T0 + SEC}"
    assert (rec.scheduled_ms, rec.skipped_until_ms, rec.skipped_count) == (T0 + SEC, T0 + 8 * SEC, 8)
    assert "coalesced" in rec.error and "FIRE_ONCE" in rec.error
    assert rec.finished_ms == T0 + 10 * SEC
    assert rec.run_id not in active_ids(h.m, "j1")


def test_skip_policy_skips_missed_instants_with_a_record_each_and_fires_on_time_ones() -> None:
    h = _late_fire(MisfirePolicy.SKIP)
    assert h.run_times("j1", RunStatus.PENDING) == [T0 + 10 * SEC]
    skipped = [r for r in h.runs("j1") if r.status is RunStatus.SKIPPED]
    covered = [r.scheduled_ms + k * SEC for r in skipped for k in range(r.skipped_count)]
    assert covered == [T0 + k * SEC for k in range(1, 10)]
    assert all("SKIP" in r.error and r.error.startswith("missed by") for r in skipped)
    assert h.job("j1").cursor_ms == T0 + 10 * SEC


@pytest.mark.parametrize("policy", list(MisfirePolicy))
def test_instants_older_than_the_catchup_window_are_skipped_in_one_record(policy: MisfirePolicy) -> None:
    h = _late_fire(policy, catchup=3 * SEC)
    skipped = [r for r in h.runs("j1") if r.status is RunStatus.SKIPPED]
    old = skipped[0]
    # now = 10 s: instants before 7 s are too old
    assert (old.scheduled_ms, old.skipped_until_ms, old.skipped_count) == (T0 + SEC, T0 + 6 * SEC, 6)
    assert "catchup window" in old.error and "3000 ms" in old.error
    fired = h.run_times("j1", RunStatus.PENDING)
    assert fired[-1] == T0 + 10 * SEC
    if policy is MisfirePolicy.FIRE_ALL:
        assert fired == [T0 + 7 * SEC, T0 + 8 * SEC, T0 + 9 * SEC, T0 + 10 * SEC]
    elif policy is MisfirePolicy.FIRE_ONCE:
        assert fired == [T0 + 9 * SEC, T0 + 10 * SEC]
    else:
        assert fired == [T0 + 10 * SEC]
    assert h.job("j1").cursor_ms == T0 + 10 * SEC


def test_an_on_time_instant_fires_even_with_a_catchup_window_shorter_than_the_threshold() -> None:
    # catchup_window 0 means "catch nothing up", not "skip a fire that is 200 ms late"
    h = Harness()
    h.create("j1", Every(10 * SEC), catchup_window_ms=0)
    h.fire(T0 + 10 * SEC + 200, threshold=5_000)
    assert h.run_times("j1", RunStatus.PENDING) == [T0 + 10 * SEC]
    h.fire(T0 + 30 * SEC, threshold=5_000)  # 20 s missed by 10 s: too old
    assert h.run_times("j1", RunStatus.SKIPPED) == [T0 + 20 * SEC]
    assert h.run_times("j1", RunStatus.PENDING) == [T0 + 10 * SEC, T0 + 30 * SEC]


def test_a_long_outage_is_one_record_counted_arithmetically() -> None:
    h = Harness()
    h.create("j1", Every(100), catchup_window_ms=SEC)
    year = 365 * 24 * 3600 * SEC
    report = h.fire(T0 + year, threshold=0)
    old = h.m.runs[f"j1@{T0 + 100}"]
    assert old.status is RunStatus.SKIPPED
    edge = T0 + year - SEC
    assert old.skipped_until_ms == edge - 100
    assert old.skipped_count == (edge - T0) // 100 - 1
    # the instants inside the window were missed (threshold 0): FIRE_ALL fires them
    assert h.run_times("j1", RunStatus.PENDING) == [edge + k * 100 for k in range(0, 11)]
    assert report.skipped == old.skipped_count
    assert h.job("j1").cursor_ms == T0 + year


def test_a_fire_decides_at_most_the_budget_and_the_rest_stays_due() -> None:
    from raftsched.cluster.domain.firing import DECISION_BUDGET

    h = Harness()
    h.create("j1", Every(100))
    late = T0 + (DECISION_BUDGET + 500) * 100
    report = h.fire(late, threshold=10**9)
    assert len(report.created) == DECISION_BUDGET
    next_ms = T0 + (DECISION_BUDGET + 1) * 100
    assert h.job("j1").next_fire_ms == next_ms
    assert h.m.due_jobs(late, 10) == [("j1", next_ms)]
    report = h.fire(late, threshold=10**9)
    assert len(report.created) == 500
    assert h.run_times("j1") == [T0 + k * 100 for k in range(1, DECISION_BUDGET + 501)]


# ------------------------------------------------------------------ concurrency


def test_allow_keeps_every_run() -> None:
    h = Harness()
    h.create("j1", Every(SEC), concurrency=ConcurrencyPolicy.ALLOW)
    h.fire(T0 + SEC)
    h.fire(T0 + 2 * SEC)
    assert h.run_times("j1", RunStatus.PENDING) == [T0 + SEC, T0 + 2 * SEC]


@pytest.mark.parametrize("leased", [False, True], ids=["pending", "leased"])
def test_forbid_skips_with_a_record_while_a_run_is_active(leased: bool) -> None:
    h = Harness()
    h.create("j1", Every(SEC), concurrency=ConcurrencyPolicy.FORBID)
    h.fire(T0 + SEC)
    first = f"j1@{T0 + SEC}"
    if leased:
        lease(h, first)
    report = h.fire(T0 + 2 * SEC)
    assert report.created == [] and report.skipped == 1
    rec = h.m.runs[f"j1@{T0 + 2 * SEC}"]
    assert rec.status is RunStatus.SKIPPED
    assert "FORBID" in rec.error and rec.skipped_count == 1
    assert h.job("j1").cursor_ms == T0 + 2 * SEC
    # once the active run is gone, the next instant fires
    if leased:
        complete(h, h.m.runs[first], succeeded=True)
    else:
        h.ok(c.CancelRun(T0 + 2 * SEC, first))
    assert h.fire(T0 + 3 * SEC).created == [f"j1@{T0 + 3 * SEC}"]


def test_forbid_fires_only_the_first_of_several_missed_instants() -> None:
    h = Harness()
    h.create("j1", Every(SEC), concurrency=ConcurrencyPolicy.FORBID)
    h.fire(T0 + 3 * SEC, threshold=100)
    assert h.run_times("j1", RunStatus.PENDING) == [T0 + SEC]
    rec = h.m.runs[f"j1@{T0 + 2 * SEC}"]
    assert (rec.status, rec.skipped_count, rec.skipped_until_ms) == (RunStatus.SKIPPED, 2, T0 + 3 * SEC)


def test_replace_cancels_pending_and_asks_leased_runs_to_stop() -> None:
    h = Harness()
    h.create("j1", Every(SEC), concurrency=ConcurrencyPolicy.REPLACE)
    h.fire(T0 + SEC)
    h.fire(T0 + 2 * SEC)
    r1, r2 = f"j1@{T0 + SEC}", f"j1@{T0 + 2 * SEC}"
    assert h.m.runs[r1].status is RunStatus.CANCELLED
    assert "REPLACE" in h.m.runs[r1].error
    assert h.m.runs[r1].finished_ms == T0 + 2 * SEC
    lease(h, r2)
    h.fire(T0 + 3 * SEC)
    r3 = f"j1@{T0 + 3 * SEC}"
    leased = h.m.runs[r2]
    assert leased.status is RunStatus.LEASED and leased.cancel_requested
    assert h.m.runs[r3].status is RunStatus.PENDING
    assert active_ids(h.m, "j1") == {r2, r3}
    assert [rid for _, rid in h.m.pending["default"]] == [r3]


# ------------------------------------------------------------------ pause / resume


def test_pause_takes_the_job_out_of_due_and_makes_fires_stale() -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    job = h.ok(c.PauseJob(T0 + 100, "j1"))
    assert job.status is JobStatus.PAUSED and job.updated_ms == T0 + 100
    assert h.m.due_jobs(T0 + 10**6, 10) == []
    assert h.fire(T0 + SEC, [("j1", T0 + SEC)]).stale == 1
    assert h.runs("j1") == []
    assert same(h.ok(c.PauseJob(T0 + 200, "j1")), job)  # pausing twice is a no-op


def test_resume_skips_instants_that_came_due_while_paused_with_one_record() -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    h.fire(T0 + SEC)
    h.ok(c.PauseJob(T0 + SEC + 1, "j1"))
    job = h.ok(c.ResumeJob(T0 + 5 * SEC + 500, "j1"))
    assert job.status is JobStatus.ACTIVE
    rec = h.m.runs[f"j1@{T0 + 2 * SEC}"]
    assert rec.status is RunStatus.SKIPPED
    assert (rec.skipped_count, rec.skipped_until_ms) == (4, T0 + 5 * SEC)
    assert "paused" in rec.error
    assert job.cursor_ms == T0 + 5 * SEC
    assert job.next_fire_ms == T0 + 6 * SEC
    assert h.m.due_jobs(T0 + 6 * SEC, 10) == [("j1", T0 + 6 * SEC)]
    h.fire(T0 + 6 * SEC)
    assert h.run_times("j1", RunStatus.PENDING) == [T0 + SEC, T0 + 6 * SEC]


@pytest.mark.parametrize("days", [1, 3, 30])
def test_a_long_pause_is_one_exact_record_however_many_instants(days: int) -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    h.ok(c.PauseJob(T0, "j1"))
    now = T0 + days * 24 * 3600 * SEC + 400
    job = h.ok(c.ResumeJob(now, "j1"))
    rec = h.m.runs[f"j1@{T0 + SEC}"]
    count = days * 24 * 3600
    assert (rec.skipped_count, rec.skipped_until_ms) == (count, T0 + count * SEC)
    assert job.cursor_ms == T0 + count * SEC  # no instant up to now is left unrecorded
    assert job.next_fire_ms == T0 + (count + 1) * SEC


def test_resume_before_the_next_instant_skips_nothing() -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    h.ok(c.PauseJob(T0 + 100, "j1"))
    job = h.ok(c.ResumeJob(T0 + 900, "j1"))
    assert job.status is JobStatus.ACTIVE and job.next_fire_ms == T0 + SEC
    assert h.runs("j1") == []


def test_resuming_a_paused_at_job_after_its_instant_skips_it_and_completes() -> None:
    h = Harness()
    h.create("j1", At(T0 + SEC))
    h.ok(c.PauseJob(T0, "j1"))
    job = h.ok(c.ResumeJob(T0 + 2 * SEC, "j1"))
    assert job.status is JobStatus.COMPLETED and job.next_fire_ms is None
    assert h.run_times("j1", RunStatus.SKIPPED) == [T0 + SEC]
    assert h.m.due_jobs(T0 + 10**6, 10) == []


def test_resume_of_an_active_job_is_a_no_op() -> None:
    h = Harness()
    job = h.create("j1", Every(SEC))
    assert same(h.ok(c.ResumeJob(T0 + 5 * SEC, "j1")), job)
    assert h.job("j1").next_fire_ms == T0 + SEC and h.runs("j1") == []


@pytest.mark.parametrize(
    "make, cmd, kind",
    [
        (lambda h: None, c.PauseJob(T0, "nope"), NotFound),
        (lambda h: None, c.ResumeJob(T0, "nope"), NotFound),
        (lambda h: None, c.DeleteJob(T0, "nope"), NotFound),
        (lambda h: None, c.TriggerJob(T0, "nope"), NotFound),
        (lambda h: None, c.UpdateJob(T0, "nope", spec(Every(SEC))), NotFound),
        (lambda h: None, c.CancelRun(T0, "nope@1"), NotFound),
        (lambda h: h.fire(T0 + 2 * SEC), c.PauseJob(T0 + 3 * SEC, "j1"), FailedPrecondition),  # COMPLETED
        (lambda h: h.fire(T0 + 2 * SEC), c.ResumeJob(T0 + 3 * SEC, "j1"), FailedPrecondition),
        (lambda h: h.ok(c.DeleteJob(T0, "j1")), c.PauseJob(T0, "j1"), FailedPrecondition),
        (lambda h: h.ok(c.DeleteJob(T0, "j1")), c.ResumeJob(T0, "j1"), FailedPrecondition),
        (lambda h: h.ok(c.DeleteJob(T0, "j1")), c.TriggerJob(T0, "j1"), FailedPrecondition),
        (lambda h: h.ok(c.DeleteJob(T0, "j1")), c.UpdateJob(T0, "j1", spec(At(T0 + 5 * SEC))), FailedPrecondition),
    ],
)
def test_refused_transitions(make: Any, cmd: c.Command, kind: type[Rejected]) -> None:
    h = Harness()
    h.create("j1", At(T0 + SEC))
    make(h)
    before = dump(h.m)
    r = h.rejected(cmd, kind)
    assert getattr(cmd, "job_id", getattr(cmd, "run_id", "")) in r.message
    after = dump(h.m)
    before.pop("applied"), after.pop("applied")
    before.pop("now"), after.pop("now")
    assert after == before


# ------------------------------------------------------------------ delete


def test_delete_is_soft_and_cancels_pending_runs() -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    h.fire(T0 + 2 * SEC, threshold=10**6)
    lease(h, f"j1@{T0 + SEC}")
    job = h.ok(c.DeleteJob(T0 + 2 * SEC + 5, "j1"))
    assert job.status is JobStatus.DELETED and job.updated_ms == T0 + 2 * SEC + 5
    assert same(h.m.jobs["j1"], job)  # still readable
    cancelled = h.m.runs[f"j1@{T0 + 2 * SEC}"]
    assert cancelled.status is RunStatus.CANCELLED and "deleted" in cancelled.error
    assert h.m.runs[f"j1@{T0 + SEC}"].status is RunStatus.LEASED  # an executor holds it: left to finish
    assert h.m.due_jobs(T0 + 10**6, 10) == []
    assert not h.m.pending.get("default")
    assert h.fire(T0 + 3 * SEC, [("j1", T0 + 3 * SEC)]).stale == 1
    assert same(h.ok(c.DeleteJob(T0 + 4 * SEC, "j1")), job)  # deleting twice is a no-op


# ------------------------------------------------------------------ trigger / cancel


def test_trigger_creates_a_manual_run_named_by_the_index() -> None:
    h = Harness()
    h.create("j1", Every(10 * SEC), queue="q")
    run = h.ok(c.TriggerJob(T0 + 1_234, "j1"))
    assert run.run_id == f"j1@manual-{h.index}"
    assert run.manual and run.status is RunStatus.PENDING
    assert run.scheduled_ms == run.fired_ms == run.not_before_ms == T0 + 1_234
    assert run.queue == "q"
    job = h.job("j1")
    assert (job.next_fire_ms, job.cursor_ms, job.fire_count) == (T0 + 10 * SEC, T0, 0)
    second = h.ok(c.TriggerJob(T0 + 1_234, "j1"))
    assert second.run_id == f"j1@manual-{h.index}" != run.run_id


def test_trigger_works_on_paused_and_completed_jobs() -> None:
    h = Harness()
    h.create("p", Every(SEC))
    h.create("done", At(T0))
    h.fire(T0)
    h.ok(c.PauseJob(T0, "p"))
    assert h.ok(c.TriggerJob(T0 + 1, "p")).manual
    assert h.ok(c.TriggerJob(T0 + 1, "done")).manual
    assert h.job("p").status is JobStatus.PAUSED
    assert h.job("done").status is JobStatus.COMPLETED


def test_cancel_pending_run() -> None:
    h = Harness()
    h.create("j1", Every(SEC), queue="q")
    h.fire(T0 + SEC)
    run_id = f"j1@{T0 + SEC}"
    run = h.ok(c.CancelRun(T0 + SEC + 7, run_id))
    assert run.status is RunStatus.CANCELLED
    assert run.finished_ms == T0 + SEC + 7
    assert run.error
    assert active_ids(h.m, "j1") == set()
    assert not h.m.pending.get("q")
    r = h.rejected(c.CancelRun(T0 + SEC + 8, run_id), FailedPrecondition)
    assert run_id in r.message and "CANCELLED" in r.message


def test_cancel_leased_run_requests_cancellation() -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    h.fire(T0 + SEC)
    run = lease(h, f"j1@{T0 + SEC}")
    asked = h.ok(c.CancelRun(T0 + SEC + 1, run.run_id))
    assert same(asked, h.m.runs[run.run_id])
    assert asked.status is RunStatus.LEASED and asked.cancel_requested
    assert same(h.ok(c.CancelRun(T0 + SEC + 2, run.run_id)), asked)  # asking twice is fine
    complete(h, run, succeeded=True)  # the executor stops: a cancelled run, not a success
    assert h.m.runs[run.run_id].status is RunStatus.CANCELLED


@pytest.mark.parametrize("succeeded, status", [(True, RunStatus.SUCCEEDED), (False, RunStatus.DEAD_LETTER)])
def test_cancel_terminal_run_is_failed_precondition(succeeded: bool, status: RunStatus) -> None:
    h = Harness()
    h.create("j1", Every(SEC), retry=RetryPolicy(max_attempts=1))
    h.fire(T0 + SEC)
    run = lease(h, f"j1@{T0 + SEC}")
    complete(h, run, succeeded)
    assert h.m.runs[run.run_id].status is status
    r = h.rejected(c.CancelRun(T0 + 2 * SEC, run.run_id), FailedPrecondition)
    assert status.value in r.message
    assert h.m.runs[run.run_id].status is status


def test_cancel_skipped_record_is_failed_precondition() -> None:
    h = _late_fire(MisfirePolicy.FIRE_ONCE)
    h.rejected(c.CancelRun(T0 + 11 * SEC, f"j1@{T0 + SEC}"), FailedPrecondition)


# ------------------------------------------------------------------ update


def test_update_without_schedule_change_keeps_timing() -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    h.fire(T0 + SEC)
    job = h.ok(c.UpdateJob(T0 + 1_500, "j1", spec(Every(SEC), queue="other", payload=b"x")))
    assert job.spec.queue == "other" and job.spec.payload == b"x"
    assert (job.anchor_ms, job.cursor_ms, job.next_fire_ms) == (T0, T0 + SEC, T0 + 2 * SEC)
    assert job.updated_ms == T0 + 1_500 and job.created_ms == T0
    h.fire(T0 + 2 * SEC)
    assert h.m.runs[f"j1@{T0 + 2 * SEC}"].queue == "other"


def test_schedule_change_re_anchors_at_the_update() -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    h.fire(T0 + SEC)
    job = h.ok(c.UpdateJob(T0 + 2_500, "j1", spec(Every(5 * SEC))))
    assert job.anchor_ms == T0 + 2_500
    assert job.next_fire_ms == T0 + 7_500
    assert h.m.due_jobs(T0 + 10**6, 10) == [("j1", T0 + 7_500)]
    assert h.fire(T0 + 7_500).created == [f"j1@{T0 + 7_500}"]


def test_schedule_change_never_refires_instants_up_to_the_cursor() -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    h.fire(T0 + SEC, lookahead=5 * SEC)  # fired 1..6 s ahead of time
    assert h.job("j1").cursor_ms == T0 + 6 * SEC
    job = h.ok(c.UpdateJob(T0 + SEC, "j1", spec(Every(2 * SEC))))
    assert job.anchor_ms == T0 + SEC
    assert job.next_fire_ms == T0 + 7 * SEC  # 3 s and 5 s are <= cursor: not again
    h.fire(T0 + 7 * SEC)
    times = h.run_times("j1")
    assert len(times) == len(set(times))
    job = h.ok(c.UpdateJob(T0 + 7 * SEC, "j1", spec(At(T0 + 4 * SEC))))  # an instant already passed
    assert job.status is JobStatus.COMPLETED and job.next_fire_ms is None
    assert h.m.due_jobs(T0 + 10**6, 10) == []


def test_update_can_revive_a_completed_job() -> None:
    h = Harness()
    h.create("j1", At(T0 + SEC))
    h.fire(T0 + SEC)
    job = h.ok(c.UpdateJob(T0 + 2 * SEC, "j1", spec(At(T0 + 10 * SEC))))
    assert job.status is JobStatus.ACTIVE and job.next_fire_ms == T0 + 10 * SEC
    h.fire(T0 + 10 * SEC)
    assert h.run_times("j1") == [T0 + SEC, T0 + 10 * SEC]
    assert h.job("j1").status is JobStatus.COMPLETED


def test_update_of_a_paused_job_stays_paused_and_out_of_due() -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    h.ok(c.PauseJob(T0, "j1"))
    job = h.ok(c.UpdateJob(T0 + 100, "j1", spec(Every(2 * SEC))))
    assert job.status is JobStatus.PAUSED
    assert job.next_fire_ms == T0 + 2_100
    assert h.m.due_jobs(T0 + 10**6, 10) == []


# ------------------------------------------------------------------ due_jobs


def test_due_jobs_orders_by_next_fire_and_honours_until_and_limit() -> None:
    h = Harness()
    h.create("c", Every(3 * SEC))
    h.create("a", Every(5 * SEC))
    h.create("b", Every(SEC))
    h.create("d", At(T0 + 3 * SEC))  # ties with c: job id breaks it
    h.create("paused", Every(SEC))
    h.ok(c.PauseJob(T0, "paused"))
    h.create("gone", Every(SEC))
    h.ok(c.DeleteJob(T0, "gone"))
    assert h.m.due_jobs(T0 + 10 * SEC, 10) == [
        ("b", T0 + SEC),
        ("c", T0 + 3 * SEC),
        ("d", T0 + 3 * SEC),
        ("a", T0 + 5 * SEC),
    ]
    assert h.m.due_jobs(T0 + 3 * SEC, 10) == [("b", T0 + SEC), ("c", T0 + 3 * SEC), ("d", T0 + 3 * SEC)]
    assert h.m.due_jobs(T0 + 10 * SEC, 2) == [("b", T0 + SEC), ("c", T0 + 3 * SEC)]
    assert h.m.due_jobs(T0 + SEC - 1, 10) == []
    assert h.m.next_due_ms() == T0 + SEC


def test_due_jobs_includes_any_job_id_due_exactly_at_until() -> None:
    h = Harness()
    for job_id in ["j-1", "\uffff", "\U0001f600-emoji", "\U0010ffff"]:
        h.create(job_id, Every(SEC))
    assert len(h.m.due_jobs(T0 + SEC, 10)) == 4


# ------------------------------------------------------------------ time


def test_a_lagging_command_clock_never_moves_time_backwards() -> None:
    h = Harness()
    h.create("j1", Every(SEC), now=T0 + 10 * SEC)
    assert h.m.now_ms == T0 + 10 * SEC
    h.ok(c.Barrier(T0))
    assert h.m.now_ms == T0 + 10 * SEC
    # a job created by a lagging proposer is anchored at the machine's time
    job = h.create("j2", Every(SEC), now=T0)
    assert job.anchor_ms == job.created_ms == T0 + 10 * SEC
    # a fire from a lagging leader decides with the machine's time
    h.create("j3", Every(SEC), now=T0 + 20 * SEC)
    report = h.fire(T0, [("j2", T0 + 11 * SEC)])
    assert report.created == [f"j2@{T0 + k * SEC}" for k in range(11, 21)]
    assert h.m.runs[f"j2@{T0 + 20 * SEC}"].fired_ms == T0 + 20 * SEC
    # a pause from the past is stamped with the machine's time
    assert h.ok(c.PauseJob(T0, "j3")).updated_ms == T0 + 20 * SEC


def test_applied_index_and_barrier() -> None:
    h = Harness()
    assert h.ok(c.Barrier(T0)) == 1
    assert h.m.applied_index == 1
    h.create("j1", Every(SEC))
    assert h.m.applied_index == 2


# ------------------------------------------------------------------ malformed entries


def _raw(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff\xfe\x00garbage",
        b"not json",
        b"[]",
        b"null",
        b"42",
        b"{}",
        b"[" * 100_000,
        _raw(op="barrier", now=T0),
        _raw(v=0, op="barrier", now=T0),
        _raw(v="1", op="barrier", now=T0),
        _raw(v=True, op="barrier", now=T0),
        _raw(v=1, now=T0),
        _raw(v=1, op="member_remove", now=T0, node="n1"),
        _raw(v=1, op="barrier"),
        _raw(v=1, op="barrier", now="soon"),
        _raw(v=1, op="barrier", now=None),
        b'{"v":1,"op":"barrier","now":1e999}',
        b'{"v":1,"op":"barrier","now":NaN}',
        _raw(v=1, op="pause_job", now=T0),
        _raw(v=1, op="cancel_run", now=T0),
        _raw(v=1, op="create_job", now=T0, job_id="x"),
        _raw(v=1, op="create_job", now=T0, job_id="x", spec="a spec"),
        _raw(v=1, op="create_job", now=T0, job_id="x", spec={"name": "n"}),
        _raw(v=1, op="update_job", now=T0, job_id="x", spec=[1, 2]),
        _raw(v=1, op="fire", now=T0, items=[["j", "soon"]], look=0, mis=0),
        _raw(v=1, op="fire", now=T0, items=[["j"]], look=0, mis=0),
        _raw(v=1, op="fire", now=T0, items=[1], look=0, mis=0),
        _raw(v=1, op="fire", now=T0, items=5, look=0, mis=0),
        _raw(v=1, op="fire", now=T0, items=[], mis=0),
        b'{"v":1,"op":"fire","now":1,"items":[["j",1e999]],"look":0,"mis":0}',
    ],
)
def test_malformed_entries_are_rejected_and_change_nothing(data: bytes) -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    before = dump(h.m)
    result = h.m.apply(data, 2)
    assert isinstance(result, InvalidArgument), result
    assert "entry 2" in result.message
    assert dump(h.m) == before


@pytest.mark.parametrize(
    "data, needle",
    [
        (_raw(v=c.FORMAT_VERSION + 1, op="barrier", now=T0), f"command format version {c.FORMAT_VERSION + 1}"),
        (_raw(v=1, op="explode", now=T0), "unknown command 'explode'"),
        (_raw(v=2, op="cluster_format", now=T0, fmt=c.FORMAT_VERSION + 1), f"command format {c.FORMAT_VERSION + 1}"),
    ],
)
def test_an_entry_this_node_does_not_understand_stops_it_and_changes_nothing(data: bytes, needle: str) -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    before = dump(h.m)
    with pytest.raises(c.UnsupportedCommand) as err:
        h.m.apply(data, 2)
    message = str(err.value)
    assert "entry 2" in message and needle in message and f"up to {c.FORMAT_VERSION}" in message
    assert err.value.stops_replica
    assert dump(h.m) == before


def test_malformed_spec_inside_create_is_rejected() -> None:
    h = Harness()
    good = json.loads(c.encode(c.CreateJob(T0, "x", spec(Every(SEC)))))
    for key, bad in [("conc", "SOMETIMES"), ("misfire", None), ("payload", "***"), ("sched", {"k": "weekly"})]:
        broken = json.loads(json.dumps(good))
        broken["spec"][key] = bad
        result = h.m.apply(json.dumps(broken).encode(), 1)
        assert isinstance(result, InvalidArgument), (key, result)
    assert h.m.jobs == {}


def test_a_handler_bug_is_reported_as_internal_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(tx: Tx, cmd: c.Barrier) -> Result:
        raise RuntimeError("bug")

    monkeypatch.setitem(HANDLERS, c.Barrier, boom)
    result = new_machine().apply(c.encode(c.Barrier(T0)), 7)
    assert isinstance(result, Internal) and "entry 7" in result.message


# ------------------------------------------------------------------ events


def test_events_describe_what_changed() -> None:
    h = Harness()
    h.create("j1", Every(SEC), concurrency=ConcurrencyPolicy.FORBID)
    h.fire(T0 + SEC)
    h.fire(T0 + 2 * SEC)
    h.ok(c.CancelRun(T0 + 2 * SEC, f"j1@{T0 + SEC}"))
    kinds = [(kind, run.run_id) for kind, run in h.m.drain_events()]
    assert kinds == [
        ("fired", f"j1@{T0 + SEC}"),
        ("skipped", f"j1@{T0 + 2 * SEC}"),
        ("finished", f"j1@{T0 + SEC}"),
    ]
    assert h.m.drain_events() == []


# ------------------------------------------------------------------ snapshots


def _rich_history() -> Harness:
    """A machine with every kind of job and run."""
    h = Harness()
    h.create("every", Every(SEC), key="k-every", queue="q1")
    h.create("forbid", Every(SEC), concurrency=ConcurrencyPolicy.FORBID, payload=b"\x00\xffbin")
    h.create("replace", Every(2 * SEC), concurrency=ConcurrencyPolicy.REPLACE)
    h.create("once", Every(SEC), misfire=MisfirePolicy.FIRE_ONCE, catchup_window_ms=4 * SEC)
    h.create("at", At(T0 + 3 * SEC))
    h.create("after", After(60 * SEC))
    h.create("cron", Cron("*/1 * * * *", "Europe/Berlin"), key="k-cron")
    h.create("paused", Every(SEC))
    h.create("deleted", Every(SEC))
    h.ok(c.NodeInfo(T0, "n1", "0.1.0", 1))
    h.ok(c.NodeInfo(T0, "n2", "0.2.0", 2))
    h.fire(T0 + 2 * SEC)
    lease(h, f"every@{T0 + SEC}")
    h.ok(c.PauseJob(T0 + 2 * SEC, "paused"))
    h.fire(T0 + 10 * SEC, threshold=500)
    h.ok(c.TriggerJob(T0 + 10 * SEC, "every"))
    h.ok(c.CancelRun(T0 + 10 * SEC, f"every@{T0 + 2 * SEC}"))
    h.ok(c.CancelRun(T0 + 10 * SEC, f"every@{T0 + SEC}"))  # leased: cancel requested
    h.ok(c.DeleteJob(T0 + 10 * SEC, "deleted"))
    h.ok(c.UpdateJob(T0 + 11 * SEC, "replace", spec(Every(3 * SEC), concurrency=ConcurrencyPolicy.REPLACE)))
    done = lease(h, f"every@{T0 + 3 * SEC}", "ex-2")
    complete(h, done, succeeded=True)
    retried = lease(h, f"every@{T0 + 4 * SEC}", "ex-3")
    h.ok(c.CompleteRun(h.m.now_ms, retried.lease_id, retried.fencing_token, False, b"", "exit 1", "", 0.25))
    retried = h.m.runs[retried.run_id]
    assert retried.status is RunStatus.PENDING and retried.not_before_ms > h.m.now_ms  # a retry, after backoff
    return h


def test_snapshot_restore_round_trips_exactly() -> None:
    h = _rich_history()
    statuses = {r.status for r in h.m.runs.values()}
    assert statuses >= {
        RunStatus.PENDING,
        RunStatus.LEASED,
        RunStatus.CANCELLED,
        RunStatus.SKIPPED,
        RunStatus.SUCCEEDED,
    }
    assert {j.status for j in h.m.jobs.values()} == set(JobStatus)
    data = h.m.snapshot()
    fresh = new_machine()
    fresh.restore(data)
    assert dump(fresh) == dump(h.m)
    assert fresh.snapshot() == data


def test_restored_machine_behaves_like_the_original() -> None:
    h = _rich_history()
    twin = Harness()
    twin.m.restore(h.m.snapshot())
    twin.index = h.index
    later = [
        c.Fire(T0 + 20 * SEC, tuple(h.m.due_jobs(T0 + 20 * SEC, 100)), 0, 500),
        c.CreateJob(T0 + 21 * SEC, "again", spec(Every(SEC)), "k-every"),  # idempotency survived
        c.ResumeJob(T0 + 22 * SEC, "paused"),
        c.TriggerJob(T0 + 22 * SEC, "once"),
        c.CancelRun(T0 + 22 * SEC, f"every@{T0 + 4 * SEC}"),
    ]
    for cmd in later:
        assert repr(h.apply(cmd)) == repr(twin.apply(cmd))
    assert dump(twin.m) == dump(h.m)
    assert twin.m.snapshot() == h.m.snapshot()


def test_members_versions_are_kept_and_a_format_2_snapshot_still_loads() -> None:
    h = _rich_history()
    assert h.m.members == {"n1": ("0.1.0", 1), "n2": ("0.2.0", 2)}
    body = marshal.loads(h.m.snapshot())
    assert body[0] == 4 and body[6] == [("n1", "0.1.0", 1), ("n2", "0.2.0", 2)]
    older = marshal.dumps((2, *body[1:6]), 2)  # what a node before members' versions wrote
    fresh = new_machine()
    fresh.restore(older)
    assert fresh.members == {}
    no_membership = ({}, None, {}, 1, {})
    assert dump(fresh) == {**dump(h.m), "members": {}, "membership": no_membership}
    format_3 = marshal.dumps((3, *body[1:7]), 2)  # what a node before the membership wrote
    fresh.restore(format_3)
    assert dump(fresh) == {**dump(h.m), "membership": no_membership}


def test_restore_discards_the_old_state() -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    h.fire(T0 + SEC)
    empty = new_machine().snapshot()
    h.m.restore(empty)
    assert dump(h.m) == dump(new_machine())


@pytest.mark.parametrize(
    "data,needle",
    [
        (marshal.dumps((99, 0, 0, [], [], []), 2), "format 99"),
        (marshal.dumps({"jobs": []}, 2), "format"),
        (b'{"format": 1}', "not readable"),
    ],
    ids=["newer-format", "foreign-body", "garbage"],
)
def test_restore_refuses_an_unknown_format(data: bytes, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        new_machine().restore(data)
