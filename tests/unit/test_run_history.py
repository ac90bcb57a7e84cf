"""A run's history: attempts and steps recorded by apply, request ids, RetryRun, both stores."""

from __future__ import annotations

import shutil
import tempfile
from typing import Callable, Iterator

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.live_output import LogSlice
from raftsched.cluster.domain.model import ConcurrencyPolicy, Every, JobSpec, MisfirePolicy, RetryPolicy, Run, RunStatus
from raftsched.cluster.domain.output import OutputKey, OutputMissing
from raftsched.cluster.domain.results import FailedPrecondition, InvalidArgument, Ok, Result
from raftsched.cluster.domain.run_history import steps as steps_of
from raftsched.cluster.domain.words import iso
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.store import MemoryStore, state_hash
from raftsched.cluster.node.explain import explain
from raftsched.cluster.node.run_output import read_run_output
from raftsched.storage.lmdb_state import LmdbTableStore

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000
RETRY = RetryPolicy(max_attempts=3, initial_backoff_ms=100, max_backoff_ms=1000, multiplier=2.0, jitter=0.0)


class Twins:
    """The same commands applied to a machine on a MemoryStore and one on LMDB: the results and states must match."""

    def __init__(self, lmdb_dir: str, cluster_format: int = 3) -> None:
        self.m = JobStateMachine(MemoryStore())
        self.twin = JobStateMachine(LmdbTableStore(f"{lmdb_dir}/state.mdb", map_size=64 << 20))
        self.index = 1
        if cluster_format > 1:
            self.apply(c.SetClusterFormat(T0, cluster_format))

    def apply(self, cmd: c.Command) -> Result:
        self.index += 1
        data = c.encode(cmd)
        result = self.m.apply(data, self.index)
        self.m.commit()
        twin = self.twin.apply(data, self.index)
        self.twin.commit()
        assert repr(twin) == repr(result)
        assert state_hash(self.m.store) == state_hash(self.twin.store)
        assert result is not None
        return result

    def close(self) -> None:
        store = self.twin.store
        assert isinstance(store, LmdbTableStore)
        store.close()

    def ok(self, cmd: c.Command) -> object:
        result = self.apply(cmd)
        assert isinstance(result, Ok), result
        return result.value

    def run(self, run_id: str) -> Run:
        return self.m.runs[run_id]


@pytest.fixture
def twins() -> Iterator[Callable[..., Twins]]:
    """Makes ``Twins`` (each with its own LMDB directory), closed and removed after the test."""
    made: list[tuple[str, Twins]] = []

    def make(cluster_format: int = 3) -> Twins:
        path = tempfile.mkdtemp(prefix="run-history-")
        made.append((path, Twins(path, cluster_format)))
        return made[-1][1]

    yield make
    for path, t in made:
        t.close()
        shutil.rmtree(path, ignore_errors=True)


def _job(t: Twins, **spec: object) -> str:
    fields: dict[str, object] = {"retry": RETRY, "lease_ttl_ms": 5_000}
    fields.update(spec)
    t.ok(c.CreateJob(T0, "j1", JobSpec("nightly", Every(1_000), **fields)))  # type: ignore[arg-type]
    return "j1"


def _fire_first(t: Twins, job_id: str = "j1", now: int = T0 + 1_000) -> str:
    report = t.ok(c.Fire(now, ((job_id, T0 + 1_000),), 0, 5_000, 0, "n2", 7))
    return report.created[0]  # type: ignore[attr-defined,no-any-return]


def _lease(t: Twins, executor: str, now: int) -> Run:
    grants = t.ok(c.AcquireLeases(now, executor, ("default",), 1))
    assert len(grants) == 1, grants  # type: ignore[arg-type]
    return grants[0].run  # type: ignore[index,no-any-return]


