"""Batch calls and group commit end to end: CreateJobs, CompleteRuns, concurrent writes sharing Raft entries."""

from __future__ import annotations

import threading

import grpc
import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.helpers import cron_spec, every_spec, shell_spec

pytestmark = pytest.mark.integration

OK = 0
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]
ALREADY_EXISTS = grpc.StatusCode.ALREADY_EXISTS.value[0]
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION.value[0]


def _follower(cluster: LocalCluster) -> str:
    leader = cluster.wait_leader()
    return cluster.nodes[next(n for n in cluster.nodes if n != leader)].grpc


def test_create_jobs_answers_each_item_and_creates_only_the_good_ones(cluster: LocalCluster, client: Client) -> None:
    taken = every_spec("batch-taken", 3_600_000)
    first = client.create_job(taken, idempotency_key="batch-key-taken")
    bad_cron = cron_spec("batch-bad", "61 * * * *")
    items = [pb.CreateJobRequest(spec=every_spec(f"batch-{i}", 3_600_000), idempotency_key=f"batch-{i}") for i in range(300)]
    items.insert(10, pb.CreateJobRequest(spec=bad_cron))
    items.insert(20, pb.CreateJobRequest(spec=every_spec("other", 7_200_000), idempotency_key="batch-key-taken"))
    items.insert(30, pb.CreateJobRequest(spec=taken, idempotency_key="batch-key-taken"))
    before = len(client.list_jobs())
    with Client([_follower(cluster)]) as follower:
        resp = follower.job("CreateJobs", pb.CreateJobsRequest(jobs=items))
    assert len(resp.results) == len(items)
    codes = [r.status.code for r in resp.results]
    assert codes[10] == INVALID_ARGUMENT and "cron" in resp.results[10].status.message
    assert codes[20] == ALREADY_EXISTS and "batch-key-taken" in resp.results[20].status.message
    assert codes[30] == OK and resp.results[30].job.job_id == first.job_id  # same key, same spec: the first job
    good = [r.job for i, r in enumerate(resp.results) if i not in (10, 20, 30)]
    assert all(r.status.code == OK for i, r in enumerate(resp.results) if i not in (10, 20)) and len(good) == 300
    assert [j.spec.name for j in good] == [f"batch-{i}" for i in range(300)]  # answers in request order
    assert len({j.job_id for j in good}) == 300
    assert len(client.list_jobs()) == before + 300  # nothing from the refused items
    with Client([n.grpc for n in cluster.nodes.values()][::-1]) as other:
        for job in good[::50]:
            assert other.get_job(job.job_id).spec.name == job.spec.name


@pytest.mark.parametrize("count", [0, 1001])
def test_create_jobs_refuses_an_empty_or_oversized_batch(client: Client, count: int) -> None:
    before = len(client.list_jobs())
    req = pb.CreateJobsRequest(jobs=[pb.CreateJobRequest(spec=every_spec(f"x-{i}", 3_600_000)) for i in range(count)])
    with pytest.raises(grpc.RpcError) as err:
        client.job("CreateJobs", req)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "1000" in err.value.details() or "at least one" in err.value.details()
    assert len(client.list_jobs()) == before


def _acquire(client: Client, queue: str, n: int) -> list[pb.Lease]:
    leases: list[pb.Lease] = []
    while len(leases) < n:
        req = pb.AcquireLeaseRequest(executor_id="batch-exec", queues=[queue], max_runs=n - len(leases))
        cv.to_dur(5000, req.wait)
        got = list(client.lease("AcquireLease", req, timeout=15).leases)
        assert got, f"no run of {queue} became leasable"
        leases += got
    return leases


def _done(lease: pb.Lease, token: int | None = None, outcome: int = pb.OUTCOME_SUCCEEDED) -> pb.CompleteRunRequest:
    return pb.CompleteRunRequest(
        lease_id=lease.lease_id,
        fencing_token=lease.fencing_token if token is None else token,
        outcome=outcome,  # type: ignore[arg-type]
        result=b"r-" + lease.run.run_id.encode(),
        executor_id=lease.run.executor_id,
    )


