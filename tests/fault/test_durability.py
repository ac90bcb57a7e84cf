"""Guarantee 1: acknowledged writes survive SIGKILL of a minority, and of every node followed by a restart.

Each test ends in the shared history check (``tests.history``) over every node.
"""

from __future__ import annotations

import os
import shutil
import threading
import time

import grpc
import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.conftest import running_cluster
from tests.helpers import every_spec, wait_for
from tests.history import Expected, IntervalJob
from tests.history_read import check_cluster

pytestmark = pytest.mark.fault

SMALL_SNAPSHOTS = "\n[raft]\nsnapshot_min_entries = 150\n"


class Writer(threading.Thread):
    """Creates jobs as fast as one client can; remembers the ones the cluster acknowledged."""

    def __init__(self, addresses: list[str]) -> None:
        super().__init__(daemon=True)
        self.client = Client(addresses, deadline_s=2, call_timeout_s=3)
        self.acked: list[str] = []
        self.failed = 0
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            try:
                self.acked.append(self.client.create_job(every_spec(f"w-{i}", 3_600_000), f"w-{i}").job_id)
            except grpc.RpcError:
                self.failed += 1


@pytest.fixture()
def snapshotting_cluster(tmp_path):  # type: ignore[no-untyped-def]
    with running_cluster(str(tmp_path / "cluster"), SMALL_SNAPSHOTS) as c:
        yield c


def test_kill_one_then_two_then_all_three(snapshotting_cluster: LocalCluster) -> None:
    c = snapshotting_cluster
    with Client(c.addresses, deadline_s=30) as client:
        ticks = {j.job_id: cv.ts_ms(j.created_at) for j in (client.create_job(every_spec(f"tick-{i}", 1000)) for i in range(5))}
        writer = Writer(c.addresses)
        writer.start()
        time.sleep(2)
        order = [n for n in c.nodes if n != c.wait_leader()] + [c.wait_leader()]
        c.kill(order[0])  # a minority: writes go on
        time.sleep(2)
        c.kill(order[1])  # no quorum: writes fail with UNAVAILABLE, none is acknowledged
        time.sleep(1)
        c.kill(order[2])  # everything is down
        time.sleep(1.5)
        for n in c.nodes:
            c.start(n)
        c.wait_leader(60)
        time.sleep(3)
        writer.stop.set()
        writer.join(10)
        assert len(writer.acked) > 20, "the writer should have been acknowledged before the kills"
        for jid in ticks:
            client.job("PauseJob", pb.PauseJobRequest(job_id=jid))
        # every acknowledged job is on every node; interval jobs: exactly one run per instant across the
        # outage (missed ones fired late, FIRE_ALL), none skipped, at least 9 each
        expected = Expected(
            acknowledged=writer.acked,
            interval=[
                IntervalJob(j, 1000, first_ms=created + 1000, min_fired=9, skips_allowed=False) for j, created in ticks.items()
            ],
        )
        check_cluster(c, expected, job_prefix="w-")
        status = c.status(order[2])
        assert status is not None and status.last_snapshot_index > 0, "the test meant to cross a snapshot"


def test_wiped_node_rejoins_from_a_snapshot(snapshotting_cluster: LocalCluster) -> None:
    c = snapshotting_cluster
    with Client(c.addresses, deadline_s=30) as client:
        ids = [client.create_job(every_spec(f"s-{i}", 3_600_000), f"s-{i}").job_id for i in range(400)]
        leader = c.wait_leader()
        victim = next(n for n in c.nodes if n != leader)
        wait_for(lambda: (c.status(leader) or pb.ClusterStatus()).last_snapshot_index > 0, 30, "a snapshot on the leader")
        c.kill(victim)
        shutil.rmtree(os.path.join(c.root, "var", victim))
        more = [client.create_job(every_spec(f"t-{i}", 3_600_000), f"t-{i}").job_id for i in range(200)]
        c.start(victim)
        with Client([c.nodes[victim].grpc], deadline_s=60) as one:
            known = wait_for(
                lambda: {j.job_id for j in one.list_jobs()} >= set(ids + more) or None, 60, "the wiped node to catch up"
            )
            assert known
        status = c.status(victim)
        assert status is not None and status.last_snapshot_index > 0, "the wiped node should have installed a snapshot"
    check_cluster(c, Expected(acknowledged=ids + more), job_prefix="")  # every acknowledged job on every node