def test_fail_fail_succeed_keeps_three_attempts_and_explains_each_step_in_order(twins: Callable[..., Twins]) -> None:
    t = twins()
    _job(t)
    run_id = _fire_first(t)
    now = T0 + 1_000
    for n, executor in enumerate(["ex-a", "ex-b", "ex-a"], start=1):
        now += 500
        lease = _lease(t, executor, now)
        now += 100
        ok = n == 3
        t.ok(
            c.CompleteRun(
                now, lease.lease_id, lease.fencing_token, ok, b"", "" if ok else f"exit {n}", f"s3://o/{n}.log", 0.5, executor
            )
        )
    run = t.run(run_id)
    assert run.status is RunStatus.SUCCEEDED
    assert [(a.attempt, a.executor_id, a.outcome, a.error, a.log_uri) for a in run.attempts] == [
        (1, "ex-a", "FAILED", "exit 1", "s3://o/1.log"),
        (2, "ex-b", "FAILED", "exit 2", "s3://o/2.log"),
        (3, "ex-a", "SUCCEEDED", "", "s3://o/3.log"),
    ]
    assert len({a.fencing_token for a in run.attempts}) == 3
    assert all(a.leased_at_ms < a.finished_at_ms for a in run.attempts)
    # stored: what the attempts cannot tell; ExplainRun adds each grant and the success in their place
    assert [s.kind for s in steps_of(run)] == ["fired", "failed", "retry_scheduled", "failed", "retry_scheduled"]
    shown = explain(run).steps
    kinds = [s.kind for s in shown]
    assert kinds == ["fired", "leased", "failed", "retry_scheduled", "leased", "failed", "retry_scheduled", "leased", "succeeded"]
    fired = shown[0]
    assert fired.node_id == "n2" and f"instant {iso(run.scheduled_ms)} fired by leader n2 (term 7, entry " in fired.detail
    assert fired.detail.endswith(", 0 ms after its instant")  # stored as values, worded on read
    assert "ex-b" in shown[4].detail and "backoff of 200 ms" in shown[6].detail
    assert [s.at_ms for s in shown] == sorted(s.at_ms for s in shown)


def test_an_expired_lease_is_an_attempt_lease_expired_and_dead_letter_ends_the_budget(twins: Callable[..., Twins]) -> None:
    t = twins()
    _job(t, retry=RetryPolicy(max_attempts=1))
    run_id = _fire_first(t)
    lease = _lease(t, "ex-a", T0 + 1_100)
    assert t.ok(c.ExpireLeases(T0 + 7_000, ((lease.lease_id, lease.fencing_token, 0.5),))) == 1
    run = t.run(run_id)
    assert run.status is RunStatus.DEAD_LETTER
    assert run.attempts[0].outcome == "LEASE_EXPIRED" and run.attempts[0].finished_at_ms == T0 + 7_000
    assert [s.kind for s in explain(run).steps][-3:] == ["leased", "lease_expired", "dead_letter"]


def test_cancel_of_a_leased_run_ends_its_attempt_cancelled(twins: Callable[..., Twins]) -> None:
    t = twins()
    _job(t)
    run_id = _fire_first(t)
    lease = _lease(t, "ex-a", T0 + 1_100)
    t.ok(c.CancelRun(T0 + 1_200, run_id))
    t.ok(c.CompleteRun(T0 + 1_300, lease.lease_id, lease.fencing_token, False, error="stopped", executor_id="ex-a"))
    run = t.run(run_id)
    assert run.status is RunStatus.CANCELLED and run.attempts[-1].outcome == "CANCELLED"
    assert [s.kind for s in explain(run).steps] == ["fired", "leased", "cancel_requested", "attempt_cancelled", "cancelled"]


