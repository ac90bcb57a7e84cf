"""SIGKILL the leader while jobs come due: no gap, no double fire, nothing acknowledged lost (``tests.history``)."""

from __future__ import annotations

import time

import grpc
import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.helpers import at_spec, every_spec, now_ms, wait_for
from tests.history import Expected, IntervalJob, OneOffJob
from tests.history_read import check_cluster

pytestmark = pytest.mark.fault


def test_leader_sigkill_while_jobs_come_due(fresh_cluster: LocalCluster) -> None:
    c = fresh_cluster
    with Client(c.addresses, deadline_s=30) as client:
        every = {j.job_id: cv.ts_ms(j.created_at) for j in (client.create_job(every_spec(f"tick-{i}", 1000)) for i in range(20))}
        t0 = now_ms()
        one_off_at = {client.create_job(at_spec(f"once-{i}", t0 + 1500 + i * 30)).job_id: t0 + 1500 + i * 30 for i in range(200)}
        time.sleep(2.5)
        victim = c.wait_leader()
        c.kill(victim)  # SIGKILL mid-stream: one-offs are still coming due
        killed_at = now_ms()
        new_leader = c.wait_leader(among=[n for n in c.nodes if n != victim])
        assert new_leader != victim
        time.sleep(2.0)
        c.start(victim)
        c.wait_leader()
        wait_for(
            lambda: all(client.get_job(j).status == pb.JOB_STATUS_COMPLETED for j in list(one_off_at)[-5:]),
            20,
            "the last one-off jobs to fire",
        )
        time.sleep(1.5)
        for jid in every:
            client.job("PauseJob", pb.PauseJobRequest(job_id=jid))
        assert now_ms() - killed_at > 3000

    # every node, the restarted one included, tells the same history: one run per instant of every interval
    # job from its first on, none skipped, still firing 2 s after the kill; each one-off fired once, at its instant
    ticks = [
        IntervalJob(j, 1000, first_ms=created + 1000, fired_after_ms=killed_at + 2000, skips_allowed=False)
        for j, created in every.items()
    ]
    once = [OneOffJob(j, at_ms=at, status="PENDING") for j, at in one_off_at.items()]
    check_cluster(c, Expected(interval=ticks, one_off=once))


def test_no_quorum_is_unavailable_and_recovers(fresh_cluster: LocalCluster) -> None:
    c = fresh_cluster
    leader = c.wait_leader()
    followers = [n for n in c.nodes if n != leader]
    for n in followers:
        c.kill(n)
    with grpc.insecure_channel(c.nodes[leader].grpc) as ch:
        stub = pb_grpc.JobServiceStub(ch)
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as err:
            stub.CreateJob(pb.CreateJobRequest(spec=every_spec("lonely", 60_000), idempotency_key="lonely-1"), timeout=30)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "retry" in err.value.details()
        assert time.monotonic() - started < 15
        with pytest.raises(grpc.RpcError) as err:
            stub.ListJobs(pb.ListJobsRequest(), timeout=30)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    for n in followers:
        c.start(n)
    c.wait_leader()
    with Client(c.addresses, deadline_s=30) as client:
        # the same idempotency key: at most one job, whether or not the first try committed later
        job = client.create_job(every_spec("lonely", 60_000), idempotency_key="lonely-1")
        assert [j.job_id for j in client.list_jobs(name_prefix="lonely")] == [job.job_id]
    check_cluster(c, Expected(acknowledged=[job.job_id]), job_prefix="lonely")  # on every node, the two restarted ones too
