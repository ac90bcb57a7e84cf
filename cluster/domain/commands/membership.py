"""The commands of the cluster's membership and command format (``raftsched.cluster.fsm.membership``).

Membership lives in the replicated state beside pysyncobj's own
configuration: a change is begun (``AddMember``, ``RemoveMember``),
pysyncobj's change is made by the leader, and the leader ends it
(``FinishMemberChange``). ``SetClusterFormat`` raises the command format the
cluster uses, once every member said (``NodeInfo``) it understands it. All
of format 2 but ``NodeInfo``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from raftsched.cluster.domain.commands import wire
from raftsched.cluster.domain.commands.wire import INT, STR, Field, Kind, command, omitted, seq
from raftsched.cluster.domain.model import Member


def _member_to_plain(m: Member) -> list[str]:
    return [m.node_id, m.raft, m.grpc, m.http]


def _member_from_plain(p: Any) -> Member:
    node_id, raft, grpc, http = seq(p)
    return Member(str(node_id), str(raft), str(grpc), str(http))


def _format_from_plain(p: Any) -> int:
    target = int(p)
    if target > wire.FORMAT_VERSION:
        raise wire.UnsupportedCommand(
            f"this entry switches the cluster to command format {target}, but this node understands command "
            f"formats up to {wire.FORMAT_VERSION}",
            target,
            "cluster_format",
        )
    return target


MEMBER = Kind(_member_to_plain, _member_from_plain)
MEMBERS = Kind(lambda v: [_member_to_plain(m) for m in v], lambda v: tuple(_member_from_plain(m) for m in seq(v)))
#: a command format this node understands (a newer one is ``UnsupportedCommand``: the node stops)
FORMAT = Kind(None, _format_from_plain)


@command(
    "node_info",
    (
        Field("node", "node_id", STR),
        Field("ver", "version", STR),
        Field("fmt", "command_format", INT),
        omitted("raft", "raft", STR),
    ),
)
@dataclass(frozen=True, slots=True)
class NodeInfo:
    """Proposed by each node once it runs: which raftsched version it is and which command format it
    understands (kept in the state, shown by GetClusterStatus, checked before a format change), and
    the Raft address it answers on (absent in entries from before it was sent)."""

    now_ms: int
    node_id: str
    version: str
    command_format: int
    raft: str = ""


@command("member_seed", (Field("members", "members", MEMBERS),), since=2)
@dataclass(frozen=True, slots=True)
class SeedMembers:
    """Proposed by a leader while the state records no members: the first membership (the config's
    ``[[nodes]]``). Applied only to a state with no members, so only the first one counts."""

    now_ms: int
    members: tuple[Member, ...]


@command("member_add", (Field("member", "member", MEMBER),), since=2)
@dataclass(frozen=True, slots=True)
class AddMember:
    """Begin adding a member (AddNode): recorded at once, then the leader makes pysyncobj's change and
    finishes it with ``FinishMemberChange``. One change at a time."""

    now_ms: int
    member: Member


@command("member_remove", (Field("node", "node_id", STR),), since=2)
@dataclass(frozen=True, slots=True)
class RemoveMember:
    """Begin removing a member (RemoveNode): from this entry on the change is certain (the node itself
    stops serving once it is out); the leader makes pysyncobj's change and finishes it."""

    now_ms: int
    node_id: str


@command("member_done", (Field("node", "node_id", STR), Field("action", "action", STR)), since=2)
@dataclass(frozen=True, slots=True)
class FinishMemberChange:
    """Proposed by the leader once pysyncobj's own change for the change in flight is in its log: ends it."""

    now_ms: int
    node_id: str
    action: str


@command("cluster_format", (Field("fmt", "format", FORMAT),), since=2)
@dataclass(frozen=True, slots=True)
class SetClusterFormat:
    """Proposed by the leader once every member reported (``NodeInfo``) that it understands ``format``:
    from this entry on, commands of that format may be proposed and applied."""

    now_ms: int
    format: int
