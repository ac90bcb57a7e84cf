"""JobService and ClusterService end to end: real node processes, real gRPC over TCP."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import time

import grpc
import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.cluster.domain import commands as c
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.helpers import at_spec, cron_spec, every_spec, now_ms, shell_spec, wait_for
from tests.history import Expected, IntervalJob, OneOffJob
from tests.history_read import check_cluster

pytestmark = pytest.mark.integration


def _follower_and_other(cluster: LocalCluster) -> tuple[str, str]:
    leader = cluster.wait_leader()
    followers = [n for n in cluster.nodes if n != leader]
    return cluster.nodes[followers[0]].grpc, cluster.nodes[followers[1]].grpc


def test_create_through_follower_read_through_another_node(cluster: LocalCluster) -> None:
    via, other = _follower_and_other(cluster)
    with Client([via]) as a, Client([other]) as b:
        job = a.create_job(cron_spec("nightly", "30 2 * * *", "Europe/Berlin"))
        assert job.job_id and job.status == pb.JOB_STATUS_ACTIVE
        got = b.get_job(job.job_id)  # linearizable read on another follower: no sleep needed
        assert got.job_id == job.job_id
        assert got.spec.cron.expression == "30 2 * * *"
        assert got.spec.cron.timezone == "Europe/Berlin"
        assert got.HasField("next_fire_time")
        assert job.job_id in [j.job_id for j in b.list_jobs(name_prefix="nightly")]


def test_defaults_are_applied(client: Client) -> None:
    job = client.create_job(every_spec("defaults", 3_600_000))
    s = job.spec
    assert s.queue == "default"
    assert cv.dur_ms(s.lease_ttl) == 30_000
    assert s.retry.max_attempts == 3
    assert s.misfire == pb.MISFIRE_POLICY_FIRE_ALL
    assert s.concurrency == pb.CONCURRENCY_POLICY_ALLOW


def test_every_job_fires_once_per_instant_and_is_watchable(cluster: LocalCluster, client: Client) -> None:
    job = client.create_job(every_spec("ticker", 300))
    # the runs fired before the stream opened come first ("existing": a stream may open after the first fires, on
    # a loaded machine), then each fire as it commits; the test reads on until it has seen one of those live
    events = client.watch_runs(job_id=job.job_id, include_existing=True)
    seen: dict[str, pb.Run] = {}
    live: set[str] = set()
    for ev in events:
        if ev.kind == "fired":
            assert ev.run.run_id not in live, ev  # each run is fired once: one fired event
            assert ev.run.status == pb.RUN_STATUS_PENDING
            live.add(ev.run.run_id)
        if ev.kind in ("existing", "fired"):
            seen.setdefault(ev.run.run_id, ev.run)
        if len(seen) >= 3 and live:
            events.cancel()
            break
    fired = sorted(seen.values(), key=lambda r: cv.ts_ms(r.scheduled_time))[:3]
    instants = [cv.ts_ms(r.scheduled_time) for r in fired]
    created = cv.ts_ms(job.created_at)
    assert instants == [created + 300 * k for k in (1, 2, 3)]
    for r in fired:
        assert r.run_id == f"{job.job_id}@{cv.ts_ms(r.scheduled_time)}"
        # the look-ahead may commit a fire a little early, never more than 100 ms
        assert cv.ts_ms(r.fired_at) >= cv.ts_ms(r.scheduled_time) - 100
    client.job("PauseJob", pb.PauseJobRequest(job_id=job.job_id))
    runs = client.list_runs(job_id=job.job_id)
    times = [cv.ts_ms(r.scheduled_time) for r in runs if r.status != pb.RUN_STATUS_SKIPPED]
    assert times == sorted(times)  # ListRuns answers in scheduled order
    # one run per instant, none missing from the first on, the same on every node
    check_cluster(cluster, Expected(interval=[IntervalJob(job.job_id, 300, first_ms=created + 300, min_fired=3)]))


def test_one_off_job_fires_once_and_completes(cluster: LocalCluster, client: Client) -> None:
    job = client.create_job(at_spec("once", now_ms() + 500))
    wait_for(lambda: client.get_job(job.job_id).status == pb.JOB_STATUS_COMPLETED, 10, "the at-job to complete")
    check_cluster(cluster, Expected(one_off=[OneOffJob(job.job_id, at_ms=cv.ts_ms(job.spec.at))]))


def test_pause_resume_delete_trigger_cancel(client: Client) -> None:
    job = client.create_job(every_spec("lifecycle", 3_600_000))
    jid = job.job_id
    assert client.job("PauseJob", pb.PauseJobRequest(job_id=jid)).status == pb.JOB_STATUS_PAUSED
    assert client.job("ResumeJob", pb.ResumeJobRequest(job_id=jid)).status == pb.JOB_STATUS_ACTIVE
    run = client.job("TriggerJob", pb.TriggerJobRequest(job_id=jid))
    assert run.manual and run.status == pb.RUN_STATUS_PENDING
    cancelled = client.job("CancelRun", pb.CancelRunRequest(run_id=run.run_id))
    assert cancelled.status == pb.RUN_STATUS_CANCELLED
    with pytest.raises(grpc.RpcError) as err:
        client.job("CancelRun", pb.CancelRunRequest(run_id=run.run_id))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    deleted = client.job("DeleteJob", pb.DeleteJobRequest(job_id=jid))
    assert deleted.status == pb.JOB_STATUS_DELETED
    assert client.get_job(jid).status == pb.JOB_STATUS_DELETED  # soft delete: still readable
    with pytest.raises(grpc.RpcError) as err:
        client.job("ResumeJob", pb.ResumeJobRequest(job_id=jid))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_a_read_job_lists_its_next_instants_on_every_node(cluster: LocalCluster, client: Client) -> None:
    job = client.create_job(every_spec("upcoming", 3_600_000))
    first = cv.ts_ms(job.next_fire_time)
    want = [first + k * 3_600_000 for k in range(5)]
    assert [cv.ts_ms(t) for t in job.upcoming] == want  # the create's answer too
    for address in cluster.addresses:
        with Client([address]) as one:
            assert [cv.ts_ms(t) for t in one.get_job(job.job_id).upcoming] == want
    listed = [j for j in client.list_jobs() if j.job_id == job.job_id]
    assert [cv.ts_ms(t) for t in listed[0].upcoming] == want
    cron = client.create_job(cron_spec("upcoming-cron", "0 9 * * 1-5", "America/New_York"))
    days = [cv.ts_ms(t) for t in cron.upcoming]
    assert len(days) == 5 and days == sorted(set(days)) and days[0] == cv.ts_ms(cron.next_fire_time)
    paused = client.job("PauseJob", pb.PauseJobRequest(job_id=job.job_id))
    assert not paused.upcoming and not client.get_job(job.job_id).upcoming  # a paused job fires nothing


def test_update_job_changes_schedule(client: Client) -> None:
    job = client.create_job(every_spec("upd", 3_600_000))
    spec = cron_spec("upd", "0 9 * * 1-5", "America/New_York")
    updated = client.job("UpdateJob", pb.UpdateJobRequest(job_id=job.job_id, spec=spec))
    assert updated.spec.cron.expression == "0 9 * * 1-5"
    assert client.get_job(job.job_id).spec.WhichOneof("schedule") == "cron"


def test_idempotency_key(client: Client) -> None:
    spec = every_spec("idem", 3_600_000)
    first = client.create_job(spec, idempotency_key="billing-2026-11")
    again = client.create_job(spec, idempotency_key="billing-2026-11")
    assert again.job_id == first.job_id
    other = every_spec("idem", 7_200_000)
    before = len(client.list_jobs())
    with pytest.raises(grpc.RpcError) as err:
        client.create_job(other, idempotency_key="billing-2026-11")
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "billing-2026-11" in err.value.details()
    assert len(client.list_jobs()) == before


def test_list_jobs_paging_and_filters(client: Client) -> None:
    ids = {client.create_job(every_spec(f"page-{i}", 3_600_000, queue="paging")).job_id for i in range(7)}
    seen, token, pages = [], "", 0
    while True:
        resp = client.job("ListJobs", pb.ListJobsRequest(queue="paging", page_size=3, page_token=token))
        seen += [j.job_id for j in resp.jobs]
        pages += 1
        token = resp.next_page_token
        if not token:
            break
    assert set(seen) == ids and len(seen) == 7 and pages == 3
    assert seen == sorted(seen)


def test_preview_schedule_shows_dst(client: Client) -> None:
    spec = cron_spec("p", "30 2 * * *", "America/New_York")
    after = pb.PreviewScheduleRequest(spec=spec, count=3)
    cv.to_ts(1772_841_600_000, after.after)  # 2026-03-07T00:00Z
    resp = client.job("PreviewSchedule", after)
    times = [cv.ts_ms(t) for t in resp.times]
    # 03-07 02:30 EST, 03-08 (gap) -> 03:00 EDT, 03-09 02:30 EDT
    assert times == [1772_868_600_000, 1772_953_200_000, 1773_037_800_000]
    assert list(resp.notes) == ["", "02:30 skipped by DST: fired at the end of the gap, 03:00 EDT", ""]


BAD_SPECS = [
    ("invalid cron", cron_spec("bad", "61 * * * *"), "61"),
    ("unknown zone", cron_spec("bad", "0 * * * *", "Mars/Olympus"), "Mars/Olympus"),
    ("negative every", every_spec("bad", -1000), "every"),
    ("negative after", None, "negative"),
    ("oversize payload", every_spec("bad", 60_000, payload=b"x" * (1024 * 1024 + 1)), "limit"),
    ("no schedule", pb.JobSpec(name="bad"), "schedule"),
    ("bad queue", every_spec("bad", 60_000, queue="has space"), "queue"),
]


@pytest.mark.parametrize("label,spec,needle", BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
def test_bad_input_is_invalid_argument_and_changes_nothing(
    client: Client, label: str, spec: pb.JobSpec | None, needle: str
) -> None:
    if spec is None:
        spec = pb.JobSpec(name="bad")
        cv.to_dur(-5000, spec.after)
    before = len(client.list_jobs())
    with pytest.raises(grpc.RpcError) as err:
        client.create_job(spec)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, label
    assert needle.lower() in err.value.details().lower(), err.value.details()
    assert len(client.list_jobs()) == before


@pytest.mark.parametrize(
    "method,request_",
    [
        ("GetJob", pb.GetJobRequest(job_id="j-nope")),
        ("PauseJob", pb.PauseJobRequest(job_id="j-nope")),
        ("DeleteJob", pb.DeleteJobRequest(job_id="j-nope")),
        ("TriggerJob", pb.TriggerJobRequest(job_id="j-nope")),
        ("GetRun", pb.GetRunRequest(run_id="j-nope@1")),
        ("CancelRun", pb.CancelRunRequest(run_id="j-nope@1")),
        ("ListRuns", pb.ListRunsRequest(job_id="j-nope")),
        ("UpdateJob", pb.UpdateJobRequest(job_id="j-nope", spec=every_spec("x", 60_000))),
    ],
)
def test_unknown_ids_are_not_found(client: Client, method: str, request_: object) -> None:
    with pytest.raises(grpc.RpcError) as err:
        client.job(method, request_)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "j-nope" in err.value.details()


def test_missing_id_is_invalid_argument(client: Client) -> None:
    with pytest.raises(grpc.RpcError) as err:
        client.job("GetJob", pb.GetJobRequest())
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_cluster_status_from_every_node(cluster: LocalCluster) -> None:
    leader = cluster.wait_leader()
    for node_id in cluster.nodes:
        s = cluster.status(node_id)
        assert s is not None and s.self_id == node_id and s.leader_id == leader
        assert sorted(m.id for m in s.members) == ["n1", "n2", "n3"]
        assert all(m.reachable for m in s.members)
        roles = {m.id: m.role for m in s.members}
        assert roles[leader] == pb.MEMBER_ROLE_LEADER


def test_cluster_status_shows_every_members_version(cluster: LocalCluster) -> None:
    cluster.wait_leader()
    want = f"{importlib.metadata.version('raftsched')} (command format {c.FORMAT_VERSION})"
    deadline = time.monotonic() + 15
    while True:
        versions = {n: {m.id: m.version for m in cluster.status(n).members} for n in cluster.nodes}  # type: ignore[union-attr]
        if all(v == want for node in versions.values() for v in node.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert all(v == want for node in versions.values() for v in node.values()), versions


def test_watch_runs_kinds_filter(client: Client) -> None:
    job = client.create_job(shell_spec("watch-kinds", "true", queue="q-watch-kinds"))
    finished = client.watch_runs(queue="q-watch-kinds", kinds=["leased", "finished"])
    everything = client.watch_runs(queue="q-watch-kinds")
    time.sleep(0.5)  # both subscriptions are in place before the run moves
    req = pb.AcquireLeaseRequest(executor_id="watch-exec", queues=["q-watch-kinds"], max_runs=1)
    cv.to_dur(5000, req.wait)
    (lease,) = client.lease("AcquireLease", req, timeout=15).leases
    client.lease(
        "CompleteRun",
        pb.CompleteRunRequest(
            lease_id=lease.lease_id,
            fencing_token=lease.fencing_token,
            outcome=pb.OUTCOME_SUCCEEDED,
            executor_id=lease.run.executor_id,
        ),
    )

    def kinds_until_finished(stream: object) -> list[str]:
        seen = []
        for ev in stream:  # type: ignore[attr-defined]
            assert ev.run.job_id == job.job_id
            seen.append(ev.kind)
            if ev.kind == "finished":
                stream.cancel()  # type: ignore[attr-defined]
                return seen
        return seen

    assert kinds_until_finished(finished) == ["leased", "finished"]
    assert kinds_until_finished(everything)[-2:] == ["leased", "finished"]
    with pytest.raises(grpc.RpcError) as err:
        next(iter(client.watch_runs(kinds=["fired", "exploded"])))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "exploded" in err.value.details()


def test_cluster_status_counts_jobs_and_runs_on_every_node(fresh_cluster: LocalCluster) -> None:
    c = fresh_cluster
    with Client(c.addresses) as cl:
        job = cl.create_job(at_spec("counted", now_ms() + 3_600_000, queue="q-count"))
        first = cl.job("TriggerJob", pb.TriggerJobRequest(job_id=job.job_id))
        second = cl.job("TriggerJob", pb.TriggerJobRequest(job_id=job.job_id))
        req = pb.AcquireLeaseRequest(executor_id="count-exec", queues=["q-count"], max_runs=1)
        (lease,) = cl.lease("AcquireLease", req).leases
        leader = c.wait_leader()
        wait_for(
            lambda: (
                (s := c.status(leader)) is not None
                and s.jobs == 1
                and s.runs == pb.RunCounts(pending=1, leased=1)
                and dict(s.pending_by_queue) == {"q-count": 1}
            ),
            10,
            "the leader counting 1 PENDING and 1 LEASED run",
        )
        assert "pending by queue: q-count 1" in _cli_status(c.nodes[leader].grpc)
        cl.lease(
            "CompleteRun",
            pb.CompleteRunRequest(
                lease_id=lease.lease_id,
                fencing_token=lease.fencing_token,
                outcome=pb.OUTCOME_SUCCEEDED,
                executor_id=lease.run.executor_id,
            ),
        )
        other = second if lease.run.run_id == first.run_id else first
        cl.job("CancelRun", pb.CancelRunRequest(run_id=other.run_id))
    want = pb.RunCounts(succeeded=1, cancelled=1)

    def counted_everywhere() -> bool:
        for node_id in c.nodes:
            s = c.status(node_id)
            if s is None or s.jobs != 1 or s.runs != want or s.pending_by_queue:
                return False
        return True

    wait_for(counted_everywhere, 15, "every node counting 1 job, 1 succeeded and 1 cancelled run")
    victim = next(n for n in c.nodes if n != c.wait_leader())
    c.kill(victim)
    c.start(victim)  # its counts come back from its snapshot and journal, not from a live tally
    wait_for(counted_everywhere, 30, "the restarted node counting the same runs")
    shown = _cli_status(",".join(c.addresses))
    assert "jobs: 1  runs: succeeded 1, cancelled 1\n" in shown and "pending by queue" not in shown


def _cli_status(addresses: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "raftsched.cluster.app.main", "cluster", "status", "--cluster", addresses],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_prefer_leader_client_sends_to_the_leader(cluster: LocalCluster) -> None:
    leader = cluster.wait_leader()
    follower = next(n for n in cluster.nodes if n != leader)
    addresses = [cluster.nodes[follower].grpc] + [cluster.nodes[n].grpc for n in cluster.nodes if n != follower]
    with Client(addresses, prefer_leader=True) as cl:
        cl._current = 0  # start on a follower
        assert cl.cluster_status().self_id == leader
        assert cl.current_address == cluster.nodes[leader].grpc
    with Client(addresses) as plain:
        plain._current = 0
        assert plain.cluster_status().self_id == follower  # without the option it stays where it is


def test_watch_include_existing_sends_the_active_runs_of_the_filter_only(client: Client) -> None:
    mine = client.create_job(at_spec("existing-mine", now_ms() + 3_600_000, queue="q-existing"))
    other = client.create_job(at_spec("existing-other", now_ms() + 3_600_000, queue="q-existing-other"))
    done = client.create_job(at_spec("existing-done", now_ms() + 3_600_000, queue="q-existing"))
    pending = [client.job("TriggerJob", pb.TriggerJobRequest(job_id=mine.job_id)).run_id for _ in range(2)]
    client.job("TriggerJob", pb.TriggerJobRequest(job_id=other.job_id))
    finished = client.job("TriggerJob", pb.TriggerJobRequest(job_id=done.job_id))
    client.job("CancelRun", pb.CancelRunRequest(run_id=finished.run_id))  # terminal: not "existing"
    stream = client.watch_runs(queue="q-existing", include_existing=True)
    seen = []
    for ev in stream:
        if ev.kind != "existing":
            break
        seen.append(ev.run.run_id)
        if len(seen) == len(pending):
            break
    stream.cancel()
    assert sorted(seen) == sorted(pending)
    by_job = client.watch_runs(job_id=mine.job_id, include_existing=True)
    first = next(iter(by_job))
    by_job.cancel()
    assert first.kind == "existing" and first.run.run_id in pending
