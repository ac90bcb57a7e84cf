"""Run histories end to end: every attempt kept and readable, runs explained, RetryRun, request ids (one cluster).

Real node processes and a real executor on loopback: a shell job that fails twice and succeeds the third
time, a lease that expires, a FIRE_ONCE catch-up, a FORBID skip, a dead letter retried, and a TriggerJob
whose first answer is lost.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Iterator

import grpc
import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.helpers import at_spec, every_spec, now_ms, shell_spec, start_executor, wait_for

pytestmark = pytest.mark.integration

QUEUE = "q-explain"


@pytest.fixture(scope="module")
def executor(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen[bytes]]:
    with Client(cluster.addresses) as client:
        wait_for(lambda: client.cluster_status().command_format >= 3, 30, "the cluster to switch to command format 3")
    proc = start_executor(cluster, str(tmp_path_factory.mktemp("executor")), "ex-explain", QUEUE)
    try:
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)


def _retrying(spec: pb.JobSpec, attempts: int, backoff_ms: int = 100) -> pb.JobSpec:
    spec.retry.max_attempts = attempts
    cv.to_dur(backoff_ms, spec.retry.initial_backoff)
    cv.to_dur(backoff_ms * 4, spec.retry.max_backoff)
    return spec


def _only_run(client: Client, job_id: str) -> pb.Run:
    runs = wait_for(lambda: client.list_runs(job_id), 20, f"a run of {job_id}")
    assert len(runs) == 1, runs
    return runs[0]


def _ended(client: Client, run_id: str, timeout: float = 30) -> pb.Run:
    terminal = (pb.RUN_STATUS_SUCCEEDED, pb.RUN_STATUS_DEAD_LETTER, pb.RUN_STATUS_CANCELLED, pb.RUN_STATUS_FAILED)
    return wait_for(lambda: (r := client.get_run(run_id)).status in terminal and r, timeout, f"run {run_id} to end")


def test_fails_twice_then_succeeds_three_attempts_each_log_readable_and_explained(
    client: Client, executor: Any, tmp_path: Any
) -> None:
    counter = tmp_path / "count"
    script = f'n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; echo "attempt $n"; [ "$n" -ge 3 ]'
    job = client.create_job(_retrying(shell_spec("fails-twice", script, queue=QUEUE), 3))
    run = _ended(client, _only_run(client, job.job_id).run_id)
    assert run.status == pb.RUN_STATUS_SUCCEEDED and run.attempt == 3
    assert [a.attempt for a in run.attempts] == [1, 2, 3]
    assert [a.outcome for a in run.attempts] == [pb.ATTEMPT_OUTCOME_FAILED] * 2 + [pb.ATTEMPT_OUTCOME_SUCCEEDED]
    assert len({a.fencing_token for a in run.attempts}) == 3 and all(a.executor_id == "ex-explain" for a in run.attempts)
    for a in run.attempts:
        out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=run.run_id, attempt=a.attempt))
        assert out.attempt == a.attempt and out.fencing_token == a.fencing_token and not out.missing_reason
        assert f"attempt {a.attempt}\n".encode() in out.log
    steps = client.explain_run(run.run_id).steps
    kinds = [s.kind for s in steps]
    assert kinds[0] == "fired" and steps[0].node_id  # the leader that fired it
    assert kinds[1:] == ["leased", "failed", "retry_scheduled", "leased", "failed", "retry_scheduled", "leased", "succeeded"]
    leased = [s for s in steps if s.kind == "leased"]
    assert all("'ex-explain'" in s.detail and f"token {a.fencing_token}" in s.detail for s, a in zip(leased, run.attempts))
    waits = [int(re.search(r"backoff of (\d+) ms", steps[i].detail).group(1)) for i in (3, 6)]  # type: ignore[union-attr]
    assert 80 <= waits[0] <= 120 and 160 <= waits[1] <= 240  # 100 ms, then 200 ms, each +-20 % jitter (the default)
    assert [cv.ts_ms(s.at) for s in steps] == sorted(cv.ts_ms(s.at) for s in steps)


def test_an_expired_lease_is_lease_expired_and_a_dead_letter_retried_succeeds(
    client: Client, cluster: LocalCluster, executor: Any, tmp_path: Any
) -> None:
    flag = tmp_path / "ready"
    spec = _retrying(shell_spec("dead-then-retried", f"test -f {flag}", queue="q-zombie"), 1)
    cv.to_dur(600, spec.lease_ttl)
    client.create_job(spec)
    req = pb.AcquireLeaseRequest(executor_id="zombie", queues=["q-zombie"], max_runs=1)
    cv.to_dur(5_000, req.wait)
    (lease,) = client.lease("AcquireLease", req, timeout=15).leases  # never renewed
    run = _ended(client, lease.run.run_id)
    assert run.status == pb.RUN_STATUS_DEAD_LETTER
    assert [(a.executor_id, a.outcome) for a in run.attempts] == [("zombie", pb.ATTEMPT_OUTCOME_LEASE_EXPIRED)]
    kinds = [s.kind for s in client.explain_run(run.run_id).steps]
    assert kinds[-3:] == ["leased", "lease_expired", "dead_letter"]
    flag.write_text("ok")
    retried = client.retry_run(run.run_id)
    assert retried.status == pb.RUN_STATUS_PENDING
    with pytest.raises(grpc.RpcError) as err:
        client.retry_run(run.run_id)  # PENDING: not retryable
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "only DEAD_LETTER" in (err.value.details() or "")
    healthy = start_executor(cluster, str(tmp_path), "ex-healthy", "q-zombie")
    try:
        done = _ended(client, run.run_id)
    finally:
        os.killpg(healthy.pid, signal.SIGTERM)
        healthy.wait(10)
    assert done.status == pb.RUN_STATUS_SUCCEEDED
    assert [(a.executor_id, a.outcome) for a in done.attempts] == [
        ("zombie", pb.ATTEMPT_OUTCOME_LEASE_EXPIRED),
        ("ex-healthy", pb.ATTEMPT_OUTCOME_SUCCEEDED),
    ]
    assert [s.kind for s in client.explain_run(run.run_id).steps][-3:] == ["manual_retry", "leased", "succeeded"]


def test_a_fire_once_catch_up_and_a_forbid_skip_name_their_policy(client: Client) -> None:
    late = client.create_job(at_spec("caught-up", now_ms() - 30_000, misfire=pb.MISFIRE_POLICY_FIRE_ONCE, queue="q-idle"))
    fired = _only_run(client, late.job_id)
    detail = client.explain_run(fired.run_id).steps[0].detail
    assert "missed" in detail and "misfire policy FIRE_ONCE" in detail
    skipped_job = client.create_job(at_spec("skipped", now_ms() - 30_000, misfire=pb.MISFIRE_POLICY_SKIP, queue="q-idle"))
    skipped = _only_run(client, skipped_job.job_id)
    assert skipped.status == pb.RUN_STATUS_SKIPPED and "misfire policy SKIP" in client.explain_run(skipped.run_id).steps[0].detail
    forbid = client.create_job(every_spec("forbidden", 300, concurrency=pb.CONCURRENCY_POLICY_FORBID, queue="q-idle"))
    try:
        runs = wait_for(
            lambda: [r for r in client.list_runs(forbid.job_id) if r.status == pb.RUN_STATUS_SKIPPED], 20, "a FORBID skip"
        )
    finally:
        client.job("DeleteJob", pb.DeleteJobRequest(job_id=forbid.job_id))
    step = client.explain_run(runs[0].run_id).steps[0]
    assert step.kind == "skipped" and "concurrency FORBID" in step.detail


class DropFirstAnswer(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Lets the first call of ``method`` reach the server, then loses its answer (UNAVAILABLE), as a node that
    committed late would; records the request ids it saw."""

    def __init__(self, method: str) -> None:
        self.method, self.dropped, self.request_ids = method, False, []  # type: list[str]

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        answer = continuation(details, request)
        if details.method.endswith("/" + self.method):
            self.request_ids.append(request.request_id)
            if not self.dropped:
                answer.result()  # it was applied
                self.dropped = True
                raise Lost()
        return answer


