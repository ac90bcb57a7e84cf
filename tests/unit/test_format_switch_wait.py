"""A request that needs a newer command format waits while a brand-new cluster is about to switch to it
(``raftsched.cluster.node.format_gate``), and is refused at once while a member runs an older version."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import RejectedError
from raftsched.cluster.domain.model import SCHEDULES_FORMAT, Every, JobSpec
from raftsched.cluster.domain.results import FailedPrecondition, Ok
from raftsched.cluster.domain.validation import Limits
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.clock import FakeClock
from raftsched.cluster.node.format_gate import YOUNG_ENTRIES, FormatGate
from raftsched.cluster.node.job_service import JobService
from raftsched.storage import OutputReader

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000


class Replica:
    """One state machine, applied to in order: what the job service reads and proposes through."""

    def __init__(self) -> None:
        self.machine = JobStateMachine()
        self.index = 0
        self.proposed: list[c.Command] = []
        self.lock = threading.Lock()

    def read(self, fn: Callable[[JobStateMachine], Any], barrier: bool = True) -> Any:
        with self.lock:
            return fn(self.machine)

    def apply(self, cmd: c.Command) -> Any:
        with self.lock:
            self.index += 1
            result = self.machine.apply(c.encode(cmd), self.index)
        assert isinstance(result, Ok), result
        return result.value

    def execute(self, cmd: c.Command, timeout: float | None = None) -> Any:
        self.proposed.append(cmd)
        return self.apply(cmd)


def _later(seconds: float, fn: Callable[[], Any]) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        fn()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


SHAPED = JobSpec(name="s", schedule=Every(60_000), type="noop", priority=3, labels=(("team", "billing"),))


def test_a_brand_new_cluster_takes_a_newer_field_once_it_switches() -> None:
    """Format 1, no member reported yet (a cluster that just elected its first leader): the request waits for the
    switch and is taken, never refused."""
    r = Replica()
    service = JobService(r, FakeClock(T0), Limits(), OutputReader(), formats=FormatGate(r, wait_s=10.0))  # type: ignore[arg-type]
    switch = _later(0.3, lambda: r.apply(c.SetClusterFormat(T0, SCHEDULES_FORMAT)))
    began = time.monotonic()
    job = service.create_job(SHAPED)
    took = time.monotonic() - began
    switch.join()
    assert job.spec.priority == 3 and job.spec.labels == (("team", "billing"),)
    assert 0.25 <= took < 5.0, took
    assert [type(cmd) for cmd in r.proposed] == [c.CreateJob]


def test_members_that_reported_the_newer_format_are_waited_for_too() -> None:
    r = Replica()
    r.apply(c.NodeInfo(T0, "n1", "0.1.0", SCHEDULES_FORMAT))
    gate = FormatGate(r, wait_s=10.0, poll_s=0.01)
    _later(0.1, lambda: r.apply(c.SetClusterFormat(T0, SCHEDULES_FORMAT)))
    assert gate.reached(SCHEDULES_FORMAT)


def test_a_member_of_an_older_version_means_no_wait() -> None:
    """A rolling upgrade in progress: a member reported a format without the field, so the switch is not coming:
    refused at once, naming the fields, and nothing proposed."""
    r = Replica()
    r.apply(c.NodeInfo(T0, "n1", "0.1.0", SCHEDULES_FORMAT))
    r.apply(c.NodeInfo(T0, "n2", "0.0.9", SCHEDULES_FORMAT - 1))
    service = JobService(r, FakeClock(T0), Limits(), OutputReader(), formats=FormatGate(r, wait_s=10.0))  # type: ignore[arg-type]
    began = time.monotonic()
    with pytest.raises(RejectedError) as refused:
        service.create_job(SHAPED)
    assert time.monotonic() - began < 1.0
    assert isinstance(refused.value.rejected, FailedPrecondition)
    assert "a spec that sets labels, priority needs command format 5" in refused.value.rejected.message
    assert r.proposed == []


def test_an_older_member_reporting_during_the_wait_ends_it() -> None:
    r = Replica()
    gate = FormatGate(r, wait_s=10.0, poll_s=0.01)
    _later(0.1, lambda: r.apply(c.NodeInfo(T0, "n2", "0.0.9", 1)))
    began = time.monotonic()
    assert not gate.reached(SCHEDULES_FORMAT)
    assert time.monotonic() - began < 5.0


def test_a_cluster_that_has_run_a_while_is_not_waited_for() -> None:
    """Past its first entries a cluster's switch is not coming by itself (a member that never reports, of a release
    from before members reported, is being upgraded): refused at once."""
    r = Replica()
    r.index = YOUNG_ENTRIES
    r.apply(c.NodeInfo(T0, "n1", "0.1.0", SCHEDULES_FORMAT))
    gate = FormatGate(r, wait_s=10.0, poll_s=0.01)
    began = time.monotonic()
    assert not gate.reached(SCHEDULES_FORMAT)
    assert time.monotonic() - began < 1.0


def test_a_switch_that_does_not_come_is_refused_after_the_wait() -> None:
    """Members that never report (a node down since the cluster was made): refused once the wait is over."""
    r = Replica()
    gate = FormatGate(r, wait_s=0.3, poll_s=0.01)
    began = time.monotonic()
    assert not gate.reached(SCHEDULES_FORMAT)
    assert 0.25 <= time.monotonic() - began < 3.0
    assert gate.reached(1) and gate.now() == 1