def test_retry_run_gives_a_fresh_budget_and_keeps_the_attempts(twins: Callable[..., Twins]) -> None:
    t = twins()
    _job(t, retry=RetryPolicy(max_attempts=1))
    run_id = _fire_first(t)
    lease = _lease(t, "ex-a", T0 + 1_100)
    t.ok(c.CompleteRun(T0 + 1_200, lease.lease_id, lease.fencing_token, False, error="boom", executor_id="ex-a"))
    assert t.run(run_id).status is RunStatus.DEAD_LETTER
    refused = t.apply(c.RetryRun(T0 + 1_250, "j1@nope"))
    assert not isinstance(refused, Ok) and "j1@nope" in refused.message  # type: ignore[union-attr]
    run = t.ok(c.RetryRun(T0 + 1_300, run_id, "alice"))
    assert run.status is RunStatus.PENDING and run.budget_base == 1  # type: ignore[attr-defined]
    assert "by 'alice'" in steps_of(run)[-1].detail and steps_of(run)[-1].kind == "manual_retry"
    again = t.apply(c.RetryRun(T0 + 1_350, run_id))
    assert isinstance(again, FailedPrecondition) and "PENDING" in again.message and run_id in again.message
    lease = _lease(t, "ex-b", T0 + 1_400)
    assert lease.attempt == 2  # the numbering goes on: each attempt keeps its own output
    t.ok(c.CompleteRun(T0 + 1_500, lease.lease_id, lease.fencing_token, True, executor_id="ex-b"))
    run = t.run(run_id)
    assert run.status is RunStatus.SUCCEEDED and [a.outcome for a in run.attempts] == ["FAILED", "SUCCEEDED"]
    assert isinstance(t.apply(c.RetryRun(T0 + 1_600, run_id)), FailedPrecondition)  # SUCCEEDED is not retried


def test_a_run_fired_early_and_retried_before_its_instant_waits_for_it(twins: Callable[..., Twins]) -> None:
    """Found by the model test: a fire commits up to the look-ahead before its instant; cancelled and retried
    in that window, the run must still not be leasable before its instant."""
    t = twins()
    _job(t)
    report = t.ok(c.Fire(T0 + 900, (("j1", T0 + 1_000),), 100, 5_000, 0, "n2", 7))  # 100 ms early
    run_id = report.created[0]  # type: ignore[attr-defined]
    t.ok(c.CancelRun(T0 + 920, run_id))
    t.ok(c.RetryRun(T0 + 950, run_id))
    assert t.run(run_id).status is RunStatus.PENDING and t.run(run_id).not_before_ms == T0 + 1_000
    assert t.ok(c.AcquireLeases(T0 + 990, "e1", ("default",), 1)) == []  # not before its instant
    assert len(t.ok(c.AcquireLeases(T0 + 1_000, "e1", ("default",), 1))) == 1  # type: ignore[arg-type]


def test_retry_before_format_3_is_refused_by_the_gate(twins: Callable[..., Twins]) -> None:
    t = twins(cluster_format=2)
    refused = t.apply(c.RetryRun(T0, "j1@1"))
    assert isinstance(refused, FailedPrecondition) and "needs command format 3" in refused.message


def test_nothing_is_recorded_before_the_cluster_switches_to_format_3(twins: Callable[..., Twins]) -> None:
    t = twins(cluster_format=2)
    _job(t)
    run_id = _fire_first(t)
    _lease(t, "ex-a", T0 + 1_100)
    run = t.run(run_id)
    assert run.attempts == () and steps_of(run) == ()
    assert explain(run).steps[0].kind == "not_recorded"


def test_skips_are_explained_with_the_policy(twins: Callable[..., Twins]) -> None:
    t = twins()
    t.ok(c.CreateJob(T0, "once", JobSpec("once", Every(1_000), misfire=MisfirePolicy.FIRE_ONCE)))
    t.ok(c.CreateJob(T0, "forbid", JobSpec("forbid", Every(1_000), concurrency=ConcurrencyPolicy.FORBID)))
    late = T0 + 10_500  # ten instants due: 1-8 coalesced, 9 caught up (missed), 10 on time
    report = t.ok(c.Fire(late, (("once", T0 + 1_000),), 0, 500, 0, "n1", 3))
    fired = t.run(report.created[0])  # type: ignore[attr-defined]
    assert "FIRE_ONCE" in steps_of(fired)[0].detail and "missed" in steps_of(fired)[0].detail
    skipped = t.run(f"once@{T0 + 1_000}")
    assert skipped.status is RunStatus.SKIPPED and steps_of(skipped)[0].kind == "skipped"
    assert "8 instants" in steps_of(skipped)[0].detail and "FIRE_ONCE" in steps_of(skipped)[0].detail
    t.ok(c.Fire(T0 + 1_000, (("forbid", T0 + 1_000),), 0, 5_000))
    t.ok(c.Fire(T0 + 2_000, (("forbid", T0 + 2_000),), 0, 5_000))
    forbidden = t.run(f"forbid@{T0 + 2_000}")
    assert forbidden.status is RunStatus.SKIPPED and "concurrency FORBID" in steps_of(forbidden)[0].detail


