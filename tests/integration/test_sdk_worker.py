"""The SDK's ``Worker`` against a real 3-node cluster, in this process: typed payloads (nested dataclasses),
``async def`` tasks, results as JSON, a payload that does not fit failing its run with the field named, logs
kept, and schedules declared in code matched by name (starting twice, or two workers at once, makes one job;
a changed declaration updates it)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import os
import threading
import uuid
from typing import Iterator

import pytest

import raftsched
from raftsched import Client, Context, NonRetryable, RetryAfter, Worker
from raftsched.cluster.app.local_cluster import LocalCluster
from tests.helpers import wait_for

pytestmark = pytest.mark.integration

QUEUE = "sdk-worker"


@dataclasses.dataclass
class Customer:
    id: int
    name: str = ""


@dataclasses.dataclass
class ReportArgs:
    day: str
    customer: Customer
    pages: int = 1


def _worker(cluster: LocalCluster, **kw: object) -> Worker:
    return Worker(queues=[QUEUE], concurrency=4, cluster=cluster.addresses, output_dir=cluster.output_dir, grace=5, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def worker(cluster: LocalCluster) -> Iterator[Worker]:
    with Client(cluster.addresses) as client:  # runs keep their attempts once the cluster is on command format 3
        wait_for(lambda: client.cluster_status().command_format >= 3, 30, "the cluster on command format 3")
    w = _worker(cluster)

    @w.task("report")
    def report(payload: ReportArgs, ctx: Context) -> dict:
        print(f"report for {payload.customer.name} on {payload.day}", file=ctx.log)
        for page in range(payload.pages):
            ctx.heartbeat({"page": page})
        return {"customer": payload.customer.id, "pages": payload.pages, "resumed_from": ctx.last_heartbeat}

    @w.task("fetch")
    async def fetch(payload: dict, ctx: Context) -> dict:
        await asyncio.sleep(0.05)
        return {"thread": threading.current_thread().name, "got": payload}

    @w.task("refuse")
    def refuse(payload: dict) -> None:
        raise NonRetryable(f"no such customer {payload['customer']}")

    @w.task("resume")
    def resume(payload: object, ctx: Context) -> dict:
        ctx.heartbeat({"reached": ctx.attempt})
        if ctx.attempt == 1:
            raise RuntimeError("the first attempt stops half way")
        return {"resumed_from": ctx.last_heartbeat}

    @w.task("later")
    def later() -> None:
        raise RetryAfter(3, "rate limited")  # more than the job's 1 s backoff

    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture()
def sdk(cluster: LocalCluster) -> Iterator[Client]:
    with Client(cluster.addresses) as client:
        yield client


def _run(sdk: Client, type: str, payload: object, **kw: object) -> raftsched.Run:
    job = sdk.create_job(f"{type}-{uuid.uuid4().hex[:8]}", every="1h", type=type, queue=QUEUE, payload=payload, **kw)
    return sdk.wait_run(sdk.trigger_job(job.id).id, timeout=60)


def test_a_typed_payload_is_decoded_and_the_result_is_json(sdk: Client, worker: Worker) -> None:
    run = _run(sdk, "report", {"day": "2026-11-27", "customer": {"id": 7, "name": "Ada"}, "pages": 3})
    assert run.status == "SUCCEEDED", run.error
    assert run.result == {"customer": 7, "pages": 3, "resumed_from": None}
    assert sdk.get_run_output(run.id).text == "report for Ada on 2026-11-27\n"


def test_an_async_task_runs_on_the_workers_event_loop(sdk: Client, worker: Worker) -> None:
    runs = [_run(sdk, "fetch", {"n": i}) for i in range(3)]
    assert [r.status for r in runs] == ["SUCCEEDED"] * 3
    assert {r.result["thread"] for r in runs} == {"raftsched-worker-loop"}
    assert [r.result["got"] for r in runs] == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_a_payload_that_does_not_fit_fails_its_run_naming_the_field(sdk: Client, worker: Worker) -> None:
    run = _run(sdk, "report", {"day": "d", "customer": {"id": "seven"}}, max_attempts=2)
    assert run.status in ("FAILED", "DEAD_LETTER") and run.result is None
    assert "cannot decode the payload into ReportArgs: field 'customer.id': expected an integer" in run.error


def test_a_non_retryable_failure_is_failed_at_once(sdk: Client, worker: Worker) -> None:
    run = _run(sdk, "refuse", {"customer": 3}, max_attempts=3)
    assert "no such customer 3" in run.error
    assert (run.status, run.attempt) == ("FAILED", 1)


def test_retry_after_holds_the_next_attempt_back(sdk: Client, worker: Worker) -> None:
    run = _run(sdk, "later", None, max_attempts=2, backoff="1s")
    assert run.status == "DEAD_LETTER" and "rate limited" in run.error and len(run.attempts) == 2
    first, second = run.attempts
    assert first.finished_at is not None and second.leased_at is not None
    assert second.leased_at - first.finished_at >= dt.timedelta(seconds=3)  # not before: by the leader's own replicated clock


def test_a_retry_finds_the_last_heartbeat_of_the_attempt_before(sdk: Client, worker: Worker) -> None:
    run = _run(sdk, "resume", None, max_attempts=2, backoff="1s")
    assert run.status == "SUCCEEDED", run.error
    assert run.attempts[0].heartbeat == {"reached": 1} and run.attempts[0].heartbeat_at is not None
    assert run.result == {"resumed_from": {"reached": 1}}


def _declare(w: Worker, name: str, cron: str = "30 2 * * *") -> None:
    w.register("nightly", lambda: None)
    w.schedule(name, cron=cron, tz="Europe/Berlin", task="nightly", payload={"day": "yesterday"})


def test_a_schedule_declared_twice_or_by_two_workers_is_one_job(sdk: Client, cluster: LocalCluster) -> None:
    # nothing of this job is due while the test runs: each worker stops without waiting for its long polls
    name = f"nightly-{uuid.uuid4().hex[:8]}"
    first = _worker(cluster)
    _declare(first, name)
    first.start()
    first.stop(0)
    again = [_worker(cluster) for _ in range(2)]
    for w in again:
        _declare(w, name)
    starting = [threading.Thread(target=w.start) for w in again]
    for t in starting:
        t.start()
    for t in starting:
        t.join(60)
    for w in again:
        w.stop(0)
    jobs = sdk.find_jobs(name)
    assert len(jobs) == 1, jobs
    assert {j.id for w in [first, *again] for j in w.scheduled_jobs} == {jobs[0].id}
    job = jobs[0]
    assert (job.type, job.queue, job.payload) == ("nightly", QUEUE, {"day": "yesterday"})
    assert (job.spec.schedule.cron, job.spec.schedule.tz) == ("30 2 * * *", "Europe/Berlin")

    changed = _worker(cluster)
    _declare(changed, name, cron="45 3 * * *")
    changed.start()
    changed.stop(0)
    jobs = sdk.find_jobs(name)
    assert [j.id for j in jobs] == [job.id] and jobs[0].spec.schedule.cron == "45 3 * * *"

    sdk.delete_job(job.id)
    revived = _worker(cluster)
    _declare(revived, name, cron="45 3 * * *")
    revived.start()
    revived.stop(0)
    live = sdk.find_jobs(name)
    assert len(live) == 1 and live[0].id != job.id and live[0].status == "ACTIVE"


def test_a_worker_that_cannot_tell_where_logs_go_refuses_to_start(
    cluster: LocalCluster, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(str(tmp_path))  # no local-cluster/client.toml here or above
    monkeypatch.setenv("XDG_CONFIG_HOME", os.path.join(str(tmp_path), "config"))
    monkeypatch.delenv("RAFTSCHED_CONFIG", raising=False)
    w = Worker(queues=[QUEUE], cluster=cluster.addresses)
    w.register("noop2", lambda: None)
    with pytest.raises(raftsched.ConfigurationError, match="cannot tell where run logs go, and a worker never drops them"):
        w.start()
    w.stop()
