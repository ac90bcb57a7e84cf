"""Executors run only what they are allowed to, in a clean environment, stop a run's every process, and
only the lease holder completes a run: real node and executor processes on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import grpc
import pytest

from cluster.app.local_cluster import LocalCluster
from protos.raftsched.v1 import scheduler_pb2 as pb
from rpc import convert as cv
from rpc.client.client import Client
from tests.helpers import at_spec, now_ms, shell_spec, start_executor, wait_for
from tests.procs import marker, processes_with, stubborn_command

pytestmark = pytest.mark.integration


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def _run_of(client: Client, job: pb.Job) -> pb.Run:
    (run,) = client.list_runs(job_id=job.job_id)
    return run


def _finished(client: Client, job: pb.Job, timeout: float = 20) -> pb.Run:
    done = (pb.RUN_STATUS_SUCCEEDED, pb.RUN_STATUS_FAILED, pb.RUN_STATUS_DEAD_LETTER)
    return wait_for(lambda: [r for r in client.list_runs(job_id=job.job_id) if r.status in done], timeout, "the run")[0]


def test_a_shell_job_is_never_run_by_an_executor_that_does_not_allow_shell(
    cluster: LocalCluster, client: Client, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    ran = tmp_path / "ran"
    job = client.create_job(shell_spec("not-allowed", f"touch {ran}", queue="q-types"))
    control = client.create_job(at_spec("types-noop", now_ms(), queue="q-types"))  # the built-in noop: always on
    plain = start_executor(cluster, str(tmp_path), "exec-noshell", "q-types", allow=())
    try:
        assert _finished(client, control).status == pb.RUN_STATUS_SUCCEEDED  # it serves the queue...
        time.sleep(3)  # ... with the shell run due all along
        assert not ran.exists(), "an executor that does not allow shell ran a shell job"
        run = _run_of(client, job)
        assert run.status == pb.RUN_STATUS_PENDING and run.attempt == 0 and not run.executor_id
        allowing = start_executor(cluster, str(tmp_path), "exec-shell", "q-types", allow=("shell",))
        try:
            done = _finished(client, job)
            assert done.status == pb.RUN_STATUS_SUCCEEDED and done.executor_id == "exec-shell" and done.attempt == 1
            assert ran.exists()
        finally:
            _stop(allowing)
    finally:
        _stop(plain)


def test_a_shell_run_sees_none_of_the_executors_credentials(cluster: LocalCluster, client: Client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    payload = {"command": "env", "env": {"FROM_JOB": "job-value"}}
    spec = pb.JobSpec(name="env-check", type="shell", queue="q-env", payload=json.dumps(payload).encode())
    cv.to_dur(0, spec.after)
    job = client.create_job(spec)
    secrets = {
        "AWS_SECRET_ACCESS_KEY": "raftsched-test-secret-key",
        "AWS_ACCESS_KEY_ID": "AKIARAFTSCHEDTEST",
        "AWS_SESSION_TOKEN": "raftsched-test-session",
        "RAFTSCHED_TEST_KEPT_OUT": "kept-out",
        "RAFTSCHED_TEST_PASSED": "passed-through",
    }
    env = dict(os.environ, **secrets)
    proc = start_executor(cluster, str(tmp_path), "exec-env", "q-env", "--pass-env", "RAFTSCHED_TEST_PASSED", env=env)
    try:
        run = _finished(client, job)
        assert run.status == pb.RUN_STATUS_SUCCEEDED, run.error
        log = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=run.run_id)).log.decode()
    finally:
        _stop(proc)
    seen = dict(line.split("=", 1) for line in log.splitlines() if "=" in line)
    assert not [name for name in seen if name.startswith("AWS_")], log
    assert not [value for value in secrets.values() if value in log and value != "passed-through"], log
    assert seen["RAFTSCHED_FENCING_TOKEN"] == str(run.fencing_token)
    assert (seen["RAFTSCHED_RUN_ID"], seen["RAFTSCHED_JOB_ID"], seen["RAFTSCHED_ATTEMPT"]) == (run.run_id, job.job_id, "1")
    assert seen["FROM_JOB"] == "job-value" and seen["RAFTSCHED_TEST_PASSED"] == "passed-through"
    assert seen["PATH"] == os.environ["PATH"]


def test_a_timed_out_run_leaves_no_process_even_one_that_ignores_sigterm(cluster: LocalCluster, client: Client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    mark = marker()
    spec = shell_spec("stubborn", stubborn_command(mark), queue="q-stubborn")
    cv.to_dur(1500, spec.timeout)
    spec.retry.max_attempts = 1
    job = client.create_job(spec)
    proc = start_executor(cluster, str(tmp_path), "exec-stubborn", "q-stubborn", "--kill-grace", "1")
    try:
        running = wait_for(lambda: len(processes_with(mark)) >= 3 and processes_with(mark), 20, "the run's processes")
        assert any("trap" in cmd for _, cmd in running), running  # the child that ignores SIGTERM is among them
        run = _finished(client, job, timeout=15)
        assert processes_with(mark) == []  # the run completes only once its process group is gone
        time.sleep(1)
        assert processes_with(mark) == []
    finally:
        _stop(proc)
    assert run.status == pb.RUN_STATUS_DEAD_LETTER and "timed out after 1500 ms" in run.error, run.error
    took = cv.ts_ms(run.finished_at) - cv.ts_ms(run.started_at)
    assert 1500 + 1000 - 300 <= took <= 1500 + 1000 + 3000, took  # timeout, SIGTERM ignored, SIGKILL after 1 s


def _acquire(client: Client, executor: str, queue: str) -> pb.Lease:
    req = pb.AcquireLeaseRequest(executor_id=executor, queues=[queue], max_runs=1, types=["shell"])
    cv.to_dur(5000, req.wait)
    (lease,) = client.lease("AcquireLease", req, timeout=15).leases
    return lease


def _done(lease: pb.Lease, executor: str, result: bytes) -> pb.CompleteRunRequest:
    return pb.CompleteRunRequest(
        lease_id=lease.lease_id,
        fencing_token=lease.fencing_token,
        outcome=pb.OUTCOME_SUCCEEDED,
        result=result,
        executor_id=executor,
    )


def test_an_executor_cannot_complete_or_renew_another_executors_run(client: Client) -> None:
    job = client.create_job(shell_spec("not-yours", "true", queue="q-ident"))
    lease = _acquire(client, "exec-a", "q-ident")
    assert lease.run.executor_id == "exec-a"
    with pytest.raises(grpc.RpcError) as err:  # the right lease and token, from someone else
        client.lease("CompleteRun", _done(lease, "exec-b", b"forged"))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert lease.lease_id in err.value.details() and "'exec-a'" in err.value.details() and "'exec-b'" in err.value.details()
    batch = client.lease("CompleteRuns", pb.CompleteRunsRequest(runs=[_done(lease, "exec-b", b"forged")]))
    assert batch.results[0].status.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    with pytest.raises(grpc.RpcError) as err:
        ref = pb.LeaseRef(lease_id=lease.lease_id, fencing_token=lease.fencing_token)
        client.lease("RenewLease", pb.RenewLeaseRequest(executor_id="exec-b", leases=[ref]))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "'exec-a'" in err.value.details()
    run = client.get_run(lease.run.run_id)
    assert (run.status, run.result, run.executor_id, run.fencing_token) == (
        pb.RUN_STATUS_LEASED,
        b"",
        "exec-a",
        lease.fencing_token,
    )
    assert cv.ts_ms(run.lease_expires_at) == cv.ts_ms(lease.expires_at)  # the stranger's renewal changed nothing
    done = client.lease("CompleteRun", _done(lease, "exec-a", b"mine")).run
    assert done.status == pb.RUN_STATUS_SUCCEEDED and done.result == b"mine" and done.job_id == job.job_id
