"""Lease calls that cannot be valid are refused before Raft — and a valid one never is, even on a follower
that has not applied its grant yet."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import RejectedError, ValidationError
from raftsched.cluster.domain.model import Every, JobSpec
from raftsched.cluster.domain.results import FailedPrecondition, Ok
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.clock import FakeClock
from raftsched.cluster.node.lease_service import Completion, LeaseService, final_refusal

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000


class Replica:
    """A node's state machine fed from a shared log; ``upto`` is how far it has applied."""

    def __init__(self) -> None:
        self.m = JobStateMachine()
        self.upto = 0

    def catch_up(self, log: list[bytes]) -> None:
        for index in range(self.upto + 1, len(log) + 1):
            self.m.apply(log[index - 1], index)
        self.upto = len(log)


def _leased(log: list[bytes]) -> tuple[str, int]:
    """A job, a manual run, and a lease granted by the last entry of ``log``: its (lease_id, token)."""
    leader = Replica()
    for cmd in (
        c.CreateJob(T0, "j-1", JobSpec(name="j", schedule=Every(60_000))),
        c.TriggerJob(T0, "j-1"),
        c.AcquireLeases(T0, "e1", ("default",), 1),
    ):
        log.append(c.encode(cmd))
    leader.catch_up(log)
    run = next(iter(leader.m.runs.values()))
    return run.lease_id, run.fencing_token


def test_a_follower_behind_the_grant_never_refuses_the_lease() -> None:
    log: list[bytes] = []
    lease_id, token = _leased(log)
    follower = Replica()
    follower.catch_up(log[:2])  # the grant's entry is not applied here yet
    assert final_refusal(follower.m, lease_id, token) == ""
    follower.catch_up(log)
    assert final_refusal(follower.m, lease_id, token) == ""  # held: a command may go ahead
    log.append(c.encode(c.CompleteRun(T0, lease_id, token, True)))
    follower.catch_up(log)
    assert "is not held" in final_refusal(follower.m, lease_id, token)  # final: it can never be held again


def test_a_lease_and_a_token_that_do_not_belong_together_are_refused_without_state() -> None:
    empty = JobStateMachine()
    assert "stale or wrong" in final_refusal(empty, "L3001", 3002)
    assert "stale or wrong" in final_refusal(empty, "bogus", 1)
    assert final_refusal(empty, "L3001", 3001) == ""  # entry 3 not applied here: let Raft decide


class Store:
    """Reads this replica's applied state; proposals are appended to the log and applied by it (recorded)."""

    def __init__(self, replica: Replica, log: list[bytes]) -> None:
        self.replica, self.log = replica, log
        self.proposed: list[c.Command] = []
        self.on_applied: list[Any] = []

    def read(self, fn: Callable[[JobStateMachine], Any], barrier: bool = True) -> Any:
        return fn(self.replica.m)

    def execute(self, cmd: c.Command, timeout: float | None = None) -> Any:
        self.proposed.append(cmd)
        self.log.append(c.encode(cmd))
        before = self.replica.upto
        self.replica.upto = len(self.log)
        result = self.replica.m.apply(self.log[-1], len(self.log))
        assert before == len(self.log) - 1
        if not isinstance(result, Ok):
            raise RejectedError(result)
        return result.value

    def execute_each(self, items: list[Any], build: Callable[[Any], c.Command]) -> list[Any]:
        out: list[Any] = []
        for item in items:
            try:
                out.append(self.execute(build(item)))
            except RejectedError as exc:
                out.append(exc)
        return out


def test_renewals_and_completions_of_dead_leases_never_reach_the_log() -> None:
    log: list[bytes] = []
    lease_id, token = _leased(log)
    node = Replica()
    node.catch_up(log)
    store = Store(node, log)
    svc = LeaseService(store, FakeClock(T0))  # type: ignore[arg-type]
    renewals = svc.renew("e1", [(lease_id, token), ("L1", 1), (lease_id, token + 1)])
    assert [r.ok for r in renewals] == [True, False, False]
    assert [type(cmd) for cmd in store.proposed] == [c.RenewLeases]
    renew = store.proposed[0]
    assert isinstance(renew, c.RenewLeases) and renew.leases == ((lease_id, token),)  # only the live one travelled
    with pytest.raises(RejectedError) as err:
        svc.renew("e1", [("L1", 1)])
    assert isinstance(err.value.rejected, FailedPrecondition)
    svc.complete(Completion(lease_id, token, True, executor_id="e1"))
    proposed = len(store.proposed)
    with pytest.raises(RejectedError, match="is not held"):  # a zombie's replay: refused here
        svc.complete(Completion(lease_id, token, True, executor_id="e1"))
    answers = svc.complete_many([Completion(lease_id, token, False, executor_id="e1"), Completion("L7", 8, True)])
    assert all(isinstance(a, RejectedError) for a in answers)
    assert len(store.proposed) == proposed


def _service(fmt: int) -> tuple[LeaseService, Store, str, int]:
    log: list[bytes] = [c.encode(c.SetClusterFormat(T0, fmt))]
    lease_id, token = _leased(log)
    node = Replica()
    node.catch_up(log)
    store = Store(node, log)
    return LeaseService(store, FakeClock(T0), outputs=None), store, lease_id, token  # type: ignore[arg-type]


def test_heartbeat_details_are_bounded_and_only_for_leases_the_call_renews() -> None:
    svc, store, lease_id, token = _service(4)
    with pytest.raises(ValidationError, match=r"details of lease L\d+ is 65537 bytes, over the limit of 65536 bytes"):
        svc.renew("e1", [(lease_id, token)], {lease_id: b"x" * 65_537})
    with pytest.raises(ValidationError, match="which the call does not renew"):
        svc.renew("e1", [(lease_id, token)], {"L99": b"{}"})
    assert store.proposed == []
    svc.renew("e1", [(lease_id, token)], {lease_id: b'{"page": 3}'})
    (renew,) = store.proposed
    assert isinstance(renew, c.RenewLeases) and renew.details == ((lease_id, b'{"page": 3}'),)


def test_a_verdict_travels_from_format_4_and_is_dropped_before() -> None:
    for fmt, travelled in ((4, (True, 0)), (3, (False, 0))):
        svc, store, lease_id, token = _service(fmt)
        svc.complete(Completion(lease_id, token, False, error="no", executor_id="e1", non_retryable=True))
        done = store.proposed[-1]
        assert isinstance(done, c.CompleteRun) and (done.non_retryable, done.retry_after_ms) == travelled
    svc, store, lease_id, token = _service(4)
    svc.complete(Completion(lease_id, token, False, error="busy", executor_id="e1", retry_after_ms=30_000))
    done = store.proposed[-1]
    assert isinstance(done, c.CompleteRun) and (done.non_retryable, done.retry_after_ms) == (False, 30_000)
    with pytest.raises(ValidationError, match="retry_after must be between 0 and 100 years"):
        svc.complete(Completion(lease_id, token, False, executor_id="e1", retry_after_ms=-1))
