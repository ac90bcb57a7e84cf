"""SIGKILL of one node, then of all three, with 100,000 jobs in the backlog and a steady fire load: every
acknowledged job is back on every node (the seeded backlog too), no instant fires twice, none is missed.

The backlog is written straight into every node's state environment (``bench.backlog.seed``: the
records the state machine writes, with a snapshot of them), as an upgraded cluster would hold it; the
cluster then runs normally: interval jobs fire every 500 ms, a client creates jobs as fast as it can,
snapshots come every few hundred entries (copies of a 100,000-job environment), and each restart opens
the environment and replays only the log after its applied index. Ends in the shared history check.
"""

from __future__ import annotations

import time

import pytest

from bench.backlog.seed import seed
from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.conftest import running_cluster
from tests.fault.test_durability import Writer
from tests.helpers import every_spec, wait_for
from tests.history import Expected, IntervalJob
from tests.history_read import check_cluster

pytestmark = pytest.mark.fault

BACKLOG = 100_000
SNAPSHOTS = "\n[raft]\nsnapshot_min_entries = 300\n"


def _serving(c: LocalCluster, node_id: str) -> bool:
    status = c.status(node_id, timeout=2)
    return status is not None and bool(status.leader_id) and status.jobs >= BACKLOG


def test_sigkill_one_then_all_three_with_a_100k_backlog(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running_cluster(str(tmp_path / "cluster"), SNAPSHOTS, start=False) as c:
        seeded = seed(c, BACKLOG, "mix", show=False)
        assert seeded["state_bytes"] > 10 * BACKLOG  # the jobs really are in the environment
        c.start_all()
        c.wait_leader(60)
        backlog = [f"j-backlog-{i:09d}" for i in range(BACKLOG)]
        with Client(c.addresses, deadline_s=30) as client:
            ticks = {
                j.job_id: cv.ts_ms(j.created_at) for j in (client.create_job(every_spec(f"tick-{i}", 500)) for i in range(10))
            }
            writer = Writer(c.addresses)
            writer.start()
            time.sleep(3)
            follower = next(n for n in c.nodes if n != c.wait_leader())
            c.kill(follower)
            time.sleep(2)
            restarted = time.monotonic()
            c.start(follower)
            wait_for(lambda: _serving(c, follower) or None, 30, f"{follower} serving again")
            one_back_s = time.monotonic() - restarted
            time.sleep(2)
            for node_id in c.nodes:
                c.kill(node_id)
            time.sleep(1.5)
            restarted = time.monotonic()
            c.start_all()
            c.wait_leader(60)
            wait_for(lambda: all(_serving(c, n) for n in c.nodes) or None, 60, "every node serving again")
            all_back_s = time.monotonic() - restarted
            time.sleep(3)
            writer.stop.set()
            writer.join(10)
            assert len(writer.acked) > 20, "the writer should have been acknowledged around the kills"
            for job_id in ticks:
                client.job("PauseJob", pb.PauseJobRequest(job_id=job_id))
            snapshots = [(c.status(n) or pb.ClusterStatus()).last_snapshot_index for n in c.nodes]
        print(f"one node back in {one_back_s:.1f} s, all three in {all_back_s:.1f} s; snapshots at {snapshots}")
        assert max(snapshots) > 2, "the test meant to cross a snapshot of the backlog"
        expected = Expected(
            acknowledged=backlog + writer.acked,
            interval=[
                IntervalJob(j, 500, first_ms=created + 500, min_fired=20, skips_allowed=False) for j, created in ticks.items()
            ],
        )
        check_cluster(c, expected, job_prefix="")
