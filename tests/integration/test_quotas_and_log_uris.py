"""On a running cluster with tiny quotas: max_jobs and max_pending_runs are RESOURCE_EXHAUSTED naming the limit
(on every node, and an idempotent retry still finds its job); a completion whose log_uri lies outside the node's
output store, or inside it but not where that attempt keeps its output, is INVALID_ARGUMENT and leaves the run as it
was."""

from __future__ import annotations

import os
from typing import Iterator

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.conftest import running_cluster

pytestmark = pytest.mark.integration

LIMITS = "\n[limits]\nmax_jobs = 4\nmax_pending_runs = 3\n"


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(str(tmp_path_factory.mktemp("quotas")), LIMITS) as c:
        yield c


def _spec(name: str, queue: str = "q-quota") -> pb.JobSpec:
    spec = pb.JobSpec(name=name, queue=queue, type="noop")
    cv.to_dur(3_600_000, spec.every)
    return spec


def test_a_log_uri_outside_the_store_is_refused_and_the_run_unchanged(small: LocalCluster) -> None:
    with Client(small.addresses) as client:
        job = client.create_job(_spec("uri", queue="q-uri"))
        client.job("TriggerJob", pb.TriggerJobRequest(job_id=job.job_id))
        (lease,) = client.lease(
            "AcquireLease", pb.AcquireLeaseRequest(executor_id="e1", queues=["q-uri"], max_runs=1, wait=cv_dur(5000))
        ).leases
        before = client.get_run(lease.run.run_id)
        name = f"{job.job_id}/{lease.run.run_id}/attempt-1-token-{lease.fencing_token}.log"
        outside = [
            f"file:///etc/{name}",
            f"file://{small.output_dir}/../{name}",
            f"s3://someone-elses-bucket/raftsched/{name}",
            "http://169.254.169.254/latest/meta-data/attempt-1-token-1.log",
        ]
        for uri in outside:
            for node in small.addresses:  # every node refuses it the same way, before Raft
                with Client([node]) as one, pytest.raises(grpc.RpcError) as err:
                    one.lease(
                        "CompleteRun",
                        pb.CompleteRunRequest(
                            lease_id=lease.lease_id,
                            fencing_token=lease.fencing_token,
                            outcome=pb.OUTCOME_SUCCEEDED,
                            log_uri=uri,
                            executor_id=lease.run.executor_id,
                        ),
                    )
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, uri
                assert "log_uri" in err.value.details() and "output store" in err.value.details()
        # inside the store, but another run's place (or another attempt's): an executor may name only its own
        other = client.create_job(_spec("uri-other", queue="q-uri-other"))
        not_its_own = [
            "file://" + os.path.join(small.output_dir, f"{other.job_id}/{other.job_id}@1/attempt-1-token-7.log"),
            "file://"
            + os.path.join(small.output_dir, f"{job.job_id}/{lease.run.run_id}/attempt-2-token-{lease.fencing_token}.log"),
        ]
        for uri in not_its_own:
            with pytest.raises(grpc.RpcError) as err:
                client.lease(
                    "CompleteRun",
                    pb.CompleteRunRequest(
                        lease_id=lease.lease_id,
                        fencing_token=lease.fencing_token,
                        outcome=pb.OUTCOME_SUCCEEDED,
                        log_uri=uri,
                        executor_id=lease.run.executor_id,
                    ),
                )
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, uri
            assert "is not this attempt's output" in err.value.details(), err.value.details()
        after = client.get_run(lease.run.run_id)
        assert after == before  # unchanged: still LEASED, same token, no log_uri
        inside = "file://" + os.path.join(small.output_dir, "e1", name)  # an executor may keep a folder of its own
        done = client.lease(
            "CompleteRun",
            pb.CompleteRunRequest(
                lease_id=lease.lease_id,
                fencing_token=lease.fencing_token,
                outcome=pb.OUTCOME_SUCCEEDED,
                log_uri=inside,
                executor_id=lease.run.executor_id,
            ),
        )
        assert done.run.status == pb.RUN_STATUS_SUCCEEDED and done.run.log_uri == inside


def cv_dur(ms: int) -> Duration:
    out = Duration()
    cv.to_dur(ms, out)
    return out


def test_quotas_are_resource_exhausted_naming_the_limit(small: LocalCluster) -> None:
    with Client(small.addresses) as client:
        first = client.create_job(_spec("quota-0"), idempotency_key="quota-key-0")
        made = client.cluster_status().jobs
        while made < 4:
            client.create_job(_spec(f"quota-{made}"))
            made += 1
        for node in small.addresses:
            with Client([node]) as one, pytest.raises(grpc.RpcError) as err:
                one.job("CreateJob", pb.CreateJobRequest(spec=_spec("one-too-many")))
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max_jobs = 4" in err.value.details()
        again = client.job("CreateJob", pb.CreateJobRequest(spec=_spec("quota-0"), idempotency_key="quota-key-0"))
        assert again.job_id == first.job_id  # a retried create still finds its job at the quota
        resp = client.job("CreateJobs", pb.CreateJobsRequest(jobs=[pb.CreateJobRequest(spec=_spec("batch"))] * 2))
        assert [r.status.code for r in resp.results] == [grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]] * 2
        assert client.cluster_status().jobs == 4

        pending = client.cluster_status().runs.pending
        while pending < 3:
            client.job("TriggerJob", pb.TriggerJobRequest(job_id=first.job_id))
            pending += 1
        with pytest.raises(grpc.RpcError) as err:
            client.job("TriggerJob", pb.TriggerJobRequest(job_id=first.job_id))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_pending_runs = 3" in err.value.details()
        assert client.cluster_status().runs.pending == 3
