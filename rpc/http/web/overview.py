"""The cluster as the web view shows it: Raft's view from the answering node and its members.

``ClusterOverview`` is plain data; the node's cluster status function
(``raftsched.rpc.server.cluster_servicer.cluster_status``, the one GetClusterStatus
answers with) is turned into it by ``overview_of``, so the page and the RPC
can never disagree on who leads or who is reachable. The app wires the two
(``raftsched.rpc.http`` and ``raftsched.rpc.server`` do not import each other).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb


@dataclass(frozen=True)
class MemberView:
    node_id: str
    #: LEADER, FOLLOWER, CANDIDATE or UNKNOWN
    role: str
    reachable: bool
    version: str
    raft_address: str
    grpc_address: str
    http_address: str


@dataclass(frozen=True)
class ClusterOverview:
    self_id: str
    leader_id: str
    term: int
    commit_index: int
    applied_index: int
    last_snapshot_index: int
    has_quorum: bool
    command_format: int = 0
    #: a membership change in flight, in words ("" for none)
    membership_change: str = ""
    members: list[MemberView] = field(default_factory=list)


def overview_of(status: Any) -> ClusterOverview:
    """A ``pb.ClusterStatus`` as plain data."""
    members = [
        MemberView(
            m.id,
            pb.MemberRole.Name(m.role).removeprefix("MEMBER_ROLE_"),
            bool(m.reachable),
            m.version,
            m.raft_address,
            m.grpc_address,
            m.http_address,
        )
        for m in status.members
    ]
    return ClusterOverview(
        status.self_id,
        status.leader_id,
        int(status.term),
        int(status.commit_index),
        int(status.applied_index),
        int(status.last_snapshot_index),
        bool(status.has_quorum),
        int(status.command_format),
        status.membership_change,
        members,
    )
