"""A long poll reckons "now" after it read the state, not before: a read waits for the entry being applied (a large
one takes tens of milliseconds), and a run that came due meanwhile is granted at once, not after a nap reckoned
from a time already past."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.results import Ok
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.clock import FakeClock
from raftsched.cluster.node.lease_service import LeaseService
from tests.unit.test_lease_types import T0, Harness

pytestmark = pytest.mark.unit

#: how long a read waits for the entry being applied, in this test
APPLYING_MS = 30


class SlowReadReplica:
    """Reads wait for an apply (the fake clock moves on meanwhile); proposals apply at once."""

    def __init__(self, m: JobStateMachine, index: int, clock: FakeClock) -> None:
        self.m, self.index, self.clock = m, index, clock
        self.reads = 0
        self.proposed: list[tuple[int, c.Command]] = []  # (reads before it, command)
        self.on_applied: list[Callable[[list[Any]], None]] = []

    def read(self, fn: Callable[[JobStateMachine], Any], barrier: bool = True) -> Any:
        self.reads += 1
        answer = fn(self.m)
        self.clock.advance(APPLYING_MS)
        return answer

    def execute(self, cmd: c.Command, timeout: float | None = None) -> Any:
        self.proposed.append((self.reads, cmd))
        self.index += 1
        result = self.m.apply(c.encode(cmd), self.index)
        assert isinstance(result, Ok), result
        return result.value


def test_a_run_that_came_due_while_the_poll_read_is_granted_on_that_look() -> None:
    h = Harness()
    h.job("nop", "noop")
    h.trigger("nop", T0 + 20)  # due 20 ms after the poll begins; its read takes 30
    clock = FakeClock(T0)
    node = SlowReadReplica(h.m, h.index, clock)
    svc = LeaseService(node, clock)  # type: ignore[arg-type]
    grants = svc.acquire("e1", ["default"], 5, 1_000, types=["noop"])
    assert len(grants) == 1
    ((reads, grant),) = node.proposed
    assert reads == 1, "the poll napped after its first look although the run was due by the time it looked"
    assert isinstance(grant, c.AcquireLeases) and grant.now_ms == T0 + APPLYING_MS
    assert grants[0].run.started_ms - grants[0].run.scheduled_ms == APPLYING_MS - 20
