"""The state machine's schedule bounds and exceptions, and each job's info (command format 5): runs fired and
skipped as the spec says, max_runs, pause_after_failures, a pause until, trigger_on_create, the summary kept
by apply, and all of it through the blob."""

from __future__ import annotations

import json

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import Every, JobSpec, JobStatus, NotifyRule, RetryPolicy, RunStatus, TimeWindow
from raftsched.cluster.domain.results import FailedPrecondition, InvalidArgument, NotFound
from raftsched.cluster.domain.run_history import steps as explain_steps
from raftsched.cluster.domain.schedule.exceptions import jitter_ms
from raftsched.cluster.fsm.machine import JobStateMachine
from tests.unit.fsm.harness import (
    SEC,
    T0,
    Harness,
    dump,
    lease,
    new_machine,
    on_format,
    spec,
    store_kind,  # noqa: F401 - every test here runs on both stores
)

pytestmark = pytest.mark.unit


def _h(fmt: int = 5) -> Harness:
    return on_format(fmt)


def _fail(h: Harness, run_id: str) -> None:
    run = lease(h, run_id)
    h.ok(c.CompleteRun(h.m.now_ms, run.lease_id, run.fencing_token, False, b"", "boom", ""))


def _succeed(h: Harness, run_id: str) -> None:
    run = lease(h, run_id)
    h.ok(c.CompleteRun(h.m.now_ms, run.lease_id, run.fencing_token, True, b"", "", ""))


def test_bounds_windows_and_jitter_shape_what_fires() -> None:
    h = _h()
    h.create(
        "j1", Every(SEC), start_ms=T0 + 5 * SEC, end_ms=T0 + 9 * SEC, jitter_ms=300,
        skip_windows=(TimeWindow(T0 + 6 * SEC, T0 + 7 * SEC),),
    )  # fmt: skip
    report = h.fire(T0 + 20 * SEC)
    assert report.created == [f"j1@{T0 + k * SEC}" for k in (5, 7, 8, 9)] and report.skipped == 1
    for run in h.runs("j1"):
        if run.status is RunStatus.PENDING:
            assert run.not_before_ms == run.scheduled_ms + jitter_ms("j1", run.scheduled_ms, 300)
        else:
            assert run.status is RunStatus.SKIPPED and run.scheduled_ms == T0 + 6 * SEC and "skip window" in run.error
    job = h.job("j1")
    assert job.status is JobStatus.COMPLETED and job.info.skipped_count == 1


def test_max_runs_counts_scheduled_runs_only() -> None:
    h = _h()
    h.create("j1", Every(SEC), max_runs=3)
    h.ok(c.TriggerJob(T0, "j1"))  # a manual run does not count
    assert h.fire(T0 + 2 * SEC).created == [f"j1@{T0 + k * SEC}" for k in (1, 2)]
    assert h.fire(T0 + 10 * SEC).created == [f"j1@{T0 + 3 * SEC}"]
    job = h.job("j1")
    assert job.status is JobStatus.COMPLETED and job.next_fire_ms is None and job.info.scheduled_runs == 3
    assert h.m.due_jobs(T0 + 100 * SEC, 10) == []


def test_failures_in_a_row_pause_the_job_and_a_success_resets_them() -> None:
    h = _h()
    h.create("j1", Every(SEC), pause_after_failures=2, retry=RetryPolicy(max_attempts=1))
    h.fire(T0 + 3 * SEC)
    _fail(h, f"j1@{T0 + SEC}")
    _succeed(h, f"j1@{T0 + 2 * SEC}")
    info = h.job("j1").info
    assert (info.failure_count, info.success_count, info.consecutive_failures) == (1, 1, 0)
    assert info.last_success_ms == info.last_failure_ms == h.m.now_ms and "boom" in info.last_error
    _fail(h, f"j1@{T0 + 3 * SEC}")
    assert h.job("j1").status is JobStatus.ACTIVE
    h.fire(T0 + 4 * SEC)
    _fail(h, f"j1@{T0 + 4 * SEC}")
    job = h.job("j1")
    assert job.status is JobStatus.PAUSED and "2 failed runs in a row" in job.info.pause_note
    assert h.m.due_jobs(T0 + 100 * SEC, 10) == []
    resumed = h.ok(c.ResumeJob(T0 + 5 * SEC, "j1"))
    assert resumed.status is JobStatus.ACTIVE and resumed.info.pause_note == ""


