"""Retention: history limits by count and time, soft-deleted jobs purged after their TTL."""

from __future__ import annotations

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import At, Every, JobSpec, JobStatus, RunStatus
from raftsched.cluster.domain.results import Ok
from raftsched.cluster.fsm import layout
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.store import Table, iter_table

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000
SEC = 1000


class H:
    def __init__(self) -> None:
        self.m = JobStateMachine()
        self.i = 0

    def apply(self, cmd: c.Command):  # type: ignore[no-untyped-def]
        self.i += 1
        res = self.m.apply(c.encode(cmd), self.i)
        assert isinstance(res, Ok), res
        return res.value

    def finish_all(self, now: int) -> None:
        grants = self.apply(c.AcquireLeases(now, "e", ("default",), 999))
        for g in grants:
            self.apply(c.CompleteRun(now, g.run.lease_id, g.run.fencing_token, True))


def spec(**kw: object) -> JobSpec:
    return JobSpec(name="j", schedule=Every(SEC), **kw)  # type: ignore[arg-type]


def test_count_limit_drops_the_oldest_finished_runs() -> None:
    h = H()
    h.apply(c.CreateJob(T0, "job", spec(history_limit=3)))
    for k in range(1, 7):
        h.apply(c.Fire(T0 + k * SEC, ((("job", T0 + k * SEC)),), 0, 5000))
        h.finish_all(T0 + k * SEC)
    kept = sorted(r.scheduled_ms for r in h.m.runs.values())
    assert kept == [T0 + 4 * SEC, T0 + 5 * SEC, T0 + 6 * SEC]
    assert h.m.run_counts[RunStatus.SUCCEEDED] == 3  # the dropped runs are no longer counted
    assert h.m.jobs["job"].cursor_ms == T0 + 6 * SEC  # exactly-once needs no run record


def test_active_runs_are_never_dropped() -> None:
    h = H()
    h.apply(c.CreateJob(T0, "job", spec(history_limit=1)))
    for k in range(1, 4):
        h.apply(c.Fire(T0 + k * SEC, (("job", T0 + k * SEC),), 0, 5000))
    assert len(h.m.runs) == 3  # all PENDING: kept whatever the limit
    h.finish_all(T0 + 4 * SEC)
    assert len(h.m.runs) == 1


def test_time_limit_and_prune_command() -> None:
    h = H()
    h.apply(c.CreateJob(T0, "job", spec(history_ttl_ms=10 * SEC)))
    h.apply(c.Fire(T0 + SEC, (("job", T0 + SEC),), 0, 5000))
    h.finish_all(T0 + 2 * SEC)
    assert h.m.next_prune_ms() == T0 + 12 * SEC
    assert h.apply(c.PruneHistory(T0 + 11 * SEC)) == (0, 0)
    assert len(h.m.runs) == 1
    h.m.drain_events()
    assert h.apply(c.PruneHistory(T0 + 12 * SEC)) == (1, 0)
    assert not h.m.runs and h.m.next_prune_ms() is None
    assert set(h.m.run_counts.values()) == {0}
    assert [kind for kind, _ in h.m.drain_events()] == ["pruned"]


def test_deleted_job_is_readable_until_its_ttl_then_purged_with_its_key() -> None:
    h = H()
    h.apply(c.CreateJob(T0, "job", JobSpec(name="once", schedule=At(T0 + SEC), history_ttl_ms=5 * SEC), "key-1"))
    h.apply(c.Fire(T0 + SEC, (("job", T0 + SEC),), 0, 5000))
    h.finish_all(T0 + SEC)
    h.apply(c.DeleteJob(T0 + 2 * SEC, "job"))
    assert h.m.jobs["job"].status is JobStatus.DELETED
    h.apply(c.PruneHistory(T0 + 6 * SEC))  # the run expired (finished + 5 s), the job not yet (deleted + 5 s)
    assert "job" in h.m.jobs and not h.m.runs
    h.apply(c.PruneHistory(T0 + 7 * SEC))
    assert "job" not in h.m.jobs and "key-1" not in h.m.idempotency


def test_a_deleted_job_with_a_running_run_waits() -> None:
    h = H()
    h.apply(c.CreateJob(T0, "job", spec(history_ttl_ms=SEC)))
    h.apply(c.Fire(T0 + SEC, (("job", T0 + SEC),), 0, 5000))
    h.apply(c.AcquireLeases(T0 + SEC, "e", ("default",), 1))
    h.apply(c.DeleteJob(T0 + SEC, "job"))
    h.apply(c.PruneHistory(T0 + 10 * SEC))
    assert "job" in h.m.jobs
    run = next(iter(h.m.runs.values()))
    assert run.status is RunStatus.LEASED and run.cancel_requested


