"""SIGKILL the leader while jobs come due: no gap, no double fire, nothing acknowledged lost."""

from __future__ import annotations

import time

import grpc
import pytest

from cluster.app.local_cluster import LocalCluster
from protos.raftsched.v1 import scheduler_pb2 as pb
from protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from rpc import convert as cv
from rpc.client.client import Client
from tests.helpers import at_spec, every_spec, now_ms, wait_for

pytestmark = pytest.mark.fault


def _history(client: Client, job_ids: list[str]) -> dict[str, list[tuple[int, int]]]:
    out = {}
    for jid in job_ids:
        out[jid] = sorted((cv.ts_ms(r.scheduled_time), r.status) for r in client.list_runs(job_id=jid))
    return out


def test_leader_sigkill_while_jobs_come_due(fresh_cluster: LocalCluster) -> None:
    c = fresh_cluster
    with Client(c.addresses, deadline_s=30) as client:
        every = [client.create_job(every_spec(f"tick-{i}", 1000)).job_id for i in range(20)]
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

        # every node, the restarted one included, tells the same history
        histories = []
        for node in c.nodes.values():
            with Client([node.grpc]) as one:
                histories.append(_history(one, every + list(one_off_at)))
        assert histories[0] == histories[1] == histories[2]

        for jid in every:
            job = client.get_job(jid)
            runs = client.list_runs(job_id=jid)
            fired = [cv.ts_ms(r.scheduled_time) for r in runs if r.status != pb.RUN_STATUS_SKIPPED]
            skipped = [r for r in runs if r.status == pb.RUN_STATUS_SKIPPED]
            assert not skipped, f"job {jid}: a failover must not skip instants: {skipped[0].error}"
            created = cv.ts_ms(job.created_at)
            expected = [created + 1000 * k for k in range(1, len(fired) + 1)]
            assert fired == expected, f"job {jid}: gap or duplicate in {fired}"
            assert fired[-1] > killed_at + 2000, f"job {jid} stopped firing after the kill"
            assert len({r.run_id for r in runs}) == len(runs)

        for jid, at in one_off_at.items():
            runs = client.list_runs(job_id=jid)
            assert len(runs) == 1, f"one-off {jid} fired {len(runs)} times"
            assert cv.ts_ms(runs[0].scheduled_time) == at
            assert runs[0].status == pb.RUN_STATUS_PENDING


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