def test_a_pause_until_resumes_through_fire_and_skips_only_the_paused_instants() -> None:
    h = _h()
    h.create("j1", Every(SEC))
    paused = h.ok(c.PauseJob(T0, "j1", note="deploy", until_ms=T0 + 5 * SEC))
    assert paused.status is JobStatus.PAUSED and paused.info.paused_until_ms == T0 + 5 * SEC
    assert h.m.due_jobs(T0 + 4 * SEC, 10) == [] and h.m.due_jobs(T0 + 5 * SEC, 10) == [("j1", T0 + 5 * SEC)]
    assert h.fire(T0 + 4 * SEC, [("j1", T0 + 5 * SEC)]).stale == 1  # not yet
    report = h.fire(T0 + 6 * SEC)
    assert report.created == [f"j1@{T0 + 5 * SEC}", f"j1@{T0 + 6 * SEC}"]
    job = h.job("j1")
    assert job.status is JobStatus.ACTIVE and job.info.pause_note == "" and job.info.paused_until_ms == 0
    skip = h.m.runs[f"j1@{T0 + SEC}"]
    assert skip.status is RunStatus.SKIPPED and skip.skipped_count == 4 and "paused" in skip.error


def test_a_resumed_job_drops_its_until_row_and_a_deleted_one_too() -> None:
    h = _h()
    h.create("j1", Every(SEC))
    h.create("j2", Every(SEC))
    h.ok(c.PauseJob(T0, "j1", until_ms=T0 + 50 * SEC))
    h.ok(c.PauseJob(T0, "j2", until_ms=T0 + 50 * SEC))
    h.ok(c.ResumeJob(T0 + SEC, "j1"))
    h.ok(c.DeleteJob(T0 + SEC, "j2"))
    assert h.m.due_jobs(T0 + 100 * SEC, 10) == [("j1", T0 + 2 * SEC)]


def test_trigger_on_create_makes_a_run_in_the_same_entry() -> None:
    h = _h()
    h.create("j1", Every(3600 * SEC), trigger_on_create=True)
    (run,) = h.runs("j1")
    assert run.manual and run.status is RunStatus.PENDING and run.run_id == f"j1@manual-{h.index}"


def test_format_5_commands_are_refused_before_the_cluster_uses_it() -> None:
    h = _h(4)
    result = h.apply(c.CreateJob(T0, "j1", spec(Every(SEC), labels=(("a", "b"),))))
    assert isinstance(result, FailedPrecondition) and "format 5" in result.message
    assert isinstance(h.apply(c.PauseJob(T0, "j1", note="x")), FailedPrecondition)
    h.create("j2", Every(SEC))
    h.fire(T0 + SEC)
    run = lease(h, f"j2@{T0 + SEC}")
    h.ok(c.CompleteRun(h.m.now_ms, run.lease_id, run.fencing_token, True, b"", "", ""))
    assert h.job("j2").info.success_count == 0  # format 4 keeps no summary: an older replica would not


def test_job_info_survives_the_blob() -> None:
    h = _h()
    h.create("j1", Every(SEC), labels=(("team", "a"),), retry=RetryPolicy(max_attempts=1))
    h.fire(T0 + SEC)
    _fail(h, f"j1@{T0 + SEC}")
    h.create("j2", Every(SEC))
    h.ok(c.PauseJob(T0 + SEC, "j2", note="n", until_ms=T0 + 60 * SEC))
    other: JobStateMachine = new_machine()
    other.restore(h.m.snapshot())
    assert dump(other) == dump(h.m)
    assert other.jobs["j1"].info.failure_count == 1 and other.jobs["j2"].info.pause_note == "n"
    assert other.due_jobs(T0 + 60 * SEC, 10)[-1] == ("j2", T0 + 60 * SEC)


def test_backfill_makes_runs_for_past_instants_without_one_once() -> None:
    h = _h()
    h.create("j1", Every(SEC))
    h.ok(c.PauseJob(T0, "j1"))
    h.ok(c.ResumeJob(T0 + 5 * SEC + 500, "j1"))  # 1..5 skipped, in one record at T0 + 1 s
    h.fire(T0 + 7 * SEC)  # 6 and 7 fire
    instants, made = h.ok(c.BackfillJob(T0 + 8 * SEC, "j1", T0, T0 + 60 * SEC))
    assert instants == [T0 + k * SEC for k in range(1, 6)]  # not 6, 7 (they have runs), not 8.. (not passed yet)
    assert [r.run_id for r in made] == [f"j1@{T0 + k * SEC}-backfill" for k in range(1, 6)]
    run = h.m.runs[f"j1@{T0 + 2 * SEC}-backfill"]
    assert run.status is RunStatus.PENDING and dict(run.extra) == {"backfill": True} and run.not_before_ms == T0 + 8 * SEC
    assert h.ok(c.BackfillJob(T0 + 9 * SEC, "j1", T0, T0 + 60 * SEC)) == ([], [])  # again: nothing more


