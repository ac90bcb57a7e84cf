"""The membership and command format in the replicated state (raftsched.cluster.fsm.membership)."""

from __future__ import annotations

from typing import Any

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import Member, MemberChange
from raftsched.cluster.domain.results import AlreadyExists, FailedPrecondition, NotFound, Ok, Result
from raftsched.cluster.fsm.machine import JobStateMachine

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000
N1 = Member("n1", "127.0.0.1:7001", "127.0.0.1:50051")
N2 = Member("n2", "127.0.0.1:7002", "127.0.0.1:50052")
N3 = Member("n3", "127.0.0.1:7003", "127.0.0.1:50053", "127.0.0.1:8083")
N4 = Member("n4", "127.0.0.1:7004", "127.0.0.1:50054", "127.0.0.1:8084")


class Log:
    """A machine fed committed entries in order, through the wire format."""

    def __init__(self) -> None:
        self.m = JobStateMachine()
        self.index = 0

    def apply(self, cmd: Any) -> Result:
        self.index += 1
        return self.m.apply(c.encode(cmd), self.index)

    def ok(self, cmd: Any) -> Any:
        result = self.apply(cmd)
        assert isinstance(result, Ok), result
        return result.value


def seeded() -> Log:
    log = Log()
    log.ok(c.SetClusterFormat(T0, 2))
    assert log.ok(c.SeedMembers(T0, (N1, N2, N3))) is True
    return log


def test_format_2_commands_are_refused_until_the_cluster_switches() -> None:
    log = Log()
    assert log.m.cluster_format == 1
    refused = log.apply(c.SeedMembers(T0, (N1, N2, N3)))
    assert isinstance(refused, FailedPrecondition)
    assert "needs command format 2" in refused.message and "still uses format 1" in refused.message
    assert log.m.roster == {}
    assert log.ok(c.SetClusterFormat(T0, 2)) == 2
    assert log.ok(c.SetClusterFormat(T0, 1)) == 2  # never lowered
    assert log.ok(c.SeedMembers(T0, (N1, N2, N3))) is True
    assert sorted(log.m.roster) == ["n1", "n2", "n3"]


def test_only_the_first_seed_counts() -> None:
    log = seeded()
    assert log.ok(c.SeedMembers(T0, (N4,))) is False
    assert sorted(log.m.roster) == ["n1", "n2", "n3"]


def test_a_seed_with_a_repeated_address_is_refused() -> None:
    log = Log()
    log.ok(c.SetClusterFormat(T0, 2))
    result = log.apply(c.SeedMembers(T0, (N1, N2._replace(raft=N1.raft))))
    assert isinstance(result, FailedPrecondition) and "raft" in result.message
    assert log.m.roster == {}


def test_add_then_finish() -> None:
    log = seeded()
    change = log.ok(c.AddMember(T0, N4))
    assert change == MemberChange("add", N4, log.index)
    assert log.m.roster["n4"] == N4  # listed at once, with its addresses
    assert log.m.member_change == change
    assert log.ok(c.FinishMemberChange(T0, "n4", "add")) is True
    assert log.m.member_change is None and sorted(log.m.roster) == ["n1", "n2", "n3", "n4"]
    assert log.ok(c.FinishMemberChange(T0, "n4", "add")) is False  # a duplicate finish changes nothing


def test_one_change_at_a_time_and_a_retry_is_the_same_change() -> None:
    log = seeded()
    first = log.ok(c.AddMember(T0, N4))
    assert log.ok(c.AddMember(T0, N4)) == first  # the same AddNode again (a retry): the change in flight
    second = log.apply(c.RemoveMember(T0, "n1"))
    assert isinstance(second, FailedPrecondition)
    assert "in flight" in second.message and "adding n4" in second.message
    other = log.apply(c.AddMember(T0, Member("n5", "127.0.0.1:7005", "127.0.0.1:50055")))
    assert isinstance(other, FailedPrecondition) and "adding n4" in other.message
    assert "n5" not in log.m.roster and log.m.member_change == first