def finished_counts(m: JobStateMachine) -> dict[str, int]:
    """job id -> how many finished runs the machine counts it keeps (its stored retention index)."""
    return {key.decode(): layout.decode_int(raw) for key, raw in iter_table(m.store, Table.FINISHED)}


def test_retention_survives_a_snapshot() -> None:
    h = H()
    h.apply(c.CreateJob(T0, "job", spec(history_ttl_ms=10 * SEC, history_limit=2)))
    for k in range(1, 4):
        h.apply(c.Fire(T0 + k * SEC, (("job", T0 + k * SEC),), 0, 5000))
        h.finish_all(T0 + k * SEC)
    twin = JobStateMachine()
    twin.restore(h.m.snapshot())
    assert twin.next_prune_ms() == h.m.next_prune_ms()
    assert finished_counts(twin) == finished_counts(h.m) == {"job": 2}


def test_the_oldest_finished_runs_are_found_past_many_older_runs_that_stay() -> None:
    """Behind twenty failures kept apart and a run still leased, the successes over the limit are still found and
    dropped oldest first (the search reads a few keys, then pages four times as large)."""
    from raftsched.cluster.domain.model import RetryPolicy

    h = H()
    h.apply(c.SetClusterFormat(T0, 3))  # failures are kept apart from this format on
    h.apply(c.CreateJob(T0, "job", spec(history_limit=2, failed_history_limit=50, retry=RetryPolicy(max_attempts=1))))

    def fire(k: int) -> list:  # type: ignore[type-arg]
        h.apply(c.Fire(T0 + k * SEC, (("job", T0 + k * SEC),), 0, 5000))
        return h.apply(c.AcquireLeases(T0 + k * SEC, "e", ("default",), 10))  # type: ignore[no-any-return]

    for k in range(1, 21):
        for g in fire(k):
            h.apply(c.CompleteRun(T0 + k * SEC, g.run.lease_id, g.run.fencing_token, False, error="boom"))
    still_leased = fire(21)
    for k in range(22, 31):
        for g in fire(k):
            h.apply(c.CompleteRun(T0 + k * SEC, g.run.lease_id, g.run.fencing_token, True))
    by_status: dict[RunStatus, list[int]] = {}
    for r in h.m.runs.values():
        by_status.setdefault(r.status, []).append((r.scheduled_ms - T0) // SEC)
    assert sorted(by_status[RunStatus.DEAD_LETTER]) == list(range(1, 21))
    assert by_status[RunStatus.LEASED] == [21] and len(still_leased) == 1
    assert sorted(by_status[RunStatus.SUCCEEDED]) == [29, 30]


def test_the_kept_counts_stay_those_of_the_runs_kept_as_the_limits_drop_runs() -> None:
    """A job at both its limits, successes and failures mixed: after every completion its count of finished runs
    (``FINISHED``) and of failures kept apart (``FAILED``) are those of the rows its runs hold — one run in, one
    out, the count written only when it changes."""
    from raftsched.cluster.domain.model import RetryPolicy
    from raftsched.cluster.fsm import keys

    h = H()
    h.apply(c.SetClusterFormat(T0, 3))
    h.apply(c.CreateJob(T0, "job", spec(history_limit=3, failed_history_limit=2, retry=RetryPolicy(max_attempts=1))))
    store = h.m.store
    prefix = keys.job_prefix("job")

    def rows(table: str) -> int:
        return sum(1 for _ in iter_table(store, table, prefix, keys.prefix_end(prefix)))

    for k in range(1, 25):
        h.apply(c.Fire(T0 + k * SEC, (("job", T0 + k * SEC),), 0, 5000))
        for g in h.apply(c.AcquireLeases(T0 + k * SEC, "e", ("default",), 10)):
            ok = k % 3 != 0
            h.apply(c.CompleteRun(T0 + k * SEC, g.run.lease_id, g.run.fencing_token, ok, error="" if ok else "boom"))
        finished, failed = rows(Table.JOB_RUNS), rows(Table.FAILED_RUNS)
        assert layout.decode_int(store.get(Table.FINISHED, b"job")) == finished
        assert layout.decode_int(store.get(Table.FAILED, b"job")) == failed
        assert finished - failed == min(3, k - k // 3) and failed == min(2, k // 3)
    kept = sorted((r.scheduled_ms - T0) // SEC for r in h.m.runs.values())
    assert kept == [20, 21, 22, 23, 24]  # the newest two failures (21, 24) and three successes (20, 22, 23)
