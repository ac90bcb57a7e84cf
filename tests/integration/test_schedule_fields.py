"""Schedules as Temporal's and Dkron's users expect, against a real 3-node cluster through the SDK (gRPC):
bounds, jitter, skip dates and windows, extra crons, max_runs, pause_after_failures, trigger_on_create,
labels and label selectors, a pause with a note and an until, and each job's summary kept by apply."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
import uuid
from typing import Iterator

import pytest

import raftsched
from raftsched import Client, Worker
from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.client import Client as RpcClient
from tests.helpers import wait_for

pytestmark = pytest.mark.integration

QUEUE = "schedule-fields"
UTC = dt.timezone.utc


@pytest.fixture(scope="module")
def sdk(cluster: LocalCluster) -> Iterator[Client]:
    with Client(cluster.addresses) as client:
        wait_for(lambda: client.cluster_status().command_format >= 5, 30, "the cluster on command format 5")
        yield client


@pytest.fixture(scope="module")
def worker(cluster: LocalCluster, sdk: Client) -> Iterator[Worker]:
    w = Worker(queues=[QUEUE], concurrency=4, cluster=cluster.addresses, output_dir=cluster.output_dir, grace=5)

    @w.task("flaky")
    def flaky(payload: dict, ctx: raftsched.Context) -> dict:
        if payload.get("fail"):
            raise raftsched.NonRetryable("told to fail")
        return {"ok": True}

    w.start()
    try:
        yield w
    finally:
        w.stop()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _now() -> dt.datetime:
    return dt.datetime.now(UTC)


def test_bounds_jitter_and_a_skip_window_shape_the_runs(sdk: Client) -> None:
    start = _now().replace(microsecond=0) + dt.timedelta(seconds=2)
    end = start + dt.timedelta(seconds=6)
    skipped_from = start + dt.timedelta(seconds=2, milliseconds=500)
    job = sdk.create_job(
        _name("bounded"), every="1s", queue=QUEUE + "-idle", type="noop",
        start_time=start, end_time=end, jitter="400ms",
        skip_windows=[{"start": skipped_from, "end": skipped_from + dt.timedelta(seconds=2)}],
        labels={"team": "billing", "tier": "gold"},
    )  # fmt: skip
    assert job.spec.extra["labels"] == {"team": "billing", "tier": "gold"} and job.labels["team"] == "billing"
    assert job.next_fire_time is not None and start <= job.next_fire_time < start + dt.timedelta(seconds=1)
    wait_for(lambda: sdk.get_job(job.id).status == "COMPLETED", 20, "the job to complete after its end_time")
    runs = list(sdk.list_runs(job_id=job.id))
    fired = [r for r in runs if r.status != "SKIPPED"]
    assert fired and all(start <= r.scheduled_time <= end for r in runs)
    for r in fired:
        assert r.scheduled_time <= r.not_before < r.scheduled_time + dt.timedelta(milliseconds=400)
        assert r.labels == {"team": "billing", "tier": "gold"}
    skips = [r for r in runs if r.status == "SKIPPED"]
    assert sum(r.skipped_count for r in skips) == 2 and all("skip window" in r.error for r in skips)
    assert sdk.get_job(job.id).skipped_count == 2
    # every 1 s from its anchor (the cluster's clock when it was created: a job's created_at), from start to end:
    # six instants, or seven when the anchor falls on a whole second (the cluster's clock is the latest command's,
    # and a Fire proposed at a whole-second instant may be it); the two in the window are skipped
    assert job.created_at is not None
    grid = [job.created_at + dt.timedelta(seconds=k) for k in range(1, 12)]
    instants = [t for t in grid if start <= t <= end]
    window = [t for t in instants if skipped_from <= t < skipped_from + dt.timedelta(seconds=2)]
    assert len(instants) in (6, 7) and len(window) == 2
    assert sorted(r.scheduled_time for r in fired) == [t for t in instants if t not in window]


def test_label_selectors_pick_jobs_and_runs(sdk: Client) -> None:
    tag = uuid.uuid4().hex[:8]
    a = sdk.create_job(_name("sel"), every="1h", labels={"suite": tag, "env": "prod"}, trigger_on_create=True)
    b = sdk.create_job(_name("sel"), every="1h", labels={"suite": tag, "env": "dev"})
    sdk.create_job(_name("sel"), every="1h", labels={"suite": tag})
    ids = lambda sel: {j.id for j in sdk.list_jobs(label_selector=sel)}  # noqa: E731
    assert ids(f"suite={tag},env=prod") == {a.id}
    assert ids(f"suite={tag},env!=prod") - {a.id} == ids(f"suite={tag},env!=prod") and b.id in ids(f"suite={tag},env!=prod")
    assert len(ids(f"suite={tag},!env")) == 1 and len(ids(f"suite={tag},env")) == 2
    runs = list(sdk.list_runs(label_selector=f"suite={tag}"))  # only a's run on create
    assert [r.job_id for r in runs] == [a.id] and runs[0].manual and runs[0].labels["env"] == "prod"
    with pytest.raises(raftsched.InvalidArgument, match="label_selector"):
        list(sdk.list_jobs(label_selector="Bad Key=x"))


def test_pause_with_a_note_and_until_resumes_by_itself(sdk: Client) -> None:
    job = sdk.create_job(_name("nap"), every="1s", queue=QUEUE + "-idle", type="noop")
    until = _now() + dt.timedelta(seconds=3)
    paused = sdk.pause_job(job.id, note="deploy window", until=until)
    assert paused.status == "PAUSED" and paused.pause_note == "deploy window"
    assert paused.paused_until is not None and abs((paused.paused_until - until).total_seconds()) < 0.01
    wait_for(lambda: sdk.get_job(job.id).status == "ACTIVE", 15, "the job to resume at its until")
    resumed = sdk.get_job(job.id)
    assert resumed.pause_note == "" and resumed.paused_until is None
    assert resumed.next_fire_time is not None
    with pytest.raises(raftsched.InvalidArgument, match="until is not in the future"):
        sdk.pause_job(job.id, until=_now() - dt.timedelta(seconds=5))
    sdk.delete_job(job.id)


def test_max_runs_completes_and_failures_pause_with_a_summary(sdk: Client, worker: Worker) -> None:
    ok = sdk.create_job(_name("thrice"), every="1s", type="flaky", queue=QUEUE, payload={}, max_runs=3)
    wait_for(lambda: sdk.get_job(ok.id).status == "COMPLETED", 20, "the job to complete after 3 runs")
    wait_for(lambda: sdk.get_job(ok.id).success_count == 3, 20, "its three runs to succeed")
    done = sdk.get_job(ok.id)
    assert done.fire_count == 3 and done.failure_count == 0 and done.last_success_time is not None
    bad = sdk.create_job(_name("failing"), every="1s", type="flaky", queue=QUEUE, payload={"fail": True}, pause_after_failures=2)
    wait_for(lambda: sdk.get_job(bad.id).status == "PAUSED", 20, "the job to pause itself after 2 failures")
    paused = sdk.get_job(bad.id)
    assert paused.consecutive_failures >= 2 and paused.failure_count >= 2
    assert "2 failed runs in a row" in paused.pause_note and "told to fail" in paused.last_error
    assert paused.last_failure_time is not None
    sdk.delete_job(bad.id)


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"skip_dates": ["2026-13-01"]}, "skip_dates"),
        ({"skip_windows": [{"start": "2026-01-02T00:00:00Z", "end": "2026-01-01T00:00:00Z"}]}, "skip_windows"),
        ({"start_time": "2026-01-02T00:00:00Z", "end_time": "2026-01-01T00:00:00Z"}, "end_time"),
        ({"jitter": "2s"}, "jitter"),
        ({"labels": {"Team": "x"}}, "label key"),
        ({"labels": {f"k{i}": "v" for i in range(17)}}, "labels"),
        ({"extra_crons": [{"expression": "0 3 * * *"}]}, "extra_crons"),
        ({"priority": 10}, "priority"),
        ({"concurrency_key": "db"}, "concurrency_limit"),
        ({"notify": [{"events": ["NOPE"], "url": "http://127.0.0.1:9/"}]}, "notify"),
        ({"notify": [{"events": ["FAILED"], "url": "ftp://h/x"}]}, "notify"),
    ],
)
def test_bad_fields_are_invalid_argument_naming_the_field(sdk: Client, fields: dict, needle: str) -> None:
    with pytest.raises(raftsched.InvalidArgument, match=needle):
        sdk.create_job(_name("bad"), every="1s", **fields)


def test_extra_crons_fire_at_the_union(sdk: Client) -> None:
    berlin = "Europe/Berlin"
    job = sdk.create_job(_name("union"), cron="0 9 * * MON", tz=berlin, extra_crons=[
        {"expression": "0 12 * * SAT", "timezone": berlin}, {"expression": "0 9 * * MON", "timezone": berlin},
    ])  # fmt: skip
    upcoming = list(job.upcoming)
    assert len(upcoming) == 5 and len(set(upcoming)) == 5 and upcoming == sorted(upcoming)  # the duplicate once
    days = [t.weekday() for t in upcoming]
    assert set(days) == {0, 5} and all(a != b for a, b in zip(days, days[1:]))  # Mondays and Saturdays, in turn


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTSCHED_")} | {"HOME": "/nonexistent"}
    return subprocess.run(
        [sys.executable, "-m", "raftsched.cluster.app.main", *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_the_cli_sets_the_fields_selects_by_label_and_pauses_with_a_note(cluster: LocalCluster, sdk: Client) -> None:
    addrs, tag = ",".join(cluster.addresses), uuid.uuid4().hex[:8]
    made = _cli(
        "job", "create", "--cluster", addrs, "--name", "cli-fields", "--cron", "0 9 * * MON-FRI", "--tz", "Europe/Berlin",
        "--type", "noop", "--extra-cron", "0 12 * * SAT", "--skip-date", "2026-12-25", "--jitter", "1m", "--max-runs", "10",
        "--label", f"suite={tag}", "--label", "team=ops", "-o", "id",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    job = sdk.get_job(made.stdout.strip())
    extra = job.spec.extra
    assert extra["labels"] == {"suite": tag, "team": "ops"} and extra["skip_dates"] == ["2026-12-25"]
    assert extra["extra_crons"] == [{"expression": "0 12 * * SAT", "timezone": "Europe/Berlin"}] and extra["max_runs"] == "10"
    listed = _cli("job", "list", "--cluster", addrs, "-l", f"suite={tag}", "-o", "id")
    assert listed.returncode == 0 and listed.stdout.split() == [job.id], listed.stderr
    until = (_now() + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    paused = _cli("job", "pause", job.id, "--cluster", addrs, "--note", "holiday freeze", "--until", until)
    assert paused.returncode == 0, paused.stderr
    assert sdk.get_job(job.id).pause_note == "holiday freeze"
    bad = _cli("job", "create", "--cluster", addrs, "--every", "1h", "--type", "noop", "--label", "Bad=x")
    assert bad.returncode != 0 and "label key" in bad.stderr


def test_backfill_a_paused_range_and_trigger_with_a_payload(cluster: LocalCluster, sdk: Client) -> None:
    job = sdk.create_job(_name("backfill"), every="1s", queue=QUEUE + "-idle", type="noop", payload={"from": "job"})
    created = job.created_at
    assert created is not None
    sdk.pause_job(job.id)
    time.sleep(3.5)
    sdk.resume_job(job.id)  # the instants while paused are skipped, in one record
    end = _now()
    dry = sdk.backfill_job(job.id, start=created, end=end, dry_run=True)
    assert len(dry.instants) >= 3 and dry.runs == ()
    assert not any(r.backfill for r in sdk.list_runs(job_id=job.id))
    done = sdk.backfill_job(job.id, start=created, end=end)
    assert done.instants == dry.instants and [r.scheduled_time for r in done.runs] == list(done.instants)
    assert all(r.backfill and r.status == "PENDING" and r.id.endswith("-backfill") for r in done.runs)
    assert sdk.backfill_job(job.id, start=created, end=end).instants == ()  # again: nothing is missing
    cli = _cli("job", "backfill", job.id, "--cluster", ",".join(cluster.addresses), "--from", "2020-01-01T00:00:00Z",
               "--to", "2020-01-02T00:00:00Z", "--dry-run")  # fmt: skip
    assert cli.returncode == 0 and "would make 0 run(s)" in cli.stdout, cli.stderr
    run = sdk.trigger_job(job.id, payload={"from": "trigger"})
    assert run.manual and sdk.get_run(run.id).id == run.id
    assert bytes(sdk.get_run(run.id).result_bytes) == b""
    with pytest.raises(raftsched.InvalidArgument, match="end_time is not after start_time"):
        sdk.backfill_job(job.id, start=end, end=created)
    sdk.delete_job(job.id)


def _acquire(cluster: LocalCluster, queue: str, n: int) -> list[pb.Lease]:
    with RpcClient(cluster.addresses) as raw:
        req = pb.AcquireLeaseRequest(executor_id="prio-test", queues=[queue], max_runs=n)
        return list(raw.lease("AcquireLease", req).leases)


def test_priorities_concurrency_keys_and_pending_ttl_through_grpc(cluster: LocalCluster, sdk: Client) -> None:
    queue = _name("prio")
    low = sdk.create_job(_name("low"), every="1h", queue=queue, type="noop")
    high = sdk.create_job(_name("high"), every="1h", queue=queue, type="noop", priority=9)
    keyed = [sdk.create_job(_name("keyed"), every="1h", queue=queue, type="noop", concurrency_key=queue, concurrency_limit=1)
             for _ in range(2)]  # fmt: skip
    for job in (low, keyed[0], keyed[1], high):  # the high one last: it is leased first all the same
        sdk.trigger_job(job.id)
    granted = [lease.run.job_id for lease in _acquire(cluster, queue, 10)]
    assert granted[0] == high.id and low.id in granted and len(granted) == 3  # one of the keyed two: the key's limit
    assert len({keyed[0].id, keyed[1].id} & set(granted)) == 1
    assert _acquire(cluster, queue, 10) == []  # the other keyed run waits for the first to end
    expiring = sdk.create_job(_name("ttl"), every="1h", queue=queue + "-nobody", type="noop", pending_ttl="1s")
    run = sdk.trigger_job(expiring.id)
    wait_for(lambda: sdk.get_run(run.id).status == "EXPIRED", 15, "the run nobody took to expire")
    done = sdk.get_run(run.id)
    assert "pending_ttl" in done.error and sdk.get_job(expiring.id).failure_count == 1
