"""Firing (``raftsched.cluster.fsm.fire``): exactly once, the misfire policies, concurrency, the due index."""

from __future__ import annotations

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import (
    After,
    At,
    ConcurrencyPolicy,
    Cron,
    Every,
    JobStatus,
    MisfirePolicy,
    RunStatus,
    Schedule,
)
from tests.unit.fsm.harness import (
    MIN,
    SEC,
    T0,
    Harness,
    active_ids,
    complete,
    dump,
    late_fire,
    lease,
    store_kind,  # noqa: F401 - every test here runs on both stores: in memory and on LMDB
)

pytestmark = pytest.mark.unit


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


def test_fire_all_fires_every_missed_instant() -> None:
    h = late_fire(MisfirePolicy.FIRE_ALL)
    assert h.run_times("j1", RunStatus.PENDING) == [T0 + k * SEC for k in range(1, 11)]
    assert h.run_times("j1", RunStatus.SKIPPED) == []
    assert h.job("j1").cursor_ms == T0 + 10 * SEC


def test_fire_once_fires_only_the_latest_missed_instant_and_records_the_rest() -> None:
    h = late_fire(MisfirePolicy.FIRE_ONCE)
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
    h = late_fire(MisfirePolicy.SKIP)
    assert h.run_times("j1", RunStatus.PENDING) == [T0 + 10 * SEC]
    skipped = [r for r in h.runs("j1") if r.status is RunStatus.SKIPPED]
    covered = [r.scheduled_ms + k * SEC for r in skipped for k in range(r.skipped_count)]
    assert covered == [T0 + k * SEC for k in range(1, 10)]
    assert all("SKIP" in r.error and r.error.startswith("missed by") for r in skipped)
    assert h.job("j1").cursor_ms == T0 + 10 * SEC


@pytest.mark.parametrize("policy", list(MisfirePolicy))
def test_instants_older_than_the_catchup_window_are_skipped_in_one_record(policy: MisfirePolicy) -> None:
    h = late_fire(policy, catchup=3 * SEC)
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
    from raftsched.cluster.domain.schedule.firing import DECISION_BUDGET

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