class Lost(grpc.RpcError):  # type: ignore[misc]
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "the answer was lost on its way (test)"


def test_the_same_request_id_twice_makes_one_run_also_when_the_first_answer_was_lost(
    client: Client, cluster: LocalCluster
) -> None:
    job = client.create_job(every_spec("triggered", 3_600_000, queue="q-idle"))
    first = client.trigger_job(job.job_id, "trigger-once-1")
    again = client.trigger_job(job.job_id, "trigger-once-1")
    assert again.run_id == first.run_id
    with pytest.raises(grpc.RpcError) as err:
        client.job("PauseJob", pb.PauseJobRequest(job_id=job.job_id, request_id="trigger-once-1"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "trigger-once-1" in (err.value.details() or "")
    dropper = DropFirstAnswer("TriggerJob")
    with Client(cluster.addresses) as lossy:
        lossy._jobs = [pb_grpc.JobServiceStub(grpc.intercept_channel(ch, dropper)) for ch in lossy._channels]
        answer = lossy.trigger_job(job.job_id)  # no id given: the client makes one and resends it
    assert dropper.dropped and len(dropper.request_ids) == 2 and len(set(dropper.request_ids)) == 1
    manual = [r for r in client.list_runs(job.job_id) if r.manual]
    assert sorted(r.run_id for r in manual) == sorted({first.run_id, answer.run_id})


def test_every_node_explains_a_run_alike(client: Client, cluster: LocalCluster, executor: Any) -> None:
    job = client.create_job(shell_spec("explained-everywhere", "echo hi", queue=QUEUE))
    run = _ended(client, _only_run(client, job.job_id).run_id)
    time.sleep(0.5)  # every node applied the completion
    answers = []
    for address in cluster.addresses:
        with Client([address]) as one:
            answers.append([json.dumps([s.kind, s.detail, s.node_id, cv.ts_ms(s.at)]) for s in one.explain_run(run.run_id).steps])
    assert answers[0] and all(a == answers[0] for a in answers)


def _raftsched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "raftsched.cluster.app.main", *args], capture_output=True, text=True, timeout=60)


