"""Lease rules of the state machine: tokens, renewals, expiry, grace, retries, deletion."""

from __future__ import annotations

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.leases import TOKENS_PER_ENTRY, backoff_ms
from raftsched.cluster.domain.model import Every, JobSpec, RetryPolicy, RunStatus
from raftsched.cluster.domain.results import FailedPrecondition, Ok
from raftsched.cluster.fsm.machine import JobStateMachine

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000


class Harness:
    def __init__(self) -> None:
        self.m = JobStateMachine()
        self.index = 0

    def apply(self, cmd: c.Command):  # type: ignore[no-untyped-def]
        self.index += 1
        return self.m.apply(c.encode(cmd), self.index)

    def job_with_run(self, ttl_ms: int = 1000, attempts: int = 3) -> str:
        spec = JobSpec(name="j", schedule=Every(60_000), lease_ttl_ms=ttl_ms, retry=RetryPolicy(attempts, 100, 1000, 2.0, 0.0))
        self.apply(c.CreateJob(T0, "job", spec))
        res = self.apply(c.TriggerJob(T0, "job"))
        return res.value.run_id

    def acquire(self, now: int, executor: str = "e1") -> list:  # type: ignore[type-arg]
        res = self.apply(c.AcquireLeases(now, executor, ("default",), 10))
        assert isinstance(res, Ok)
        return res.value


def test_tokens_grow_with_every_grant_and_encode_the_index() -> None:
    h = Harness()
    h.job_with_run()
    (g1,) = h.acquire(T0)
    first = g1.run.fencing_token  # the grant holds the live record: keep the value
    assert first == h.index * TOKENS_PER_ENTRY + 1
    h.apply(c.ExpireLeases(T0 + 5000, ((g1.run.lease_id, first, 0.5),)))
    (g2,) = h.acquire(T0 + 6000)
    assert g2.run.fencing_token > first and g2.run.attempt == 2


def test_expiry_is_only_by_command_and_only_after_the_deadline() -> None:
    h = Harness()
    h.job_with_run(ttl_ms=1000)
    (g,) = h.acquire(T0)
    ref = ((g.run.lease_id, g.run.fencing_token, 0.5),)
    assert h.apply(c.ExpireLeases(T0 + 500, ref)).value == 0  # not yet due: ignored
    renew = h.apply(c.RenewLeases(T0 + 900, "e1", ((g.run.lease_id, g.run.fencing_token),))).value[0]
    assert renew.ok and renew.expires_ms == T0 + 1900
    assert h.apply(c.ExpireLeases(T0 + 1500, ref)).value == 0  # renewed since the leader looked
    assert h.apply(c.ExpireLeases(T0 + 2000, ref)).value == 1
    run = h.m.runs[g.run.run_id]
    assert run.status is RunStatus.PENDING and "stopped renewing" in run.error


def test_grace_never_shortens_and_never_resets_to_full_ttl() -> None:
    h = Harness()
    h.job_with_run(ttl_ms=30_000)
    (g,) = h.acquire(T0)
    h.apply(c.GraceLeases(T0 + 29_000, 2_000))
    assert h.m.runs[g.run.run_id].lease_expires_ms == T0 + 31_000  # lifted to now + grace, not now + TTL
    h.apply(c.GraceLeases(T0 + 1_000, 2_000))
    assert h.m.runs[g.run.run_id].lease_expires_ms == T0 + 31_000  # never shortened


def test_wrong_token_wrong_executor_and_unknown_lease_are_refused() -> None:
    h = Harness()
    h.job_with_run()
    (g,) = h.acquire(T0)
    res = h.apply(c.CompleteRun(T0 + 10, g.run.lease_id, g.run.fencing_token + 1, True))
    assert isinstance(res, FailedPrecondition) and "fencing token" in res.message
    renew = h.apply(c.RenewLeases(T0 + 10, "other", ((g.run.lease_id, g.run.fencing_token),))).value[0]
    assert not renew.ok and "held by executor" in renew.error
    assert isinstance(h.apply(c.CompleteRun(T0 + 10, "L42", 42, True)), FailedPrecondition)
    assert h.m.runs[g.run.run_id].status is RunStatus.LEASED


def test_failures_retry_with_backoff_then_dead_letter() -> None:
    h = Harness()
    run_id = h.job_with_run(attempts=3)
    now = T0
    for attempt in (1, 2, 3):
        (g,) = h.acquire(now)
        assert g.run.attempt == attempt
        h.apply(c.CompleteRun(now + 10, g.run.lease_id, g.run.fencing_token, False, error="boom", draw=0.5))
        run = h.m.runs[run_id]
        if attempt < 3:
            assert run.status is RunStatus.PENDING
            assert run.not_before_ms == now + 10 + 100 * 2 ** (attempt - 1)
            assert h.acquire(run.not_before_ms - 1) == []  # not leasable before its backoff
            now = run.not_before_ms
    assert h.m.runs[run_id].status is RunStatus.DEAD_LETTER


def test_deleting_a_job_asks_its_leased_runs_to_stop() -> None:
    h = Harness()
    h.job_with_run()
    (g,) = h.acquire(T0)
    h.apply(c.DeleteJob(T0 + 5, "job"))
    renew = h.apply(c.RenewLeases(T0 + 6, "e1", ((g.run.lease_id, g.run.fencing_token),))).value[0]
    assert renew.ok and renew.cancel_requested
    h.apply(c.CompleteRun(T0 + 7, g.run.lease_id, g.run.fencing_token, True))
    assert h.m.runs[g.run.run_id].status is RunStatus.CANCELLED


@pytest.mark.parametrize(
    "attempt,draw,expected",
    [(1, 0.5, 1000), (2, 0.5, 2000), (3, 0.5, 4000), (10, 0.5, 60_000), (1, 0.0, 800), (1, 1.0, 1200)],
)
def test_backoff(attempt: int, draw: float, expected: int) -> None:
    assert backoff_ms(RetryPolicy(5, 1000, 60_000, 2.0, 0.2), attempt, draw) == expected
