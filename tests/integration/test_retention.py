"""Retention end to end: history limits by count and time, outputs removed, deleted jobs purged."""

from __future__ import annotations

import glob
import os
import signal

import grpc
import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.helpers import shell_spec, start_executor, wait_for

pytestmark = pytest.mark.integration


def test_history_is_limited_and_outputs_removed(cluster: LocalCluster, client: Client) -> None:
    spec = shell_spec("keep-two", "echo hi", queue="q-retain")
    spec.ClearField("after")
    cv.to_dur(300, spec.every)
    spec.history_limit = 2
    job = client.create_job(spec)
    proc = start_executor(cluster, cluster.root, "exec-retain", "q-retain")
    out_dir = os.path.join(cluster.output_dir, "exec-retain", job.job_id)
    try:
        wait_for(lambda: client.get_job(job.job_id).fire_count >= 8, 20, "eight fires")
        client.job("PauseJob", pb.PauseJobRequest(job_id=job.job_id))

        def settled() -> list[pb.Run] | None:
            runs = client.list_runs(job_id=job.job_id)
            return runs if all(r.status == pb.RUN_STATUS_SUCCEEDED for r in runs) else None

        runs = wait_for(settled, 20, "the runs to finish")
        assert len(runs) == 2, [r.run_id for r in runs]
        assert [cv.ts_ms(r.scheduled_time) for r in runs] == sorted(cv.ts_ms(r.scheduled_time) for r in runs)
        kept = {os.path.basename(os.path.dirname(r.log_uri)) for r in runs}
        wait_for(
            lambda: {os.path.basename(d) for d in glob.glob(os.path.join(out_dir, "*"))} == kept or None,
            20,
            "the pruned runs' logs to be deleted",
        )
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(15)


def test_history_ttl_and_purge_of_a_deleted_job(cluster: LocalCluster, client: Client) -> None:
    spec = shell_spec("short-lived", "echo bye", queue="q-ttl")
    cv.to_dur(1500, spec.history_ttl)
    job = client.create_job(spec, idempotency_key="short-lived-key")
    proc = start_executor(cluster, cluster.root, "exec-ttl", "q-ttl")
    try:
        wait_for(lambda: [r for r in client.list_runs(job_id=job.job_id) if r.status == pb.RUN_STATUS_SUCCEEDED], 20, "the run")
        client.job("DeleteJob", pb.DeleteJobRequest(job_id=job.job_id))
        assert client.get_job(job.job_id).status == pb.JOB_STATUS_DELETED  # soft delete: readable for now

        def gone() -> bool:
            try:
                client.get_job(job.job_id)
                return False
            except grpc.RpcError as exc:
                return exc.code() == grpc.StatusCode.NOT_FOUND

        wait_for(gone, 20, "the deleted job to be purged after its history_ttl")
        again = client.create_job(spec, idempotency_key="short-lived-key")  # the key is free again
        assert again.job_id != job.job_id
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(15)
