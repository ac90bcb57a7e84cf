"""Backup on a running cluster, restore into a new 3-node cluster (new data dirs, new ports): every job is there
and fires; a restore never writes over a data dir; a damaged backup is refused."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.conftest import running_cluster
from tests.helpers import cron_spec, every_spec, now_ms, wait_for

pytestmark = pytest.mark.integration


def raftsched(*args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftsched.cluster.app.main", *args], capture_output=True, text=True, timeout=timeout
    )


def test_backup_then_restore_into_a_new_cluster(fresh_cluster: LocalCluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    old = fresh_cluster
    backup = str(tmp_path / "state.backup")
    with Client(old.addresses, deadline_s=30) as client:
        ticks = [client.create_job(every_spec(f"tick-{i}", 1000)).job_id for i in range(5)]
        crons = [client.create_job(cron_spec(f"nightly-{i}", "30 2 * * *", "Europe/Berlin")).job_id for i in range(200)]
        paused = client.create_job(every_spec("paused", 60_000))
        client.job("PauseJob", pb.PauseJobRequest(job_id=paused.job_id))
        time.sleep(2.5)  # the ticks fire while the backup is taken
        out = raftsched("cluster", "backup", backup, "--cluster", ",".join(old.addresses))
        assert out.returncode == 0, out.stderr
        assert "written to" in out.stdout
        acknowledged = {j.job_id: j for j in client.list_jobs()}
        runs_before = {j: len(client.list_runs(job_id=j)) for j in ticks}
    assert os.stat(backup).st_mode & 0o077 == 0 and not os.path.exists(backup + ".part")
    with running_cluster(str(tmp_path / "new"), start=False) as new:
        assert not set(new.addresses) & set(old.addresses)
        for node_id in new.nodes:
            out = raftsched("node", "restore", backup, "--config", new.config_path, "--node-id", node_id)
            assert out.returncode == 0, out.stderr
        refused = raftsched("node", "restore", backup, "--config", new.config_path, "--node-id", "n1")
        assert refused.returncode == 2 and "not empty" in refused.stderr  # never over a data dir
        new.start_all()
        new.wait_leader(30)
        with Client(new.addresses, deadline_s=30) as client:
            restored = {j.job_id: j for j in client.list_jobs()}
            assert set(restored) == set(acknowledged)
            for job_id, job in acknowledged.items():
                assert restored[job_id].spec == job.spec and restored[job_id].status == job.status
            for job_id in ticks:  # the runs fired before the backup are there, and the jobs fire on
                wait_for(lambda j=job_id: len(client.list_runs(job_id=j)) >= runs_before[j] + 2, 20, f"{job_id} to fire")
            latest = max(cv.ts_ms(r.scheduled_time) for r in client.list_runs(job_id=ticks[0]))
            assert latest > now_ms() - 5_000
            status = client.cluster_status()
            # the new cluster's members are the new config's, not the old cluster's
            assert sorted(m.grpc_address for m in status.members) == sorted(new.addresses)
            assert client.get_job(crons[0]).next_fire_time == acknowledged[crons[0]].next_fire_time


def test_a_damaged_backup_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    new = LocalCluster.create(str(tmp_path / "new"), 3)
    damaged = tmp_path / "damaged.backup"
    damaged.write_bytes(b"not a snapshot" * 1000)
    out = raftsched("node", "restore", str(damaged), "--config", new.config_path, "--node-id", "n1")
    assert out.returncode == 2 and "cannot restore" in out.stderr and str(damaged) in out.stderr
    assert not (tmp_path / "new" / "var" / "n1").exists()  # nothing was created
