"""Membership changes under load: add a member, remove the leader, replace a SIGKILLed node with a fresh one.

A few ``every 1s`` jobs fire throughout and an executor leases and completes their runs. Then, one change at
a time: n4 is added and joins; the leader of the moment is removed (it hands leadership over and exits 0);
another original node is SIGKILLed, removed, and replaced by n5 started with ``--join`` and an empty data dir.
The shared history checker then reads every member of the final cluster: no double fire, no gap, no instant
skipped, at most one lease holder, the same history on every node — and every acknowledged job on the new
members. Leases are watched on the one original node that is never touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.helpers import at_spec, every_spec, now_ms, start_executor, wait_for
from tests.history import Expected, IntervalJob
from tests.history_read import LeaseWatch, check_cluster

pytestmark = pytest.mark.fault

QUEUE = "q-members"
ORIGINAL = ("n1", "n2", "n3")


def _add(client: Client, c: LocalCluster, node_id: str, join: list[str]) -> None:
    node = c.new_node(node_id)
    status = client.cluster("AddNode", pb.AddNodeRequest(id=node_id, raft_address=node.raft, grpc_address=node.grpc), timeout=60)
    assert node_id in [m.id for m in status.members] and status.membership_change == ""
    c.start(node_id, join=join)
    _caught_up(c, node_id)


def _caught_up(c: LocalCluster, node_id: str) -> None:
    def done() -> bool:
        mine, leader = c.status(node_id), c.status(c.wait_leader())
        return bool(mine and leader and mine.applied_index >= leader.commit_index - 50 and mine.leader_id == leader.self_id)

    wait_for(done, 30, f"{node_id} to catch up")


def _members_everywhere(c: LocalCluster) -> None:
    want = sorted(c.nodes)
    for node_id in want:
        wait_for(lambda n=node_id: sorted(m.id for m in c.status(n).members) == want, 20, f"{node_id} to list {want}")  # type: ignore[union-attr]


def test_add_remove_the_leader_and_replace_a_killed_node_under_load(fresh_cluster: LocalCluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    c = fresh_cluster
    wait_for(lambda: (c.status(c.wait_leader()) or pb.ClusterStatus()).command_format >= 2, 30, "command format 2")
    with contextlib.ExitStack() as stack:
        watches = {n: stack.enter_context(LeaseWatch(c.nodes[n].grpc, QUEUE)) for n in ORIGINAL}
        executor = start_executor(c, str(tmp_path), "exec-members", QUEUE, allow=())
        stack.callback(lambda: (os.kill(executor.pid, signal.SIGKILL), executor.wait()) if executor.poll() is None else None)
        client = stack.enter_context(Client(c.addresses, deadline_s=60))
        ticks = {
            j.job_id: cv.ts_ms(j.created_at)
            for j in (client.create_job(every_spec(f"mem-tick-{i}", 1000, queue=QUEUE)) for i in range(4))
        }
        acknowledged = list(ticks)
        time.sleep(2.5)

        # 1. a new member joins under load
        _add(client, c, "n4", [c.nodes[n].grpc for n in ORIGINAL])
        acknowledged.append(client.create_job(at_spec("mem-once-1", now_ms() + 600_000)).job_id)
        time.sleep(1.5)

        # 2. the leader of the moment is removed: it hands leadership over, then exits 0
        leader = c.wait_leader()
        status = client.cluster("RemoveNode", pb.RemoveNodeRequest(id=leader), timeout=60)
        assert leader not in [m.id for m in status.members]
        proc = c.nodes[leader].proc
        assert proc is not None and proc.wait(30) == 0
        c.forget(leader)
        assert c.wait_leader() != leader
        acknowledged.append(client.create_job(at_spec("mem-once-2", now_ms() + 600_000)).job_id)
        time.sleep(1.5)

        # 3. another original node is SIGKILLed and replaced by a fresh one (remove, add, --join, empty data dir)
        victim, kept = sorted(n for n in ORIGINAL if n in c.nodes)
        c.kill(victim)
        client.cluster("RemoveNode", pb.RemoveNodeRequest(id=victim), timeout=60)
        c.forget(victim)
        _add(client, c, "n5", [c.nodes[kept].grpc, c.nodes["n4"].grpc])
        acknowledged.append(client.create_job(at_spec("mem-once-3", now_ms() + 600_000)).job_id)
        _members_everywhere(c)
        assert sorted(c.nodes) == sorted([kept, "n4", "n5"])

        time.sleep(2.0)
        last_change = now_ms()
        time.sleep(2.5)
        for job_id in ticks:
            client.job("PauseJob", pb.PauseJobRequest(job_id=job_id))
        leases = watches[kept].leases()
        assert len(leases) >= 10, leases  # the executor kept leasing through every change

    # every member of the final cluster tells the same history: one run per second of every job from its
    # first on, none skipped, still firing after the last change; one lease holder at a time; nothing lost
    check_cluster(
        c,
        Expected(
            acknowledged=acknowledged,
            interval=[
                IntervalJob(j, 1000, first_ms=created + 1000, fired_after_ms=last_change, skips_allowed=False)
                for j, created in ticks.items()
            ],
        ),
        job_prefix="mem-",
        leases=leases,
    )
