"""ClusterService: who leads, who is a member (and reachable), how far the log is, how many jobs and runs;
AddNode and RemoveNode (``raftsched.cluster.node.membership``); Backup (``raftsched.cluster.node.backup``); WhoAmI
(the caller's token, as ``raftsched.rpc.server.auth`` found it)."""

from __future__ import annotations

from typing import BinaryIO, Callable, Iterator, Sequence

import grpc

from raftsched.cluster.domain.model import Member, RunStatus
from raftsched.cluster.node.config import NodeAddress
from raftsched.cluster.node.fitness import FitnessView
from raftsched.cluster.node.job_service import Counts
from raftsched.cluster.node.membership import MembershipService, MembershipView
from raftsched.cluster.node.ports import RaftStatus
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc.server.auth import caller_token
from raftsched.rpc.server.errors import guarded, guarded_stream

#: jobs and runs of the answering node's state
CountsFn = Callable[[], Counts]
#: ``(index, file)`` of a snapshot covering what is committed now (``raftsched.cluster.node.backup.open_backup``)
BackupFn = Callable[[float], tuple[int, BinaryIO]]
#: how long AddNode/RemoveNode wait for the change to finish when the caller set no deadline
DEFAULT_CHANGE_WAIT_S = 30.0
BACKUP_CHUNK = 1 << 20


def run_counts(by_status: dict[RunStatus, int]) -> pb.RunCounts:
    return pb.RunCounts(**{status.value.lower(): n for status, n in by_status.items()})


def _members(nodes: Sequence[NodeAddress], view: MembershipView | None) -> list[Member]:
    """The members the replicated state records; the config's (this node's start-up view) until it does."""
    if view is not None and view.roster:
        return list(view.roster)
    return [Member(n.id, n.raft, n.grpc, n.http) for n in nodes]


def cluster_status(
    raft: RaftStatus,
    self_id: str,
    nodes: Sequence[NodeAddress],
    counts: CountsFn | None = None,
    self_version: str = "",
    view: MembershipView | None = None,
    fitness: FitnessView | None = None,
) -> pb.ClusterStatus:
    members = _members(nodes, view)
    by_raft = {m.raft: m for m in members}
    leader = by_raft.get(raft.leader_address() or "")
    status = raft.status()
    out = pb.ClusterStatus(
        self_id=self_id,
        leader_id=leader.node_id if leader else "",
        term=raft.term,
        commit_index=raft.commit_index,
        applied_index=raft.applied_index,
        last_snapshot_index=raft.last_snapshot_index,
        has_quorum=bool(status.get("has_quorum")),
    )
    versions: dict[str, tuple[str, int]] = {}
    if counts is not None:
        now = counts()
        out.runs.CopyFrom(run_counts(now.runs))
        out.jobs = now.jobs
        out.pending_by_queue.update(now.pending_by_queue)
        versions = now.members
    if view is not None:
        versions = view.versions
        out.command_format = view.cluster_format
        out.membership_change = view.change.describe() if view.change else ""
    state = status.get("state")
    for m in members:
        if m.node_id == self_id:
            role = {0: pb.MEMBER_ROLE_FOLLOWER, 1: pb.MEMBER_ROLE_CANDIDATE, 2: pb.MEMBER_ROLE_LEADER}.get(
                state if isinstance(state, int) else -1, pb.MEMBER_ROLE_UNKNOWN
            )
            reachable = True
        else:
            role = pb.MEMBER_ROLE_LEADER if leader is m else pb.MEMBER_ROLE_UNKNOWN
            reachable = raft.is_connected(m.raft)
            if role != pb.MEMBER_ROLE_LEADER and reachable and leader is not None:
                role = pb.MEMBER_ROLE_FOLLOWER
        reported = versions.get(m.node_id)
        version = (
            self_version
            if m.node_id == self_id and self_version
            else (f"{reported[0]} (command format {reported[1]})" if reported else "")
        )
        member = out.members.add(
            id=m.node_id,
            raft_address=m.raft,
            grpc_address=m.grpc,
            http_address=m.http,
            role=role,
            reachable=reachable,
            version=version,
        )
        if fitness is not None:
            fit = fitness.of(m.raft)
            member.clock_offset.FromMilliseconds(round(fit.offset_ms))
            member.clock_measured = fit.measured
            member.clock_ok = fit.clock_ok
            member.storage_ok = fit.storage_ok
            member.unfit_reason = fit.unfit
    return out


def _wait_s(context: grpc.ServicerContext) -> float:
    """How long a membership call may wait for its change: the caller's deadline less a margin."""
    left = context.time_remaining()
    return DEFAULT_CHANGE_WAIT_S if left is None else max(0.5, min(left - 1.0, 300.0))


class ClusterServicer(pb_grpc.ClusterServiceServicer):
    def __init__(
        self,
        raft: RaftStatus,
        self_id: str,
        nodes: Sequence[NodeAddress],
        counts: CountsFn | None = None,
        version: str = "",
        membership: MembershipService | None = None,
        backup: BackupFn | None = None,
        fitness: FitnessView | None = None,
    ) -> None:
        self._raft = raft
        self._fitness = fitness
        self._counts = counts
        self._self_id = self_id
        self._nodes = tuple(nodes)
        self._version = version
        self._membership = membership
        self._backup = backup

    def _status(self, view: MembershipView | None = None) -> pb.ClusterStatus:
        if view is None and self._membership is not None:
            view = self._membership.view()
        return cluster_status(self._raft, self._self_id, self._nodes, self._counts, self._version, view, self._fitness)

    @guarded
    def GetClusterStatus(self, request: pb.GetClusterStatusRequest, context: grpc.ServicerContext) -> pb.ClusterStatus:
        return self._status()

    @guarded
    def AddNode(self, request: pb.AddNodeRequest, context: grpc.ServicerContext) -> pb.ClusterStatus:
        if self._membership is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "this node serves no membership changes")
        assert self._membership is not None
        member = Member(request.id, request.raft_address, request.grpc_address, request.http_address)
        return self._status(self._membership.add(member, _wait_s(context)))

    @guarded
    def RemoveNode(self, request: pb.RemoveNodeRequest, context: grpc.ServicerContext) -> pb.ClusterStatus:
        if self._membership is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "this node serves no membership changes")
        assert self._membership is not None
        return self._status(self._membership.remove(request.id, _wait_s(context)))

    @guarded
    def WhoAmI(self, request: pb.WhoAmIRequest, context: grpc.ServicerContext) -> pb.WhoAmIResponse:
        token = caller_token()
        if token is None:  # no [auth]: the interceptor that finds tokens is not there
            return pb.WhoAmIResponse(tokens_required=False)
        return pb.WhoAmIResponse(
            tokens_required=True,
            name=token.name,
            roles=sorted(token.roles),
            queues=sorted(token.queues),
            types=sorted(token.types),
        )

    @guarded_stream
    def Backup(self, request: pb.BackupRequest, context: grpc.ServicerContext) -> Iterator[pb.BackupChunk]:
        if self._backup is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "this node serves no backups")
        assert self._backup is not None
        left = context.time_remaining()
        index, f = self._backup(60.0 if left is None else max(1.0, left - 1.0))
        with f:
            size = f.seek(0, 2)
            f.seek(0)
            first = True
            while True:
                data = f.read(BACKUP_CHUNK)
                if not data and not first:
                    return
                yield pb.BackupChunk(data=data, index=index, size=size) if first else pb.BackupChunk(data=data)
                first = False