def test_backfill_refuses_more_than_its_limit_and_bad_ranges() -> None:
    h = _h()
    h.create("j1", Every(100), now=T0)
    h.ok(c.Barrier(T0 + 2_000_000))
    h.ok(c.PauseJob(T0 + 2_000_000, "j1"))
    h.ok(c.ResumeJob(T0 + 2_000_000, "j1"))
    assert "more than 10000" in h.rejected(c.BackfillJob(T0 + 2_000_000, "j1", T0, T0 + 2_000_000), InvalidArgument).message
    assert "not after" in h.rejected(c.BackfillJob(T0 + 2_000_000, "j1", T0, T0), InvalidArgument).message
    assert isinstance(h.apply(c.BackfillJob(T0 + 2_000_000, "nope", T0, T0 + 1)), NotFound)


def test_a_trigger_with_its_own_payload_leases_with_it() -> None:
    h = _h()
    h.create("j1", Every(3600 * SEC), payload=b"job's")
    run = h.ok(c.TriggerJob(T0, "j1", payload=b'{"n": 1}'))
    assert dict(run.extra) == {"payload": b'{"n": 1}'}
    (grant,) = h.ok(c.AcquireLeases(T0, "ex-1", ("default",), 1))
    assert dict(grant.run.extra)["payload"] == b'{"n": 1}' and grant.spec.payload == b"job's"


def test_a_run_pending_past_its_ttl_expires_and_counts_as_a_failure() -> None:
    h = _h()
    h.create("j1", Every(SEC), pending_ttl_ms=5 * SEC, retry=RetryPolicy(max_attempts=3, initial_backoff_ms=SEC, jitter=0.0))
    h.fire(T0 + 2 * SEC)
    first, second = f"j1@{T0 + SEC}", f"j1@{T0 + 2 * SEC}"
    assert h.m.expired_pending(T0 + 6 * SEC - 1, 10) == [] and h.m.next_pending_deadline() == T0 + 6 * SEC
    assert h.m.expired_pending(T0 + 7 * SEC, 10) == [first, second]
    _fail(h, first)  # a retry: PENDING again, its ttl counted from its new not_before
    retried = h.m.runs[first]
    assert retried.status is RunStatus.PENDING and h.m.tx.mem.pending_ttl[first] == retried.not_before_ms + 5 * SEC
    assert h.ok(c.ExpirePending(T0 + 7 * SEC - 1, (second,))) == 0  # not yet
    assert h.ok(c.ExpirePending(T0 + 7 * SEC, (first, second))) == 1  # the retried one has time left
    run = h.m.runs[second]
    assert run.status is RunStatus.EXPIRED and "pending_ttl" in run.error and second not in h.m.tx.mem.pending_ttl
    info = h.job("j1").info
    assert info.failure_count == 1 and info.consecutive_failures == 1 and "pending_ttl" in info.last_error
    assert h.m.run_counts[RunStatus.EXPIRED] == 1


def _granted(h: Harness, n: int, queue: str = "default", now: int | None = None) -> list[str]:
    grants = h.ok(c.AcquireLeases(now or h.m.now_ms, "ex-1", (queue,), n))
    return [g.run.job_id for g in grants]


def test_higher_priorities_are_leased_first_and_fifo_within_one() -> None:
    h = _h()
    h.create("low", Every(SEC))
    h.create("high", Every(SEC), priority=9)
    h.create("mid", Every(SEC), priority=5)
    h.fire(T0 + 2 * SEC)  # two runs each, at T0 + 1 s and T0 + 2 s
    assert _granted(h, 3) == ["high", "high", "mid"]
    assert h.m.queue_depths() == {"default": 3}
    assert _granted(h, 10) == ["mid", "low", "low"]
    assert h.m.queue_depths() == {}


def test_typed_grants_follow_priorities_too() -> None:
    h = _h()
    for job_id, job_type, p in (("a", "t1", 0), ("b", "t1", 3), ("c", "t2", 9)):
        h.ok(c.CreateJob(T0, job_id, JobSpec(job_id, Every(SEC), type=job_type, priority=p)))
    h.fire(T0 + SEC)
    grants = h.ok(c.AcquireLeases(T0 + SEC, "ex-1", ("default",), 5, ("t1",)))
    assert [g.run.job_id for g in grants] == ["b", "a"]


