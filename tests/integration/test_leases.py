"""LeaseService end to end: grants, renewals, fencing, retries, dead letter, cancellation, bad input."""

from __future__ import annotations

import os
import signal
import time

import grpc
import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.helpers import at_spec, now_ms, shell_spec, start_executor, wait_for

pytestmark = pytest.mark.integration


def _acquire(client: Client, executor: str, queue: str, wait_ms: int = 5000, max_runs: int = 1) -> list[pb.Lease]:
    req = pb.AcquireLeaseRequest(executor_id=executor, queues=[queue], max_runs=max_runs)
    cv.to_dur(wait_ms, req.wait)
    return list(client.lease("AcquireLease", req, timeout=wait_ms / 1000 + 10).leases)


def _complete(client: Client, lease: pb.Lease, ok: bool = True, token: int | None = None) -> pb.CompleteRunResponse:
    return client.lease(
        "CompleteRun",
        pb.CompleteRunRequest(
            lease_id=lease.lease_id,
            fencing_token=lease.fencing_token if token is None else token,
            outcome=pb.OUTCOME_SUCCEEDED if ok else pb.OUTCOME_FAILED,
            executor_id=lease.run.executor_id,  # the holder completes its own lease
            result=b"done",
        ),
    )


def _with_ttl(spec: pb.JobSpec, ttl_ms: int, attempts: int = 3, backoff_ms: int = 100) -> pb.JobSpec:
    cv.to_dur(ttl_ms, spec.lease_ttl)
    spec.retry.max_attempts = attempts
    cv.to_dur(backoff_ms, spec.retry.initial_backoff)
    cv.to_dur(backoff_ms * 10, spec.retry.max_backoff)
    return spec


def test_grant_renew_complete(client: Client) -> None:
    job = client.create_job(shell_spec("lease-basic", "true", queue="q-basic"))
    (lease,) = _acquire(client, "exec-a", "q-basic")
    assert lease.run.job_id == job.job_id and lease.type == "shell"
    assert lease.run.status == pb.RUN_STATUS_LEASED and lease.run.attempt == 1
    assert lease.fencing_token > 0 and lease.lease_id
    assert cv.ts_ms(lease.expires_at) > time.time() * 1000
    renew = client.lease(
        "RenewLease",
        pb.RenewLeaseRequest(
            executor_id="exec-a", leases=[pb.LeaseRef(lease_id=lease.lease_id, fencing_token=lease.fencing_token)]
        ),
    )
    assert renew.leases[0].ok and not renew.leases[0].cancel_requested
    done = _complete(client, lease)
    assert done.run.status == pb.RUN_STATUS_SUCCEEDED and done.run.result == b"done"
    # a second completion of the same lease changes nothing
    with pytest.raises(grpc.RpcError) as err:
        _complete(client, lease)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert client.get_run(lease.run.run_id).status == pb.RUN_STATUS_SUCCEEDED


def test_expired_lease_is_retried_with_larger_token_and_zombie_is_refused(client: Client) -> None:
    client.create_job(_with_ttl(shell_spec("lease-expiry", "true", queue="q-expiry"), 500))
    (first,) = _acquire(client, "zombie", "q-expiry")
    # the zombie never renews: after the TTL the leader expires the lease and the run is retried
    (second,) = _acquire(client, "healthy", "q-expiry", wait_ms=10_000)
    assert second.run.run_id == first.run.run_id
    assert second.fencing_token > first.fencing_token
    assert second.run.attempt == 2
    with pytest.raises(grpc.RpcError) as err:
        _complete(client, first)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as err:  # the right lease id with the zombie's token
        _complete(client, second, token=first.fencing_token)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "fencing token" in err.value.details()
    assert _complete(client, second).run.status == pb.RUN_STATUS_SUCCEEDED
    run = client.get_run(first.run.run_id)
    assert run.status == pb.RUN_STATUS_SUCCEEDED and run.executor_id == "healthy"


def test_failing_run_retries_with_backoff_then_dead_letters(client: Client) -> None:
    spec = _with_ttl(shell_spec("lease-fail", "false", queue="q-fail"), 5000, attempts=3, backoff_ms=400)
    spec.retry.jitter = 0.25
    job = client.create_job(spec)
    starts = []
    for attempt in (1, 2, 3):
        (lease,) = _acquire(client, "exec-f", "q-fail", wait_ms=10_000)
        starts.append(time.monotonic())
        assert lease.run.attempt == attempt
        out = _complete(client, lease, ok=False)
        expected = pb.RUN_STATUS_PENDING if attempt < 3 else pb.RUN_STATUS_DEAD_LETTER
        assert out.run.status == expected
    assert _acquire(client, "exec-f", "q-fail", wait_ms=1500) == []
    run = client.list_runs(job_id=job.job_id)[0]
    assert run.status == pb.RUN_STATUS_DEAD_LETTER and run.attempt == 3
    assert "attempt 3 of 3" in run.error
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    # backoff 400 ms then 800 ms, each +-25 % jitter; plus the round trips
    assert 0.3 <= gaps[0] <= 0.5 + 0.6, gaps
    assert 0.6 <= gaps[1] <= 1.0 + 0.6, gaps


