"""The job handlers (``raftsched.cluster.fsm.jobs``): create, pause, resume, delete, trigger, update."""

from __future__ import annotations

from typing import Any

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import (
    After,
    At,
    Cron,
    Every,
    JobStatus,
    RetryPolicy,
    RunStatus,
    Schedule,
)
from raftsched.cluster.domain.results import (
    AlreadyExists,
    FailedPrecondition,
    NotFound,
    Rejected,
)
from tests.unit.fsm.harness import (
    MIN,
    SEC,
    T0,
    Harness,
    dump,
    lease,
    same,
    spec,
    store_kind,  # noqa: F401 - every test here runs on both stores: in memory and on LMDB
)

pytestmark = pytest.mark.unit


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


# ------------------------------------------------------------------ trigger


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