def test_a_concurrency_key_caps_the_leased_runs_of_every_job_sharing_it() -> None:
    h = _h()
    h.create("a", Every(SEC), concurrency_key="db", concurrency_limit=2)
    h.create("b", Every(SEC), concurrency_key="db", concurrency_limit=2)
    h.create("free", Every(SEC))
    h.fire(T0 + 3 * SEC)  # three runs each
    assert sorted(_granted(h, 10)) == ["a", "b", "free", "free", "free"]  # two of the key (the oldest), in one grant
    assert _granted(h, 10) == []  # the key is at its limit: the other runs of a and b wait
    assert h.m.tx.mem.conc_leased == {"db": 2}
    leased = [r for r in h.runs("a") if r.status is RunStatus.LEASED]
    h.ok(c.CompleteRun(h.m.now_ms, leased[0].lease_id, leased[0].fencing_token, True, b"", "", ""))
    assert _granted(h, 10) == ["a"] and h.m.tx.mem.conc_leased == {"db": 2}  # the next oldest of the key


def test_priorities_and_keys_survive_a_reload_of_the_indexes() -> None:
    h = _h()
    h.create("hi", Every(SEC), priority=7, concurrency_key="k", concurrency_limit=1)
    h.create("lo", Every(SEC))
    h.fire(T0 + 2 * SEC)
    assert _granted(h, 1) == ["hi"]
    h.m.commit()
    h.m.load()  # the in-memory indexes rebuilt from the store
    assert h.m.tx.mem.conc_leased == {"k": 1} and h.m.tx.mem.run_prio == {f"hi@{T0 + 2 * SEC}": 7}
    assert _granted(h, 10) == ["lo", "lo"]


def test_notifications_are_runs_made_in_the_same_entry_once() -> None:
    h = _h()
    rules = (
        NotifyRule(("FAILED", "DEAD_LETTER", "RECOVERED"), "https://hooks.example/a", "s1"),
        NotifyRule(("SUCCEEDED",), "http://b/"),
    )
    h.create("j1", Every(SEC), notify=rules, retry=RetryPolicy(max_attempts=1), labels=(("team", "x"),))
    h.fire(T0 + 2 * SEC)
    index_before = h.index
    _fail(h, f"j1@{T0 + SEC}")
    failed = f"j1@{T0 + SEC}#notify-1-dead_letter-0"
    note = h.m.runs[failed]
    assert note.status is RunStatus.PENDING and note.queue == "raftsched.notify" and note.job_id == "j1"
    extra = dict(note.extra)
    assert extra["type"] == "notify" and extra["event"] == "DEAD_LETTER"
    payload = json.loads(extra["payload"])
    assert payload["url"] == "https://hooks.example/a" and payload["secret_name"] == "s1" and payload["event_id"] == failed
    body = json.loads(payload["body"])
    assert body == {
        "event": "DEAD_LETTER", "job_id": "j1", "job_name": "job", "run_id": f"j1@{T0 + SEC}", "status": "DEAD_LETTER",
        "attempt": 1, "error": "attempt 1 of 1 failed: boom", "scheduled_time": "2026-01-01T00:00:01.000Z", "labels": {"team": "x"},
    }  # fmt: skip
    assert note.fired_ms == h.m.runs[f"j1@{T0 + SEC}"].finished_ms and h.index == index_before + 2  # lease, complete
    assert [s.kind for s in explain_steps(h.m.runs[f"j1@{T0 + SEC}"])][-1] == "notified"
    _succeed(h, f"j1@{T0 + 2 * SEC}")  # a success after a failure: RECOVERED (rule 0) and SUCCEEDED (rule 1)
    made = sorted(r for r in h.m.runs if "#notify" in r)
    assert made == sorted([failed, f"j1@{T0 + 2 * SEC}#notify-1-recovered-0", f"j1@{T0 + 2 * SEC}#notify-1-succeeded-1"])
    assert h.job("j1").info.success_count == 1 and h.job("j1").info.failure_count == 1  # notifications are not counted
    # a notification's own end is not notified
    grants = h.ok(c.AcquireLeases(h.m.now_ms, "ex-n", ("raftsched.notify",), 10, ("notify",)))
    assert sorted(g.run.run_id for g in grants) == made
    for g in grants:
        h.ok(c.CompleteRun(h.m.now_ms, g.run.lease_id, g.run.fencing_token, False, b"", "refused", ""))
    assert sorted(r for r in h.m.runs if "#notify" in r) == made
    assert h.job("j1").info.failure_count == 1


def test_a_skip_record_notifies_skipped() -> None:
    h = _h()
    h.create("j1", Every(SEC), notify=(NotifyRule(("SKIPPED",), "http://h/"),))
    h.ok(c.PauseJob(T0, "j1"))
    h.ok(c.ResumeJob(T0 + 3 * SEC + 500, "j1"))
    (note,) = [r for r in h.m.runs if "#notify" in r]
    assert note == f"j1@{T0 + SEC}#notify-0-skipped-0"
    assert json.loads(json.loads(dict(h.m.runs[note].extra)["payload"])["body"])["event"] == "SKIPPED"