def test_cancel_requested_reaches_the_holder(client: Client) -> None:
    client.create_job(shell_spec("lease-cancel", "true", queue="q-cancel"))
    (lease,) = _acquire(client, "exec-c", "q-cancel")
    run = client.job("CancelRun", pb.CancelRunRequest(run_id=lease.run.run_id))
    assert run.status == pb.RUN_STATUS_LEASED and run.cancel_requested
    renew = client.lease(
        "RenewLease",
        pb.RenewLeaseRequest(
            executor_id="exec-c", leases=[pb.LeaseRef(lease_id=lease.lease_id, fencing_token=lease.fencing_token)]
        ),
    )
    assert renew.leases[0].ok and renew.leases[0].cancel_requested
    out = _complete(client, lease, ok=False)
    assert out.run.status == pb.RUN_STATUS_CANCELLED


def test_long_poll_answers_when_a_run_comes_due(client: Client) -> None:
    spec = shell_spec("lease-poll", "true", queue="q-poll")
    cv.to_dur(1500, spec.after)
    client.create_job(spec)
    started = time.monotonic()
    (lease,) = _acquire(client, "exec-p", "q-poll", wait_ms=20_000)
    waited = time.monotonic() - started
    assert 1.0 <= waited < 3.0, waited  # not before the instant, and not at the end of the poll
    assert cv.ts_ms(lease.run.scheduled_time) <= cv.ts_ms(lease.run.started_at)


BAD = [
    ("no queues", pb.AcquireLeaseRequest(executor_id="e", max_runs=1), "queue"),
    ("empty queue name", pb.AcquireLeaseRequest(executor_id="e", queues=[""], max_runs=1), "queue"),
    ("max_runs 0", pb.AcquireLeaseRequest(executor_id="e", queues=["q"], max_runs=0), "max_runs"),
    ("max_runs too big", pb.AcquireLeaseRequest(executor_id="e", queues=["q"], max_runs=5000), "max_runs"),
    ("no executor id", pb.AcquireLeaseRequest(queues=["q"], max_runs=1), "executor_id"),
]


@pytest.mark.parametrize("label,request_,needle", BAD, ids=[b[0] for b in BAD])
def test_bad_acquire_requests(client: Client, label: str, request_: pb.AcquireLeaseRequest, needle: str) -> None:
    with pytest.raises(grpc.RpcError) as err:
        client.lease("AcquireLease", request_)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, label
    assert needle in err.value.details()


def test_unknown_lease_and_bad_outcome(client: Client) -> None:
    ref = pb.LeaseRef(lease_id="L999999999", fencing_token=1)
    with pytest.raises(grpc.RpcError) as err:
        client.lease("RenewLease", pb.RenewLeaseRequest(executor_id="e", leases=[ref]))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "L999999999" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        client.lease("CompleteRun", pb.CompleteRunRequest(lease_id="L999999999", fencing_token=1, outcome=pb.OUTCOME_SUCCEEDED))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as err:
        client.lease("CompleteRun", pb.CompleteRunRequest(lease_id="L1", fencing_token=1))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "outcome" in err.value.details()


@pytest.mark.parametrize("ttl_ms", [0, -1000])
def test_zero_or_negative_ttl_is_refused(client: Client, ttl_ms: int) -> None:
    spec = shell_spec("bad-ttl", "true")
    cv.to_dur(ttl_ms, spec.lease_ttl)
    with pytest.raises(grpc.RpcError) as err:
        client.create_job(spec)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "lease_ttl" in err.value.details()


def test_executor_process_runs_shell_jobs_and_stores_logs(cluster: LocalCluster, client: Client) -> None:
    job = client.create_job(shell_spec("exec-shell", "echo out-$RAFTSCHED_ATTEMPT; echo oops >&2", queue="q-exec"))
    quiet = client.create_job(at_spec("exec-quiet", now_ms(), queue="q-exec"))  # the built-in no-op type
    proc = start_executor(cluster, cluster.root, "exec-shell", "q-exec")
    try:
        for j in (job, quiet):
            wait_for(
                lambda j=j: [r for r in client.list_runs(job_id=j.job_id) if r.status == pb.RUN_STATUS_SUCCEEDED],
                20,
                f"the run of {j.spec.name} to succeed",
            )
        (run,) = client.list_runs(job_id=job.job_id)
        out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=run.run_id))
        assert out.log == b"out-1\noops\n" and not out.missing_reason
        assert f"attempt-1-token-{run.fencing_token}.log" in out.log_uri
        (silent,) = client.list_runs(job_id=quiet.job_id)  # no log, no result: nothing stored, and nothing is "missing"
        out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=silent.run_id))
        assert (out.log, out.result, out.log_uri, out.missing_reason) == (b"", b"", "data:,", "")
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(15) == 0
