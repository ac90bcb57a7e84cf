"""A run's attempts and explanation survive a leader SIGKILL and a node rebuilt from a snapshot.

Runs are explained while the leader is killed and a follower is wiped (it installs the leader's snapshot):
afterwards every node answers ExplainRun and GetRun with the same steps and attempts, and the history
checker finds every instant of the interval jobs fired once.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from typing import Iterator

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.conftest import running_cluster
from tests.helpers import every_spec, shell_spec, start_executor, wait_for
from tests.history import Expected, IntervalJob
from tests.history_read import check_cluster

pytestmark = pytest.mark.fault

SMALL_SNAPSHOTS = "\n[raft]\nsnapshot_min_entries = 150\n"
QUEUE = "q-survive"


@pytest.fixture()
def snapshotting_cluster(tmp_path):  # type: ignore[no-untyped-def]
    with running_cluster(str(tmp_path / "cluster"), SMALL_SNAPSHOTS) as c:
        yield c


@pytest.fixture()
def executor(snapshotting_cluster: LocalCluster, tmp_path) -> Iterator[None]:  # type: ignore[no-untyped-def]
    proc = start_executor(snapshotting_cluster, str(tmp_path), "ex-survive", QUEUE)
    try:
        yield
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _flaky(name: str, counter: str, fail_times: int) -> pb.JobSpec:
    script = (
        f'n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; echo "try $n"; [ "$n" -gt {fail_times} ]'
    )
    spec = shell_spec(name, script, queue=QUEUE)
    spec.retry.max_attempts = fail_times + 1
    cv.to_dur(200, spec.retry.initial_backoff)
    cv.to_dur(400, spec.retry.max_backoff)
    return spec


def _explained(address: str, run_ids: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    with Client([address], deadline_s=30) as one:
        out = {}
        for run_id in run_ids:
            steps = [f"{cv.ts_ms(s.at)}|{s.kind}|{s.node_id}|{s.detail}" for s in one.explain_run(run_id).steps]
            attempts = [
                f"{a.attempt}|{a.executor_id}|{a.fencing_token}|{a.outcome}|{a.log_uri}" for a in one.get_run(run_id).attempts
            ]
            out[run_id] = (steps, attempts)
        return out


def _done(client: Client, run_id: str) -> bool:
    return client.get_run(run_id).status in (pb.RUN_STATUS_SUCCEEDED, pb.RUN_STATUS_DEAD_LETTER)


def test_explanations_survive_a_leader_sigkill_and_a_snapshot_install(
    snapshotting_cluster: LocalCluster, executor: None, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    c = snapshotting_cluster
    with Client(c.addresses, deadline_s=30) as client:
        wait_for(lambda: client.cluster_status().command_format >= 3, 30, "command format 3")
        ticks = {j.job_id: cv.ts_ms(j.created_at) for j in (client.create_job(every_spec(f"tick-{i}", 1000)) for i in range(5))}
        before = [client.create_job(_flaky(f"before-{i}", str(tmp_path / f"b{i}"), 2)).job_id for i in range(3)]
        runs = [wait_for(lambda j=j: client.list_runs(j), 20, f"a run of {j}")[0].run_id for j in before]
        time.sleep(0.5)  # some attempts happen under the first leader
        victim = c.wait_leader()
        c.kill(victim)
        c.wait_leader(among=[n for n in c.nodes if n != victim])
        after = [client.create_job(_flaky(f"after-{i}", str(tmp_path / f"a{i}"), 1)).job_id for i in range(3)]
        runs += [wait_for(lambda j=j: client.list_runs(j), 20, f"a run of {j}")[0].run_id for j in after]
        c.start(victim)
        for i in range(200):  # entries enough for snapshots
            client.create_job(every_spec(f"filler-{i}", 3_600_000, queue="q-filler"), f"filler-{i}")
        wait_for(lambda: all(_done(client, r) for r in runs), 60, "every flaky run to end")
        leader = c.wait_leader()
        wait_for(lambda: (c.status(leader) or pb.ClusterStatus()).last_snapshot_index > 0, 30, "a snapshot on the leader")
        wiped = next(n for n in c.nodes if n != leader)
        c.kill(wiped)
        shutil.rmtree(os.path.join(c.root, "var", wiped))
        client.trigger_job(after[0])  # one more entry the wiped node learns from the log after the snapshot
        c.start(wiped)
        wait_for(lambda: (c.status(wiped) or pb.ClusterStatus()).last_snapshot_index > 0, 60, "the wiped node's snapshot")
        time.sleep(2)
        for jid in ticks:
            client.job("PauseJob", pb.PauseJobRequest(job_id=jid))
        time.sleep(1)

    seen = {node: _explained(c.nodes[node].grpc, runs) for node in c.nodes}
    first = seen[next(iter(c.nodes))]
    assert all(view == first for view in seen.values()), "the nodes explain the runs differently"
    for run_id, (steps, attempts) in first.items():
        kinds = [s.split("|")[1] for s in steps]
        assert kinds[0] == "fired" and kinds[-1] == "succeeded", (run_id, kinds)
        # an attempt ends failed, or (its completion lost in the failover) lease_expired; the last succeeded
        assert kinds.count("leased") == len(attempts) >= 2
        assert kinds.count("failed") + kinds.count("lease_expired") == len(attempts) - 1
        assert len({a.split("|")[2] for a in attempts}) == len(attempts)  # distinct fencing tokens
    fired_by = {s.split("|")[2] for steps, _ in first.values() for s in steps if "|fired|" in s}
    assert len(fired_by) >= 2, f"runs fired before and after the kill name different leaders: {fired_by}"
    check_cluster(
        c,
        Expected(interval=[IntervalJob(j, 1000, first_ms=created + 1000, skips_allowed=False) for j, created in ticks.items()]),
    )