def test_remove_then_finish_and_a_retry_after_it() -> None:
    log = seeded()
    log.ok(c.NodeInfo(T0, "n1", "0.2.0", 2, N1.raft))
    change = log.ok(c.RemoveMember(T0, "n1"))
    assert change.action == "remove" and change.member == N1
    assert "n1" in log.m.roster and log.m.is_removing("n1") and not log.m.is_removing("n2")
    assert log.ok(c.FinishMemberChange(T0, "n1", "remove")) is True
    assert sorted(log.m.roster) == ["n2", "n3"] and log.m.removed_members == {"n1": N1}
    assert "n1" not in log.m.members and "n1" not in log.m.member_rafts  # its version is no longer a member's
    assert log.m.is_removing("n1")  # a node that finds itself removed stops
    assert log.ok(c.RemoveMember(T0, "n1")) is None  # a retried RemoveNode: already done
    assert log.m.member_change is None


def test_refusals_name_what_is_wrong() -> None:
    log = seeded()
    missing = log.apply(c.RemoveMember(T0, "n9"))
    assert isinstance(missing, NotFound) and "n9" in missing.message and "n1, n2, n3" in missing.message
    again = log.apply(c.AddMember(T0, N1._replace(grpc="127.0.0.1:1")))
    assert isinstance(again, AlreadyExists) and "n1" in again.message
    same_port = log.apply(c.AddMember(T0, N4._replace(raft=N2.raft)))
    assert isinstance(same_port, AlreadyExists) and N2.raft in same_port.message and "n2" in same_port.message
    assert log.ok(c.AddMember(T0, N1)) is None  # the same member with the same addresses: nothing to do
    assert log.m.member_change is None


def test_the_last_member_cannot_be_removed() -> None:
    log = Log()
    log.ok(c.SetClusterFormat(T0, 2))
    log.ok(c.SeedMembers(T0, (N1,)))
    result = log.apply(c.RemoveMember(T0, "n1"))
    assert isinstance(result, FailedPrecondition) and "only member" in result.message


def test_changes_before_the_seed_are_refused() -> None:
    log = Log()
    log.ok(c.SetClusterFormat(T0, 2))
    result = log.apply(c.AddMember(T0, N4))
    assert isinstance(result, FailedPrecondition) and "not recorded yet" in result.message


def test_membership_survives_a_snapshot() -> None:
    log = seeded()
    log.ok(c.NodeInfo(T0, "n4", "0.2.0", 2, N4.raft))
    log.ok(c.AddMember(T0, N4))
    log.ok(c.FinishMemberChange(T0, "n4", "add"))
    log.ok(c.RemoveMember(T0, "n2"))  # left in flight
    twin = JobStateMachine()
    twin.restore(log.m.snapshot())
    assert twin.roster == log.m.roster and twin.member_change == log.m.member_change
    assert twin.cluster_format == 2 and twin.member_rafts == {"n4": N4.raft}
    assert twin.snapshot() == log.m.snapshot()
    # the restored twin goes on exactly like the original
    assert log.apply(c.FinishMemberChange(T0, "n2", "remove")) == twin.apply(
        c.encode(c.FinishMemberChange(T0, "n2", "remove")), log.index
    )
    assert twin.removed_members == log.m.removed_members == {"n2": N2}


def test_a_snapshot_of_a_newer_format_is_refused_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    from raftsched.cluster.domain.commands import wire as command_registry

    log = seeded()
    monkeypatch.setattr(command_registry, "FORMAT_VERSION", 3)
    log.ok(c.SetClusterFormat(T0, 3))
    data = log.m.snapshot()
    monkeypatch.setattr(command_registry, "FORMAT_VERSION", 2)
    with pytest.raises(ValueError, match="command format 3, but this node understands command formats up to 2"):
        JobStateMachine().restore(data)
