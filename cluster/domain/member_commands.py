"""Commands of command format 2: the cluster's membership and the switch of command format.

Membership lives in the replicated state (``raftsched.cluster.fsm.membership``)
beside pysyncobj's own configuration: a change is begun (``AddMember``,
``RemoveMember``), pysyncobj's change is made by the leader, and the leader
ends it (``FinishMemberChange``). ``SetClusterFormat`` raises the command
format the cluster uses, once every member said it understands it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from raftsched.cluster.domain import command_registry
from raftsched.cluster.domain.command_registry import UnsupportedCommand, command, seq
from raftsched.cluster.domain.model import Member
from raftsched.cluster.domain.spec_codec import Plain


def _member_to_plain(m: Member) -> list[str]:
    return [m.node_id, m.raft, m.grpc, m.http]


def _member_from_plain(p: Any) -> Member:
    node_id, raft, grpc, http = seq(p)
    return Member(str(node_id), str(raft), str(grpc), str(http))


@command(
    "member_seed",
    lambda c: {"members": [_member_to_plain(m) for m in c.members]},
    lambda p, now: SeedMembers(now, tuple(_member_from_plain(m) for m in seq(p["members"]))),
    since=2,
)
@dataclass(frozen=True, slots=True)
class SeedMembers:
    """Proposed by a leader while the state records no members: the first membership (the config's
    ``[[nodes]]``). Applied only to a state with no members, so only the first one counts."""

    now_ms: int
    members: tuple[Member, ...]


@command(
    "member_add",
    lambda c: {"member": _member_to_plain(c.member)},
    lambda p, now: AddMember(now, _member_from_plain(p["member"])),
    since=2,
)
@dataclass(frozen=True, slots=True)
class AddMember:
    """Begin adding a member (AddNode): recorded at once, then the leader makes pysyncobj's change and
    finishes it with ``FinishMemberChange``. One change at a time."""

    now_ms: int
    member: Member


@command("member_remove", lambda c: {"node": c.node_id}, lambda p, now: RemoveMember(now, str(p["node"])), since=2)
@dataclass(frozen=True, slots=True)
class RemoveMember:
    """Begin removing a member (RemoveNode): from this entry on the change is certain (the node itself
    stops serving once it is out); the leader makes pysyncobj's change and finishes it."""

    now_ms: int
    node_id: str


@command(
    "member_done",
    lambda c: {"node": c.node_id, "action": c.action},
    lambda p, now: FinishMemberChange(now, str(p["node"]), str(p["action"])),
    since=2,
)
@dataclass(frozen=True, slots=True)
class FinishMemberChange:
    """Proposed by the leader once pysyncobj's own change for the change in flight is in its log: ends it."""

    now_ms: int
    node_id: str
    action: str


def _format_from_plain(p: Plain, now: int) -> "SetClusterFormat":
    target = int(p["fmt"])
    if target > command_registry.FORMAT_VERSION:
        raise UnsupportedCommand(
            f"this entry switches the cluster to command format {target}, but this node understands command "
            f"formats up to {command_registry.FORMAT_VERSION}",
            target,
            "cluster_format",
        )
    return SetClusterFormat(now, target)


@command("cluster_format", lambda c: {"fmt": c.format}, _format_from_plain, since=2)
@dataclass(frozen=True, slots=True)
class SetClusterFormat:
    """Proposed by the leader once every member reported (``NodeInfo``) that it understands ``format``:
    from this entry on, commands of that format may be proposed and applied."""

    now_ms: int
    format: int
