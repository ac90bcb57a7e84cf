"""A run's commands (``raftsched.cluster.fsm.runs``): cancel."""

from __future__ import annotations

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import (
    Every,
    MisfirePolicy,
    RetryPolicy,
    RunStatus,
)
from raftsched.cluster.domain.results import (
    FailedPrecondition,
)
from tests.unit.fsm.harness import (
    SEC,
    T0,
    Harness,
    active_ids,
    complete,
    late_fire,
    lease,
    same,
    store_kind,  # noqa: F401 - every test here runs on both stores: in memory and on LMDB
)

pytestmark = pytest.mark.unit


# ------------------------------------------------------------------ cancel


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
    h = late_fire(MisfirePolicy.FIRE_ONCE)
    h.rejected(c.CancelRun(T0 + 11 * SEC, f"j1@{T0 + SEC}"), FailedPrecondition)
