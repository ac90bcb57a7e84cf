"""Which membership a node starts with, before anything is created on disk.

In this order:

1. the membership its data dir recorded from the cluster's log
   (``raftsched.cluster.app.data_dir``): every restart after the first;
2. with ``--join H:P[,H:P...]`` and no recorded membership: the membership
   the given nodes answer (``GetClusterStatus``, asked until one lists this
   node: it must have been added with ``raftsched cluster add-node`` first;
   with ``[auth]`` on it asks with the token of ``--token-file``, a reader's:
   a refused token stops it at once, saying so).
   The node then holds its own elections until it has applied the log up to
   the commit index it was told (a new member must not raise the term before
   it has the log);
3. else the config's ``[[nodes]]``: the first start of a new cluster.

The result is the config with ``nodes`` replaced by that membership
(addresses from the membership, listen addresses from the config's entry of
the same id), so the rest of the node sees every member.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, replace

import grpc

from raftsched.cluster.app.data_dir import Identity, check_existing, effective_nodes, read_identity, seed_members
from raftsched.cluster.domain.model import Member
from raftsched.cluster.node.config import ClusterConfig, ConfigError
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc.client.channel import ChannelSecurity, open_channel

log = logging.getLogger("raftsched.node")

#: how long ``--join`` keeps asking the given nodes
JOIN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Boot:
    #: the config with ``nodes`` = the membership this node starts with
    cfg: ClusterConfig
    #: the config's [[nodes]]: what a leader records as the first membership if none is recorded
    seed: tuple[Member, ...]
    #: what the node was told when it joined (recorded in its data dir at once); empty otherwise
    joined: tuple[Member, ...] = ()
    #: a joining node holds its elections until it has applied this index
    hold_until_index: int = 0


def prepare(cfg: ClusterConfig, node_id: str, join: list[str], security: ChannelSecurity | None = None) -> Boot:
    """The membership ``node_id`` starts with; ``ConfigError`` saying what to do when there is none."""
    node_dir = cfg.node_dir(node_id)
    ident: Identity | None = read_identity(node_dir) if os.path.isdir(node_dir) else None
    if ident is not None:
        check_existing(ident, node_dir, node_id, cfg)
    joined: tuple[Member, ...] = ()
    hold = 0
    if ident is not None and ident.membership:
        members = ident.membership
        if join:
            log.info("--join ignored: data dir %s records the membership (%s)", node_dir, ", ".join(m.node_id for m in members))
    elif join:
        members, hold = ask_membership(join, node_id, security)
        joined = members
    else:
        cfg.node(node_id)  # not in [[nodes]]: refused, naming the id, before anything is created
        members = seed_members(cfg)
    me = next((m for m in members if m.node_id == node_id), None)
    if me is None:
        raise ConfigError(
            f"node {node_id} is not a member of its cluster (members: {', '.join(m.node_id for m in members)}): add it "
            f"first (raftsched cluster add-node --id {node_id} --raft H:P --grpc H:P), then start it with --join"
        )
    listed = next((n for n in cfg.nodes if n.id == node_id), None)
    if listed is not None and (listed.raft, listed.grpc) != (me.raft, me.grpc):
        raise ConfigError(
            f"node {node_id} is a member with raft {me.raft} and grpc {me.grpc} (what the cluster's log says), but "
            f"{cfg.path} lists raft {listed.raft} and grpc {listed.grpc}: a member's addresses change only by "
            "removing it and adding it again (raftsched cluster remove-node, add-node); fix the config"
        )
    return Boot(replace(cfg, nodes=effective_nodes(cfg, members)), seed_members(cfg), joined, hold)


def ask_membership(addresses: list[str], node_id: str, security: ChannelSecurity | None) -> tuple[tuple[Member, ...], int]:
    """The members (and the commit index) a node of ``addresses`` answers, once one lists ``node_id``."""
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    problem = "no answer yet"
    while True:
        for address in addresses:
            try:
                with open_channel(address, security) as ch:
                    status = pb_grpc.ClusterServiceStub(ch).GetClusterStatus(pb.GetClusterStatusRequest(), timeout=3)
            except grpc.RpcError as exc:
                problem = f"{address}: {exc.code().name}: {exc.details()}"
                if exc.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                    raise ConfigError(  # asking again will not change it
                        f"cannot join through {problem}. A joining node asks the members with the token of "
                        "--token-file or $RAFTSCHED_TOKEN_FILE (or $RAFTSCHED_TOKEN): give it one with the reader role"
                    ) from exc
                continue
            members = tuple(Member(m.id, m.raft_address, m.grpc_address, m.http_address) for m in status.members)
            if any(m.node_id == node_id for m in members):
                log.info("joining: %s answered the membership %s", address, ", ".join(m.node_id for m in members))
                return members, status.commit_index
            problem = (
                f"{address} answered members {', '.join(m.node_id for m in members)}, without {node_id}: add it first "
                f"(raftsched cluster add-node --id {node_id} --raft H:P --grpc H:P)"
            )
        if time.monotonic() >= deadline:
            raise ConfigError(f"cannot join through {', '.join(addresses)}: {problem}")
        time.sleep(1.0)
