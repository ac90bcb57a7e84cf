"""ClusterService: who leads, who is reachable, how far the log is, how many jobs and runs. Membership RPCs come later."""

from __future__ import annotations

from typing import Callable

import grpc

from cluster.domain.model import RunStatus
from cluster.node.config import NodeAddress
from cluster.node.job_service import Counts
from cluster.node.ports import RaftStatus
from protos.raftsched.v1 import scheduler_pb2 as pb
from protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from rpc.server.errors import guarded

#: jobs and runs of the answering node's state
CountsFn = Callable[[], Counts]


def run_counts(by_status: dict[RunStatus, int]) -> pb.RunCounts:
    return pb.RunCounts(**{status.value.lower(): n for status, n in by_status.items()})


def cluster_status(
    raft: RaftStatus, self_id: str, nodes: tuple[NodeAddress, ...], counts: CountsFn | None = None, self_version: str = ""
) -> pb.ClusterStatus:
    by_raft = {n.raft: n for n in nodes}
    leader_addr = raft.leader_address()
    leader = by_raft.get(leader_addr or "")
    status = raft.status()
    out = pb.ClusterStatus(
        self_id=self_id,
        leader_id=leader.id if leader else "",
        term=raft.term,
        commit_index=raft.commit_index,
        applied_index=raft.applied_index,
        last_snapshot_index=raft.last_snapshot_index,
        has_quorum=bool(status.get("has_quorum")),
    )
    versions: dict[str, str] = {}
    if counts is not None:
        now = counts()
        out.runs.CopyFrom(run_counts(now.runs))
        out.jobs = now.jobs
        out.pending_by_queue.update(now.pending_by_queue)
        versions = {node: f"{ver} (command format {fmt})" for node, (ver, fmt) in now.members.items()}
    state = status.get("state")
    for n in nodes:
        if n.id == self_id:
            role = {0: pb.MEMBER_ROLE_FOLLOWER, 1: pb.MEMBER_ROLE_CANDIDATE, 2: pb.MEMBER_ROLE_LEADER}.get(
                state if isinstance(state, int) else -1, pb.MEMBER_ROLE_UNKNOWN
            )
            reachable = True
        else:
            role = pb.MEMBER_ROLE_LEADER if leader is n else pb.MEMBER_ROLE_UNKNOWN
            reachable = raft.is_connected(n.raft)
            if role != pb.MEMBER_ROLE_LEADER and reachable and leader is not None:
                role = pb.MEMBER_ROLE_FOLLOWER
        version = self_version if n.id == self_id and self_version else versions.get(n.id, "")
        out.members.add(id=n.id, raft_address=n.raft, grpc_address=n.grpc, role=role, reachable=reachable, version=version)
    return out


class ClusterServicer(pb_grpc.ClusterServiceServicer):
    def __init__(
        self, raft: RaftStatus, self_id: str, nodes: tuple[NodeAddress, ...], counts: CountsFn | None = None, version: str = ""
    ) -> None:
        self._raft = raft
        self._counts = counts
        self._self_id = self_id
        self._nodes = nodes
        self._version = version

    @guarded
    def GetClusterStatus(self, request: pb.GetClusterStatusRequest, context: grpc.ServicerContext) -> pb.ClusterStatus:
        return cluster_status(self._raft, self._self_id, self._nodes, self._counts, self._version)

    def AddNode(self, request: pb.AddNodeRequest, context: grpc.ServicerContext) -> pb.ClusterStatus:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "AddNode is not available yet: membership is fixed by cluster.toml")
        raise AssertionError("context.abort raises")

    def RemoveNode(self, request: pb.RemoveNodeRequest, context: grpc.ServicerContext) -> pb.ClusterStatus:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "RemoveNode is not available yet: membership is fixed by cluster.toml")
        raise AssertionError("context.abort raises")
