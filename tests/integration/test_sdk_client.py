"""The SDK's clients against a real 3-node cluster: ``Client`` and ``AsyncClient`` create, trigger, wait for,
list (page by page), watch, explain and change jobs and runs, with plain objects and the error family; a
``Worker`` in this process runs what they trigger."""

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
from raftsched import AsyncClient, Client, Worker
from raftsched.cluster.app.client_config import client_config_text
from raftsched.cluster.app.local_cluster import LocalCluster
from tests.helpers import wait_for

pytestmark = pytest.mark.integration

QUEUE = "sdk-client"


@pytest.fixture(scope="module")
def worker(cluster: LocalCluster) -> Iterator[Worker]:
    with Client(cluster.addresses) as client:  # runs keep their attempts once the cluster is on command format 3
        wait_for(lambda: client.cluster_status().command_format >= 3, 30, "the cluster on command format 3")
    w = Worker(queues=[QUEUE], concurrency=4, cluster=cluster.addresses, output_dir=cluster.output_dir, grace=5)

    @w.task("echo")
    def echo(payload: dict, ctx: raftsched.Context) -> dict:
        print(f"echo attempt {ctx.attempt}", file=ctx.log)
        return {"echo": payload, "attempt": ctx.attempt}

    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture()
def sdk(cluster: LocalCluster) -> Iterator[Client]:
    with Client(cluster.addresses) as client:
        yield client


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_create_trigger_wait_and_read_back(sdk: Client, worker: Worker) -> None:
    job = sdk.create_job(_name("echo"), every="1h", type="echo", queue=QUEUE, payload={"n": 1}, max_attempts=2)
    assert isinstance(job, raftsched.Job) and job.status == "ACTIVE" and job.queue == QUEUE
    assert job.spec.schedule.every == dt.timedelta(hours=1) and job.spec.retry is not None
    assert job.spec.retry.max_attempts == 2 and job.payload == {"n": 1}

    run = sdk.trigger_job(job.id)
    assert isinstance(run, raftsched.Run) and run.job_id == job.id and run.manual
    done = sdk.wait_run(run.id, timeout=60)
    assert done.status == "SUCCEEDED", done
    assert done.result == {"echo": {"n": 1}, "attempt": 1}
    assert done.attempts and done.attempts[0].outcome == "SUCCEEDED"
    assert isinstance(done.finished_at, dt.datetime) and done.finished_at.tzinfo is not None

    output = sdk.get_run_output(run.id)
    assert output.text == "echo attempt 1\n" and output.result == done.result
    explained = sdk.explain_run(run.id)
    assert [s.kind for s in explained.steps][-1] == "succeeded" and explained.run.id == run.id

    # the same job, with its summary kept as the run ended
    assert sdk.get_job(job.id) == dataclasses.replace(job, success_count=1, last_success_time=done.finished_at)
    changed = sdk.update_job(job.id, payload={"n": 2}, timeout="5m")
    assert changed.payload == {"n": 2} and changed.spec.timeout == dt.timedelta(minutes=5)
    assert changed.spec.schedule.every == dt.timedelta(hours=1)
    assert sdk.pause_job(job.id).status == "PAUSED"
    assert sdk.resume_job(job.id).status == "ACTIVE"
    assert sdk.delete_job(job.id).status == "DELETED"


def test_lists_follow_the_pages(sdk: Client) -> None:
    prefix = _name("paged")
    made = [sdk.create_job(f"{prefix}-{i}", every="1h", queue="sdk-nobody") for i in range(5)]
    listed = list(sdk.list_jobs(name_prefix=prefix, page_size=2))
    assert sorted(j.id for j in listed) == sorted(j.id for j in made)
    runs = [sdk.trigger_job(made[0].id) for _ in range(3)]
    pending = list(sdk.list_runs(job_id=made[0].id, status="PENDING", page_size=2))
    assert sorted(r.id for r in pending) == sorted(r.id for r in runs)
    assert list(sdk.list_runs(job_id=made[0].id, status="FAILED")) == []
    assert [j.id for j in sdk.find_jobs(f"{prefix}-3")] == [made[3].id]


def test_refusals_are_the_error_family_with_the_nodes_message(sdk: Client) -> None:
    with pytest.raises(raftsched.NotFound) as missing:
        sdk.get_job("j-does-not-exist")
    assert "j-does-not-exist" in missing.value.message and missing.value.code == "NOT_FOUND"
    with pytest.raises(raftsched.InvalidArgument, match="cron"):
        sdk.create_job(_name("bad"), cron="61 * * * *")
    key = _name("key")
    first = sdk.create_job("keyed", every="1h", idempotency_key=key, queue="sdk-nobody")
    assert sdk.create_job("keyed", every="1h", idempotency_key=key, queue="sdk-nobody").id == first.id
    with pytest.raises(raftsched.AlreadyExists):
        sdk.create_job("keyed", every="2h", idempotency_key=key, queue="sdk-nobody")
    idle = sdk.create_job(_name("idle"), every="1h", queue="sdk-nobody")
    run = sdk.trigger_job(idle.id)
    with pytest.raises(raftsched.Timeout) as waited:
        sdk.wait_run(run.id, timeout=1)
    assert waited.value.run_id == run.id and waited.value.last_status == "PENDING"
    assert run.id in str(waited.value) and "PENDING" in str(waited.value)
    with pytest.raises(raftsched.FailedPrecondition):
        sdk.retry_run(run.id)  # a pending run cannot be retried


