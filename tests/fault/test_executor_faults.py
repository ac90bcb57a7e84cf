"""Executors and nodes killed with SIGKILL mid-run: at-least-once, one holder at a time, no zombie writes,
and no process of a run left behind by a SIGKILLed executor.

Every test watches its queue's leases on one node it does not kill (``LeaseWatch``) and ends in the
shared history check (``tests.history``): each run fired once, at most one lease holder at a time, with
growing tokens, and the same history on every node.
"""

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
from tests.helpers import shell_spec, start_executor, wait_for
from tests.history import Expected, OneOffJob
from tests.history_read import LeaseWatch, check_cluster
from tests.procs import marker, processes_with, stubborn_command

pytestmark = pytest.mark.fault


def _spec(name: str, command: str, ttl_ms: int, queue: str) -> pb.JobSpec:
    spec = shell_spec(name, command, queue=queue)
    cv.to_dur(ttl_ms, spec.lease_ttl)
    cv.to_dur(200, spec.retry.initial_backoff)
    return spec


def _once(job: pb.Job, status: str) -> Expected:
    """A one-off job due at its creation, whose one run ends ``status``."""
    return Expected(one_off=[OneOffJob(job.job_id, cv.ts_ms(job.created_at) + cv.dur_ms(job.spec.after), status)])


def _stop(proc) -> None:  # type: ignore[no-untyped-def]
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def test_sigkilled_executor_loses_lease_and_another_completes(fresh_cluster: LocalCluster, tmp_path) -> None:
    c = fresh_cluster
    root = str(tmp_path)
    cmd = 'if [ "$RAFTSCHED_ATTEMPT" = 1 ]; then sleep 60; fi; echo finished by attempt $RAFTSCHED_ATTEMPT'
    with Client(c.addresses) as client, LeaseWatch(c.addresses[0], "q-kill") as watch:
        job = client.create_job(_spec("killed-exec", cmd, 1500, "q-kill"))
        watch.wait_seen()
        a = start_executor(c, root, "exec-a", "q-kill")
        b = None
        try:
            leased = wait_for(
                lambda: [r for r in client.list_runs(job_id=job.job_id) if r.status == pb.RUN_STATUS_LEASED], 20, "exec-a's lease"
            )[0]
            assert leased.executor_id == "exec-a"
            os.kill(a.pid, signal.SIGKILL)
            a.wait()
            b = start_executor(c, root, "exec-b", "q-kill")
            done = wait_for(
                lambda: [r for r in client.list_runs(job_id=job.job_id) if r.status == pb.RUN_STATUS_SUCCEEDED],
                30,
                "exec-b to finish",
            )[0]
            assert done.executor_id == "exec-b" and done.attempt == 2
            assert done.fencing_token > leased.fencing_token
            out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=done.run_id))
            assert out.log == b"finished by attempt 2\n"
            # the killed executor's late completion is refused and changes nothing
            with pytest.raises(grpc.RpcError) as err:
                client.lease(
                    "CompleteRun",
                    pb.CompleteRunRequest(
                        lease_id=leased.lease_id, fencing_token=leased.fencing_token, outcome=pb.OUTCOME_FAILED, error="zombie"
                    ),
                )
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            after = client.get_run(done.run_id)
            assert after.status == pb.RUN_STATUS_SUCCEEDED and after.fencing_token == done.fencing_token
            watch.wait_finished(done.run_id)
            leases = watch.leases()
            assert [(lease.attempt, lease.executor_id) for lease in leases] == [(1, "exec-a"), (2, "exec-b")], leases
            check_cluster(c, _once(job, "SUCCEEDED"), leases=leases)
        finally:
            _stop(a)
            if b is not None:
                _stop(b)


def test_renewing_run_survives_leader_sigkill_and_is_never_handed_out_twice(fresh_cluster: LocalCluster, tmp_path) -> None:
    c = fresh_cluster
    root = str(tmp_path)
    marks = tmp_path / "starts.txt"
    cmd = f"echo start-$RAFTSCHED_ATTEMPT >> {marks}; sleep 7; echo done"
    watched = next(n for n in c.nodes if n != c.wait_leader())  # the leader is killed below: watch a follower
    with Client(c.addresses, deadline_s=30) as client, LeaseWatch(c.nodes[watched].grpc, "q-long") as watch:
        job = client.create_job(_spec("long-run", cmd, 2000, "q-long"))
        watch.wait_seen()
        execs = [start_executor(c, root, f"exec-{i}", "q-long") for i in range(2)]
        try:
            wait_for(lambda: marks.exists(), 20, "the run to start")
            time.sleep(0.5)
            leader = c.wait_leader()
            c.kill(leader)  # SIGKILL the leader mid-run: renewals fail until a new leader is elected
            c.wait_leader(among=[n for n in c.nodes if n != leader])
            c.start(leader)
            done = wait_for(
                lambda: [r for r in client.list_runs(job_id=job.job_id) if r.status == pb.RUN_STATUS_SUCCEEDED],
                40,
                "the run to finish",
            )[0]
            assert done.attempt == 1, f"the run was handed out again: attempt {done.attempt}"
            assert marks.read_text().split() == ["start-1"]
            watch.wait_finished(done.run_id)
            check_cluster(c, _once(job, "SUCCEEDED"), leases=watch.leases())
        finally:
            for e in execs:
                _stop(e)


