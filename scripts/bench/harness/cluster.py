"""Starting the 3-node raftsched cluster the cluster scenarios share, and waiting until it serves."""

from __future__ import annotations

import os
import time

import grpc

from bench.harness.common import every_spec
from bench.harness.context import Bench
from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc

#: seconds each node may take to answer a read and a linearizable ListJobs after the election
SERVING_TIMEOUT_S = 30


def _wait_serving(address: str) -> None:
    """Until the node at ``address`` answers PreviewSchedule and a linearizable ListJobs."""
    with grpc.insecure_channel(address) as ch:
        stub = pb_grpc.JobServiceStub(ch)
        deadline = time.monotonic() + SERVING_TIMEOUT_S
        while True:
            try:
                stub.PreviewSchedule(pb.PreviewScheduleRequest(spec=every_spec("probe", 60, "x"), count=1), timeout=2)
                stub.ListJobs(pb.ListJobsRequest(page_size=1), timeout=5)
                return
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def start_cluster(b: Bench) -> None:
    """3 nodes in ``b.root/cluster`` (``--nodes-extra-config`` appended to their config), a leader,
    and every node answering; stopped by ``LocalCluster.stop_all`` in the caller's ``finally``."""
    root = os.path.join(b.root, "cluster")
    b.cluster = LocalCluster.create(root, 3, b.args.nodes_extra_config)
    b.say(f"raftsched: starting 3 nodes in {root}")
    for node_id in b.cluster.nodes:
        b.start_node(node_id)
    leader = b.leader(60)
    b.mark("leader", node=leader)
    for node in b.cluster.nodes.values():
        _wait_serving(node.grpc)
    b.say(f"  leader {leader}; nodes {', '.join(f'{n}={x.grpc} pid {x.pid}' for n, x in b.cluster.nodes.items())}")