def test_watch_follows_a_jobs_runs(sdk: Client, worker: Worker) -> None:
    job = sdk.create_job(_name("watched"), every="1h", type="echo", queue=QUEUE, payload={"say": "hi"})
    events: list[raftsched.RunEvent] = []
    watch = sdk.watch_runs(job_id=job.id, kinds=["finished"])

    def follow() -> None:
        for event in watch:
            events.append(event)
            watch.close()

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    for _ in range(30):  # a run may end before the stream is set up: trigger until one is seen
        sdk.wait_run(sdk.trigger_job(job.id).id, timeout=30)
        reader.join(1)
        if events:
            break
    watch.close()
    reader.join(5)
    assert events and events[0].kind == "finished" and events[0].run.job_id == job.id
    assert events[0].run.status == "SUCCEEDED" and events[0].run.result == {"echo": {"say": "hi"}, "attempt": 1}


def test_cluster_status_and_schedule_preview(sdk: Client) -> None:
    status = sdk.cluster_status()
    assert isinstance(status, raftsched.ClusterStatus) and status.leader_id and len(status.members) == 3
    assert {m.role for m in status.members} >= {"LEADER"}
    assert sdk.whoami() == raftsched.Identity(tokens_required=False)  # this cluster takes calls without a token
    instants = sdk.preview_schedule(cron="30 2 * * *", tz="Europe/Berlin", count=3, start="2026-03-28T00:00:00Z")
    assert [i.time for i in instants] == [
        dt.datetime(2026, 3, 28, 1, 30, tzinfo=dt.timezone.utc),
        dt.datetime(2026, 3, 29, 1, 0, tzinfo=dt.timezone.utc),  # 02:30 skipped by DST: the end of the gap
        dt.datetime(2026, 3, 30, 0, 30, tzinfo=dt.timezone.utc),
    ]


def test_client_with_no_arguments_finds_the_cluster_as_the_cli_does(
    cluster: LocalCluster, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = os.path.join(str(tmp_path), "client.toml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(client_config_text(cluster.addresses, cluster.output_dir))
    monkeypatch.delenv("RAFTSCHED_CLUSTER", raising=False)
    monkeypatch.setenv("RAFTSCHED_CONFIG", path)
    with Client() as client:
        assert sorted(client.addresses) == sorted(cluster.addresses)
        assert client.cluster_status().leader_id


def test_async_client_has_the_same_methods_as_coroutines(cluster: LocalCluster, worker: Worker) -> None:
    async def scenario() -> None:
        async with AsyncClient(cluster.addresses) as client:
            job = await client.create_job(_name("aio"), every="1h", type="echo", queue=QUEUE, payload={"xs": [1, 2]})
            assert (await client.get_job(job.id)).name == job.name
            triggered = [await client.trigger_job(job.id) for _ in range(3)]
            done = [await client.wait_run(r.id, timeout=60) for r in triggered]
            assert [r.status for r in done] == ["SUCCEEDED"] * 3 and done[0].result == {"echo": {"xs": [1, 2]}, "attempt": 1}
            listed = [r.id async for r in client.list_runs(job_id=job.id, page_size=2)]
            assert sorted(listed) == sorted(r.id for r in triggered)
            assert [j.id async for j in client.list_jobs(name_prefix=job.name, page_size=1)] == [job.id]
            with pytest.raises(raftsched.NotFound):
                await client.get_run("nope@1")
            watch = client.watch_runs(job_id=job.id, kinds=["fired", "finished"])
            seen: list[raftsched.RunEvent] = []

            async def collect() -> None:
                async for event in watch:
                    seen.append(event)
                    if event.kind == "finished":
                        watch.close()

            collector = asyncio.create_task(collect())
            for _ in range(30):  # a run may end before the stream is set up: trigger until one is seen
                await client.wait_run((await client.trigger_job(job.id)).id, timeout=30)
                await asyncio.sleep(0.5)
                if collector.done():
                    break
            await asyncio.wait_for(collector, 10)
            assert seen[-1].kind == "finished" and seen[-1].run.status == "SUCCEEDED"
            assert (await client.cluster_status()).leader_id
            assert await client.whoami() == raftsched.Identity(tokens_required=False)

    asyncio.run(asyncio.wait_for(scenario(), 120))