def test_cancel_stops_a_running_shell_job(cluster_for_cancel: tuple[LocalCluster, str]) -> None:
    c, root = cluster_for_cancel
    with Client(c.addresses) as client, LeaseWatch(c.addresses[0], "q-cancel-run") as watch:
        job = client.create_job(_spec("cancel-me", "sleep 60", 3000, "q-cancel-run"))
        watch.wait_seen()
        e = start_executor(c, root, "exec-cancel", "q-cancel-run")
        try:
            run = wait_for(
                lambda: [r for r in client.list_runs(job_id=job.job_id) if r.status == pb.RUN_STATUS_LEASED], 20, "the lease"
            )[0]
            started = time.monotonic()
            client.job("CancelRun", pb.CancelRunRequest(run_id=run.run_id))
            wait_for(lambda: client.get_run(run.run_id).status == pb.RUN_STATUS_CANCELLED, 10, "the run to be cancelled")
            assert time.monotonic() - started < 5  # the next renewal (every TTL/3) carried the request
            watch.wait_finished(run.run_id)
            check_cluster(c, _once(job, "CANCELLED"), leases=watch.leases())
        finally:
            _stop(e)


def test_sigterm_lets_running_work_finish(cluster_for_cancel: tuple[LocalCluster, str]) -> None:
    c, root = cluster_for_cancel
    with Client(c.addresses) as client, LeaseWatch(c.addresses[0], "q-term") as watch:
        job = client.create_job(_spec("finish-me", "sleep 1.5; echo finished", 5000, "q-term"))
        watch.wait_seen()
        e = start_executor(c, root, "exec-term", "q-term")
        wait_for(lambda: [r for r in client.list_runs(job_id=job.job_id) if r.status == pb.RUN_STATUS_LEASED], 20, "the lease")
        os.kill(e.pid, signal.SIGTERM)
        assert e.wait(30) == 0
        run = client.list_runs(job_id=job.job_id)[0]
        assert run.status == pb.RUN_STATUS_SUCCEEDED and run.attempt == 1
        watch.wait_finished(run.run_id)
        check_cluster(c, _once(job, "SUCCEEDED"), leases=watch.leases())


def test_sigkilled_executor_leaves_no_process_of_its_run(cluster_for_cancel: tuple[LocalCluster, str]) -> None:
    c, root = cluster_for_cancel
    mark = marker()
    spec = _spec("orphan-check", stubborn_command(mark), 1500, "q-orphans")
    spec.retry.max_attempts = 1
    with Client(c.addresses) as client, LeaseWatch(c.addresses[0], "q-orphans") as watch:
        job = client.create_job(spec)
        watch.wait_seen()
        e = start_executor(c, root, "exec-orphans", "q-orphans", "--kill-grace", "1")
        try:
            running = wait_for(lambda: len(processes_with(mark)) >= 3 and processes_with(mark), 20, "the run's processes")
            assert any("trap" in cmd for _, cmd in running), running  # the child that ignores SIGTERM is among them
            os.kill(e.pid, signal.SIGKILL)  # no chance to clean up: the run's supervisor must notice on its own
            e.wait()
            killed = time.monotonic()
            wait_for(lambda: not processes_with(mark), 10, "the run's processes to be gone after the executor's SIGKILL")
            assert time.monotonic() - killed < 1 + 3  # SIGTERM at once, SIGKILL after the 1 s grace
            time.sleep(1)
            assert processes_with(mark) == []
            run = wait_for(
                lambda: [r for r in client.list_runs(job_id=job.job_id) if r.status == pb.RUN_STATUS_DEAD_LETTER],
                20,
                "the lease to expire (its only attempt is used up)",
            )[0]
            assert "lease expired" in run.error and "exec-orphans" in run.error
            watch.wait_finished(run.run_id)
            check_cluster(c, _once(job, "DEAD_LETTER"), leases=watch.leases())
        finally:
            _stop(e)


@pytest.fixture(scope="module")
def cluster_for_cancel(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = str(tmp_path_factory.mktemp("execs"))
    c = LocalCluster.create(os.path.join(root, "cluster"), 3)
    c.start_all()
    try:
        c.wait_leader(30)
        yield c, root
    finally:
        c.stop_all()