def test_the_same_request_id_returns_the_first_answer_until_it_expires(twins: Callable[..., Twins]) -> None:
    t = twins()
    _job(t)
    first = t.ok(c.TriggerJob(T0 + 10, "j1", request_id="r-1"))
    again = t.ok(c.TriggerJob(T0 + 20, "j1", request_id="r-1"))
    assert again.run_id == first.run_id  # type: ignore[attr-defined]
    assert sum(1 for r in t.m.runs.values() if r.manual) == 1
    other = t.apply(c.CancelRun(T0 + 30, first.run_id, request_id="r-1"))  # type: ignore[attr-defined]
    assert isinstance(other, InvalidArgument) and "'r-1'" in other.message
    assert t.run(first.run_id).status is RunStatus.PENDING  # type: ignore[attr-defined]
    expired = T0 + 10 + lim.REQUEST_ID_TTL_MS
    assert t.m.next_prune_ms() == expired
    fresh = t.ok(c.TriggerJob(expired, "j1", request_id="r-1"))  # forgotten: a new request
    assert fresh.run_id != first.run_id  # type: ignore[attr-defined]
    t.ok(c.PruneHistory(expired + lim.REQUEST_ID_TTL_MS))
    assert t.m.request_rows() == []


def test_a_refused_request_is_not_remembered(twins: Callable[..., Twins]) -> None:
    t = twins()
    assert not isinstance(t.apply(c.PauseJob(T0, "j1", request_id="r-2")), Ok)
    _job(t)
    assert t.ok(c.PauseJob(T0 + 1, "j1", request_id="r-2")).status.value == "PAUSED"  # type: ignore[attr-defined]


def test_steps_and_attempts_are_capped_and_counted(twins: Callable[..., Twins]) -> None:
    t = twins()
    _job(t, retry=RetryPolicy(max_attempts=1))
    run_id = _fire_first(t)
    now = T0 + 1_000
    for _ in range(lim.MAX_RUN_ATTEMPTS_KEPT + 3):
        now += 10
        lease = _lease(t, "ex-a", now)
        t.ok(c.CompleteRun(now + 1, lease.lease_id, lease.fencing_token, False, error="no", executor_id="ex-a"))
        t.ok(c.RetryRun(now + 2, run_id))
    run = t.run(run_id)
    assert len(run.attempts) == lim.MAX_RUN_ATTEMPTS_KEPT and run.attempts_dropped == 3
    assert run.attempts[0].attempt == 4 and run.attempts[-1].attempt == lim.MAX_RUN_ATTEMPTS_KEPT + 3
    assert len(steps_of(run)) == lim.MAX_RUN_STEPS and run.steps_dropped > 0
    assert steps_of(run)[0].kind == "fired" and steps_of(run)[-1].kind == "manual_retry"
    assert [s.kind for s in explain(run).steps[-4:]] == ["leased", "failed", "dead_letter", "manual_retry"]
    shown = explain(run)
    gaps = [i for i, step in enumerate(shown.steps) if step.kind == "steps_dropped"]
    assert len(gaps) == 1 and f"{run.steps_dropped} steps" in shown.steps[gaps[0]].detail
    stored_before = [step for step in shown.steps[: gaps[0]] if step.kind != "leased"]  # the grants come from attempts
    assert stored_before == list(steps_of(run)[: lim.RUN_STEPS_HEAD])