def test_complete_runs_checks_each_lease_and_refuses_zombies(client: Client) -> None:
    for i in range(6):
        client.create_job(shell_spec(f"batch-complete-{i}", "true", queue="q-batch-complete"))
    leases = _acquire(client, "q-batch-complete", 6)
    assert len({lease.fencing_token for lease in leases}) == 6
    reqs = [_done(lease) for lease in leases]
    reqs[1] = _done(leases[1], token=leases[1].fencing_token + 1)  # a wrong fencing token
    reqs[2] = _done(leases[2], outcome=pb.OUTCOME_UNSPECIFIED)
    resp = client.lease("CompleteRuns", pb.CompleteRunsRequest(runs=reqs))
    codes = [r.status.code for r in resp.results]
    assert codes == [OK, FAILED_PRECONDITION, INVALID_ARGUMENT, OK, OK, OK]
    for i in (0, 3, 4, 5):
        run = client.get_run(leases[i].run.run_id)
        assert run.status == pb.RUN_STATUS_SUCCEEDED and run.result == b"r-" + leases[i].run.run_id.encode()
        assert resp.results[i].run.run_id == leases[i].run.run_id
    for i in (1, 2):  # refused items changed nothing: still leased to us
        assert client.get_run(leases[i].run.run_id).status == pb.RUN_STATUS_LEASED
    # a zombie replaying its completions: every one refused, nothing changes
    again = client.lease("CompleteRuns", pb.CompleteRunsRequest(runs=[_done(leases[0]), _done(leases[3])]))
    assert [r.status.code for r in again.results] == [FAILED_PRECONDITION, FAILED_PRECONDITION]
    assert client.lease("CompleteRuns", pb.CompleteRunsRequest(runs=[_done(leases[1])])).results[0].status.code == OK
    with pytest.raises(grpc.RpcError) as err:
        client.lease("CompleteRuns", pb.CompleteRunsRequest())
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_complete_runs_status_only_answers_without_the_runs(client: Client) -> None:
    """``status_only``: every item still counts (and a stale one is still refused), but no result carries its run."""
    for i in range(3):
        client.create_job(shell_spec(f"batch-status-only-{i}", "true", queue="q-batch-status-only"))
    leases = _acquire(client, "q-batch-status-only", 3)
    reqs = [_done(lease) for lease in leases]
    reqs[2] = _done(leases[2], token=leases[2].fencing_token + 1)
    resp = client.lease("CompleteRuns", pb.CompleteRunsRequest(runs=reqs, status_only=True))
    assert [r.status.code for r in resp.results] == [OK, OK, FAILED_PRECONDITION]
    assert not any(r.HasField("run") for r in resp.results)
    for i in (0, 1):
        run = client.get_run(leases[i].run.run_id)
        assert run.status == pb.RUN_STATUS_SUCCEEDED and run.result == b"r-" + leases[i].run.run_id.encode()
    assert client.get_run(leases[2].run.run_id).status == pb.RUN_STATUS_LEASED
    # without it, the same call answers with the runs
    again = client.lease("CompleteRuns", pb.CompleteRunsRequest(runs=[_done(leases[2])]))
    assert again.results[0].status.code == OK and again.results[0].run.run_id == leases[2].run.run_id


def _parallel(n: int, fn: object) -> list[object]:
    out: list[object] = [None] * n
    start = threading.Barrier(n)

    def run(i: int) -> None:
        start.wait()
        try:
            out[i] = fn(i)  # type: ignore[operator]
        except Exception as exc:  # noqa: BLE001 - reported by the assertions
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_concurrent_writes_sharing_entries_stay_distinct(cluster: LocalCluster) -> None:
    """Concurrent triggers of one job and concurrent grants, through a follower: group commit packs them
    into shared Raft entries, yet every manual run and every fencing token is distinct."""
    with Client([_follower(cluster)]) as follower:
        job = follower.create_job(every_spec("batch-trigger", 3_600_000, queue="q-batch-trigger"))
        runs = _parallel(40, lambda i: follower.job("TriggerJob", pb.TriggerJobRequest(job_id=job.job_id)))
        assert all(isinstance(r, pb.Run) for r in runs), [r for r in runs if not isinstance(r, pb.Run)][:3]
        ids = {r.run_id for r in runs}  # type: ignore[union-attr]
        assert len(ids) == 40 and all(i.startswith(f"{job.job_id}@manual-") for i in ids)
        assert len(follower.list_runs(job_id=job.job_id)) == 40

        def grab(i: int) -> list[pb.Lease]:
            req = pb.AcquireLeaseRequest(executor_id=f"batch-exec-{i}", queues=["q-batch-trigger"], max_runs=5)
            return list(follower.lease("AcquireLease", req).leases)

        grants = _parallel(8, grab)
        assert all(isinstance(g, list) for g in grants), grants
        leases = [lease for g in grants for lease in g]  # type: ignore[union-attr]
        assert len({lease.fencing_token for lease in leases}) == len(leases)
        assert len({lease.run.run_id for lease in leases}) == len(leases) == 40
