"""The command format gate: a command newer than the cluster's format is never proposed nor applied, the
leader switches the format only once every member reported it, and a node meeting a command it does not
understand stops (exit 76, nothing applied) instead of skipping it."""

from __future__ import annotations

import logging
from typing import Any, Callable

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import RejectedError
from raftsched.cluster.domain.model import Member
from raftsched.cluster.domain.results import FailedPrecondition, Ok
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.clock import FakeClock
from raftsched.cluster.node.event_hub import EventHub
from raftsched.cluster.node.membership import read_view
from raftsched.cluster.node.membership.keeper import next_cluster_format
from raftsched.cluster.node.replica import Replica

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000
N1 = Member("n1", "a:1", "a:2")


class LogRaft:
    """A one-node Raft: every proposal is applied to the machine at once, in order."""

    def __init__(self, machine: JobStateMachine) -> None:
        self.machine = machine
        self.entries: list[bytes] = []

    def propose_many(self, proposals: list[tuple[bytes, int]], timeout: float) -> list[Any]:
        out = []
        for data, _ in proposals:
            self.entries.append(data)
            out.append(self.machine.apply(data, len(self.entries)))
        return out

    def propose_async(self, data: bytes, callback: Callable[[Any, int], None]) -> None:
        callback(self.propose_many([(data, 0)], 1.0)[0], 0)

    def is_leader(self) -> bool:
        return True


def world() -> tuple[Replica, LogRaft]:
    machine = JobStateMachine()
    clock = FakeClock(T0)
    store = Replica(machine, clock, EventHub(clock.now_ms), 1.0)
    raft = LogRaft(machine)
    store.attach(raft)
    return store, raft


def test_a_newer_command_is_not_even_proposed_before_the_switch() -> None:
    store, raft = world()
    with pytest.raises(RejectedError, match="needs command format 2, but the cluster still uses format 1"):
        store.execute(c.SeedMembers(T0, (N1,)))
    assert raft.entries == []  # no member could meet it in the log
    answers: list[Any] = []
    store.propose_async(c.RemoveMember(T0, "n1"), lambda result, error: answers.append((result, error)))
    assert raft.entries == [] and isinstance(answers[0][0], FailedPrecondition) and answers[0][1] == 0
    store.execute(c.SetClusterFormat(T0, 2))  # the switch itself is always proposed
    assert store.execute(c.SeedMembers(T0, (N1,))) is True
    assert len(raft.entries) == 2


def test_a_batch_refuses_only_its_newer_items() -> None:
    store, raft = world()
    out = store.execute_each([c.Barrier(T0), c.AddMember(T0, N1), c.Barrier(T0)], lambda cmd: cmd)
    assert isinstance(out[1], RejectedError) and out[0] == 1 and out[2] == 2
    assert len(raft.entries) == 2


def _view(versions: dict[str, int], rafts: dict[str, str], cluster_format: int = 1) -> Any:
    m = JobStateMachine()
    m.members = {node: ("0.1.0", fmt) for node, fmt in versions.items()}
    m.member_rafts = dict(rafts)
    m.cluster_format = cluster_format
    return read_view(m)


@pytest.mark.parametrize(
    "versions, rafts, members, cluster_format, expected",
    [
        ({"n1": 2, "n2": 2, "n3": 2}, {"n1": "a", "n2": "b", "n3": "c"}, ["a", "b", "c"], 1, 2),
        ({"n1": 2, "n2": 2, "n3": 1}, {"n1": "a", "n2": "b", "n3": "c"}, ["a", "b", "c"], 1, None),  # n3 is older
        ({"n1": 2, "n2": 2}, {"n1": "a", "n2": "b"}, ["a", "b", "c"], 1, None),  # c has not reported
        ({"n1": 2, "n2": 2, "n3": 2}, {"n1": "a", "n2": "b", "n3": "c"}, ["a", "b", "c"], 2, None),  # already
        ({"n1": 9, "n2": 9}, {"n1": "a", "n2": "b"}, ["a", "b"], 1, c.FORMAT_VERSION),  # never beyond this code's
        ({"n1": 2, "old": 1, "n2": 2}, {"n1": "a", "old": "a", "n2": "b"}, ["a", "b"], 1, 2),  # a re-used address
        ({"n1": 2}, {"n1": "a"}, [], 1, None),
    ],
)
def test_the_leader_switches_only_when_every_member_of_the_raft_configuration_reported(
    versions: dict[str, int], rafts: dict[str, str], members: list[str], cluster_format: int, expected: int | None
) -> None:
    assert next_cluster_format(_view(versions, rafts, cluster_format), members) == expected


def test_the_raft_adapter_stops_on_a_command_it_does_not_understand(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from raftsched.raft import adapter

    class Exited(Exception):
        pass

    def fake_exit(code: int) -> None:
        raise Exited(code)

    monkeypatch.setattr(adapter.os, "_exit", fake_exit)
    monkeypatch.setattr(adapter.logging, "shutdown", lambda: None)
    machine = JobStateMachine()
    machine.members = {"n2": ("0.3.0", c.FORMAT_VERSION + 1)}
    node = adapter.RaftNode.__new__(adapter.RaftNode)
    node._machine = machine  # what _apply_one needs
    future = b'{"v": %d, "op": "teleport", "now": 1}' % (c.FORMAT_VERSION + 1)
    with caplog.at_level(logging.CRITICAL, "raftsched.raft"), pytest.raises(Exited) as exited:
        node._apply_one(future, 42, 0)
    assert exited.value.args == (adapter.EXIT_UNSUPPORTED_COMMAND,)
    message = caplog.text
    assert "entry 42" in message and f"command format version {c.FORMAT_VERSION + 1}" in message
    assert (
        f"up to {c.FORMAT_VERSION}" in message
        and "n2 runs 0.3.0" in message
        and "Nothing from entry 42 on was applied" in message
    )
    assert machine.applied_index == 0
    # a malformed entry of a known format is still only a rejected result
    assert not isinstance(node._apply_one(b'{"v": 1, "op": "barrier"}', 43, 0), Ok)