def test_snapshot_restore_keeps_histories_and_request_ids(twins: Callable[..., Twins]) -> None:
    t = twins()
    _job(t)
    run_id = _fire_first(t)
    _lease(t, "ex-a", T0 + 1_100)
    t.ok(c.TriggerJob(T0 + 1_200, "j1", request_id="r-3"))
    fresh = JobStateMachine()
    fresh.restore(t.m.snapshot())
    assert steps_of(fresh.runs[run_id]) == steps_of(t.run(run_id)) and fresh.runs[run_id].attempts == t.run(run_id).attempts
    assert state_hash(fresh.store) == state_hash(t.m.store)


class Logs:
    """An output reader holding logs by URI."""

    def __init__(self, logs: dict[str, bytes]) -> None:
        self.logs = logs

    def read_at(self, uri: str, offset: int) -> tuple[LogSlice, bytes]:
        if uri not in self.logs:
            raise OutputMissing(f"{uri} is gone")
        data = self.logs[uri][offset:]
        return LogSlice(data, len(self.logs[uri]), offset + len(data)), b""

    def read_live(self, key: OutputKey, offset: int) -> LogSlice:
        raise OutputMissing("no live output")


def test_get_run_output_reads_each_attempts_own_log(twins: Callable[..., Twins]) -> None:
    t = twins()
    _job(t)
    run_id = _fire_first(t)
    uris = []
    for n in (1, 2):
        lease = _lease(t, "ex-a", T0 + 1_000 + n * 1_000)
        uris.append(f"file:///o/attempt-{n}-token-{lease.fencing_token}.log")  # as executors name them
        t.ok(
            c.CompleteRun(
                T0 + 1_100 + n * 1_000, lease.lease_id, lease.fencing_token, n == 2, log_uri=uris[-1], executor_id="ex-a"
            )
        )
    reader = Logs({uris[0]: b"first try\n", uris[1]: b"second try\n"})
    run = t.run(run_id)
    first = read_run_output(run, 1, reader)  # type: ignore[arg-type]
    assert (first.attempt, first.log, first.fencing_token) == (1, b"first try\n", run.attempts[0].fencing_token)
    assert read_run_output(run, 2, reader).log == b"second try\n"  # type: ignore[arg-type]
    missing = read_run_output(run, 9, reader)  # type: ignore[arg-type]
    assert "attempt 9" in missing.missing_reason and "attempts 1-2" in missing.missing_reason


def test_failed_history_limit_keeps_failures_apart_from_a_burst_of_successes(twins: Callable[..., Twins]) -> None:
    t = twins()
    spec = JobSpec("mixed", Every(1_000), retry=RetryPolicy(max_attempts=1), history_limit=2, failed_history_limit=3)
    t.ok(c.CreateJob(T0, "j1", spec))
    now, expected = T0, T0 + 1_000

    def one(ok: bool) -> str:
        nonlocal now, expected
        now = expected
        run_id = t.ok(c.Fire(now, (("j1", expected),), 0, 5_000)).created[0]  # type: ignore[attr-defined]
        expected += 1_000
        lease = _lease(t, "ex-a", now)
        t.ok(c.CompleteRun(now + 1, lease.lease_id, lease.fencing_token, ok, error="" if ok else "no", executor_id="ex-a"))
        return str(run_id)

    failures = [one(False) for _ in range(4)]  # the oldest goes: three kept
    successes = [one(True) for _ in range(6)]  # a burst: two kept, and no failure pruned for them
    kept = {r.run_id: r.status for r in t.m.runs.values()}
    assert sorted(r for r, s in kept.items() if s is RunStatus.DEAD_LETTER) == sorted(failures[1:])
    assert sorted(r for r, s in kept.items() if s is RunStatus.SUCCEEDED) == sorted(successes[-2:])
    t.ok(c.RetryRun(now + 10, failures[1]))  # a retried failure leaves the failures' count
    assert t.m.failed_count("j1") == 2
