"""Membership changes on real node processes: one change at a time, and a removed node's way out."""

from __future__ import annotations

import subprocess
import sys
import time

import grpc
import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc.client.client import Client
from tests.helpers import wait_for

pytestmark = pytest.mark.integration


def raftsched(*args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftsched.cluster.app.main", *args], capture_output=True, text=True, timeout=timeout
    )


def _stub(c: LocalCluster, node_id: str) -> tuple[grpc.Channel, pb_grpc.ClusterServiceStub]:
    ch = grpc.insecure_channel(c.nodes[node_id].grpc)
    return ch, pb_grpc.ClusterServiceStub(ch)


def _add(stub: pb_grpc.ClusterServiceStub, node_id: str, c: LocalCluster, timeout: float) -> pb.ClusterStatus:
    n = c.nodes[node_id]
    return stub.AddNode(pb.AddNodeRequest(id=node_id, raft_address=n.raft, grpc_address=n.grpc), timeout=timeout)


def _ready(c: LocalCluster, node_id: str) -> None:
    """Every member has reported its version and the cluster switched to the format membership needs."""
    wait_for(lambda: (c.status(node_id) or pb.ClusterStatus()).command_format >= 2, 30, "command format 2")


def _members(c: LocalCluster, node_id: str) -> list[str]:
    s = c.status(node_id)
    return sorted(m.id for m in s.members) if s else []


def test_one_membership_change_at_a_time(fresh_cluster: LocalCluster) -> None:
    c = fresh_cluster
    leader = c.wait_leader()
    _ready(c, leader)
    dead = next(n for n in c.nodes if n != leader)
    c.kill(dead)  # with a member down, adding one more needs the new member itself for a quorum
    c.new_node("n4")
    c.new_node("n5")
    ch, stub = _stub(c, leader)
    with ch:
        with pytest.raises(grpc.RpcError) as err:
            _add(stub, "n4", c, timeout=4)
        assert err.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        in_flight = stub.GetClusterStatus(pb.GetClusterStatusRequest(), timeout=5)
        assert in_flight.membership_change.startswith("adding n4"), in_flight
        assert "n4" in [m.id for m in in_flight.members]  # listed, with its addresses, from the start
        # a second change while this one is in flight: FAILED_PRECONDITION naming the one in flight
        for call in (
            lambda: _add(stub, "n5", c, timeout=10),
            lambda: stub.RemoveNode(pb.RemoveNodeRequest(id=dead), timeout=10),
        ):
            with pytest.raises(grpc.RpcError) as err:
                call()
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION, err.value
            assert "in flight" in (err.value.details() or "") and "adding n4" in (err.value.details() or "")
        # the same AddNode again is the same change (a retry), not a second one
        with pytest.raises(grpc.RpcError) as err:
            _add(stub, "n4", c, timeout=3)
        assert err.value.code() != grpc.StatusCode.FAILED_PRECONDITION
        # the new member starts, catches up, and the change finishes
        c.start("n4", join=[c.nodes[leader].grpc])
        with Client([c.nodes[leader].grpc], deadline_s=60) as retrying:  # no leader until n4 has caught up
            n4 = c.nodes["n4"]
            done = retrying.cluster("AddNode", pb.AddNodeRequest(id="n4", raft_address=n4.raft, grpc_address=n4.grpc), timeout=30)
        assert done.membership_change == "" and "n4" in [m.id for m in done.members]
        # now the dead member can go: through the command line, as an operator would
        out = raftsched("cluster", "remove-node", "--id", dead, "--cluster", c.nodes[leader].grpc)
        assert out.returncode == 0, out.stderr
        assert dead not in out.stdout.split("command format")[1]
    c.forget(dead)
    c.forget("n5")  # refused: never a member
    survivors = sorted(c.nodes)
    for node_id in survivors:  # every node lists every member, the new one with its addresses
        wait_for(lambda n=node_id: _members(c, n) == survivors, 20, f"{node_id} to list {survivors}")
    n4 = c.status(leader).members  # type: ignore[union-attr]
    assert [(m.raft_address, m.grpc_address) for m in n4 if m.id == "n4"] == [(c.nodes["n4"].raft, c.nodes["n4"].grpc)]


def test_a_removed_node_exits_0_and_refuses_its_old_data_dir(fresh_cluster: LocalCluster) -> None:
    c = fresh_cluster
    leader = c.wait_leader()  # the leader itself: it hands leadership over first
    others = [n for n in c.nodes if n != leader]
    out = raftsched("cluster", "remove-node", "--id", leader, "--cluster", ",".join(c.nodes[n].grpc for n in others))
    assert out.returncode == 0, out.stderr
    proc = c.nodes[leader].proc
    assert proc is not None and proc.wait(30) == 0  # stopped serving, exit status 0
    with open(c.nodes[leader].log_path, encoding="utf-8") as f:
        assert "was removed from the cluster" in f.read()
    new_leader = c.wait_leader(among=others)
    assert new_leader != leader
    assert _members(c, new_leader) == sorted(others)
    # started again with its data dir, it refuses, naming why
    started = time.monotonic()
    c.start(leader)
    again = c.nodes[leader].proc
    assert again is not None and again.wait(30) == 2 and time.monotonic() - started < 30
    with open(c.nodes[leader].log_path, encoding="utf-8") as f:
        tail = f.read()[-2000:]
    assert "was removed from its cluster" in tail and "RemoveNode" in tail and "--join" in tail
    assert _members(c, new_leader) == sorted(others)  # and the cluster never heard of it