def test_the_cli_explains_a_run_and_retries_a_jobs_dead_letters(client: Client, cluster: LocalCluster) -> None:
    addrs = ",".join(cluster.addresses)
    spec = pb.JobSpec(name="cli-dead", type="shell", queue="q-cli", payload=json.dumps({"command": "exit 3"}).encode())
    cv.to_dur(3_600_000, spec.every)  # runs only when triggered (within the test)
    spec = _retrying(spec, 1)
    cv.to_dur(300, spec.lease_ttl)
    job = client.create_job(spec)
    dead = []
    for _ in range(2):  # two runs that a zombie lets expire: both DEAD_LETTER
        run = client.trigger_job(job.job_id)
        req = pb.AcquireLeaseRequest(executor_id="zombie-cli", queues=["q-cli"], max_runs=1)
        cv.to_dur(5_000, req.wait)
        assert client.lease("AcquireLease", req, timeout=15).leases
        dead.append(_ended(client, run.run_id).run_id)
    table = _raftsched("run", "explain", dead[0], "--cluster", addrs)
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[1].split()
    assert header == ["TIME", "KIND", "DETAIL", "NODE"] and "lease_expired" in table.stdout and "dead_letter" in table.stdout
    as_json = json.loads(_raftsched("run", "explain", dead[0], "--cluster", addrs, "-o", "json").stdout)
    assert [s["kind"] for s in as_json["steps"]][-3:] == ["leased", "lease_expired", "dead_letter"]
    retried = _raftsched(
        "run", "retry", "--job", job.job_id, "--status", "dead_letter", "--request-id", "cli-1", "--cluster", addrs
    )
    assert retried.returncode == 0, retried.stderr
    assert all(run_id in retried.stdout for run_id in dead) and "2 run(s)" in retried.stderr
    assert all(client.get_run(r).status in (pb.RUN_STATUS_PENDING, pb.RUN_STATUS_LEASED) for r in dead)
    single = _raftsched("run", "retry", dead[0], "--request-id", "cli-1", "--cluster", addrs, "-o", "json")
    assert single.returncode == 0, single.stderr  # the same request id as the --job call's: its first answer again
    assert json.loads(single.stdout)["run_id"] == dead[0]
    refused = _raftsched("run", "retry", dead[0], "--cluster", addrs)  # a new request for a PENDING run
    assert refused.returncode != 0 and "only DEAD_LETTER" in refused.stderr
    client.job("DeleteJob", pb.DeleteJobRequest(job_id=job.job_id))
