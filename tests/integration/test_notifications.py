"""Notifications against a real cluster, a real executor and a real HTTP receiver on loopback: runs that fail
(an http job whose server answers 500) with a notify rule become notify runs, which an executor started with
``--allow-type notify`` POSTs with the event id and an HMAC signature from its ``--notify-secrets`` file. The
leader is SIGKILLed while they flow: each notification is still delivered at least once, and none is made twice.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.cluster.domain.model import NOTIFY_QUEUE
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.conftest import running_cluster
from tests.helpers import start_executor, wait_for

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-for-tests"


class Receiver:
    """An HTTP server on loopback: answers 500 on /fail (the failing jobs' target) and records every POST to
    /hook (the notifications) with its headers."""

    def __init__(self) -> None:
        self.hooks: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path == "/hook":
                    with receiver.lock:
                        receiver.hooks.append(({k: v for k, v in self.headers.items()}, body))
                    self.send_response(204)
                else:
                    self.send_response(500)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.server.shutdown()


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("notify") / "secrets.toml"
    path.write_text(f'hooks = "{SECRET}"\n')
    return str(path)


@pytest.fixture(scope="module")
def notified(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One fresh cluster for the module (the kill test leaves it with a node down: quorum all the same)."""
    with running_cluster(str(tmp_path_factory.mktemp("notify-cluster"))) as c:
        with Client(c.addresses) as client:
            wait_for(lambda: client.cluster_status().command_format >= 5, 30, "the cluster on command format 5")
        yield c


def test_notifications_survive_a_leader_kill_delivered_once_made_once(
    notified: LocalCluster, tmp_path, secrets: str, receiver: Receiver
) -> None:  # type: ignore[no-untyped-def]
    c = notified
    with Client(c.addresses) as client:
        executor = _executor(c, str(tmp_path), secrets)
        try:
            jobs = [_failing_job(client, receiver, i) for i in range(3)]
            time.sleep(2.5)
            c.kill(c.wait_leader())  # SIGKILL while runs fail and notifications are made and delivered
            c.wait_leader(30)
            time.sleep(2.5)
            for job_id in jobs:
                client.job("PauseJob", pb.PauseJobRequest(job_id=job_id))
            failed, notes = _runs(client, jobs)
            assert failed, "no run failed"
            # one notification per failed run and rule: none made twice, none missing
            assert sorted(n.run_id for n in notes) == sorted(f"{r.run_id}#notify-{r.attempt}-dead_letter-0" for r in failed)
            wait_for(lambda: _delivered(receiver) >= {n.run_id for n in notes}, 90, "every notification delivered")
        finally:
            executor.kill()
            executor.wait()
    for headers, body in receiver.hooks:
        assert headers["Raftsched-Signature"] == "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        event = json.loads(body)
        assert event["event"] == "DEAD_LETTER" and event["status"] == "DEAD_LETTER" and event["labels"] == {"suite": "notify"}
        assert headers["Raftsched-Event-Id"].startswith(event["run_id"] + "#notify-")


def _executor(c: LocalCluster, root: str, secrets: str):  # type: ignore[no-untyped-def]
    return start_executor(
        c, root, "notifier", "notify-jobs", "--http-allow", "127.0.0.1/32", "--notify-secrets", secrets,
        "--concurrency", "8", allow=("http", "notify"),
    )  # fmt: skip


def _failing_job(client: Client, receiver: Receiver, i: int) -> str:
    spec = pb.JobSpec(name=f"fails-{i}", queue="notify-jobs", type="http")
    spec.payload = json.dumps({"method": "POST", "url": receiver.url("/fail")}).encode()
    cv.to_dur(1000, spec.every)
    spec.retry.max_attempts = 2  # a notification gets the job's attempts: a delivery cut by the kill is tried again
    cv.to_dur(200, spec.retry.initial_backoff)
    cv.to_dur(400, spec.retry.max_backoff)
    spec.labels["suite"] = "notify"
    spec.notify.add(events=["DEAD_LETTER"], url=receiver.url("/hook"), secret_name="hooks")
    return str(client.job("CreateJob", pb.CreateJobRequest(spec=spec)).job_id)


def _runs(client: Client, jobs: list[str]) -> tuple[list[pb.Run], list[pb.Run]]:
    runs = [r for job_id in jobs for r in client.list_runs(job_id)]
    failed = [r for r in runs if r.status == pb.RUN_STATUS_DEAD_LETTER and r.queue != NOTIFY_QUEUE]
    notes = [r for r in runs if r.queue == NOTIFY_QUEUE]
    return failed, notes


def _delivered(receiver: Receiver) -> set[str]:
    with receiver.lock:
        return {h["Raftsched-Event-Id"] for h, _ in receiver.hooks}


def test_a_secret_the_executor_lacks_fails_the_notification_saying_so(
    cluster: LocalCluster, tmp_path, receiver: Receiver
) -> None:  # type: ignore[no-untyped-def]
    with Client(cluster.addresses) as client:
        wait_for(lambda: client.cluster_status().command_format >= 5, 30, "the cluster on command format 5")
        executor = start_executor(
            cluster, str(tmp_path), "no-secrets", "nothing-here", "--http-allow", "127.0.0.1/32", allow=("notify",)
        )
        try:
            spec = pb.JobSpec(name="notified", queue="nobody-serves", type="noop")
            cv.to_dur(3_600_000, spec.every)
            cv.to_dur(1_000, spec.pending_ttl)
            spec.retry.max_attempts = 1
            spec.notify.add(events=["EXPIRED"], url=receiver.url("/hook"), secret_name="missing")
            job = client.job("CreateJob", pb.CreateJobRequest(spec=spec))
            run = client.job("TriggerJob", pb.TriggerJobRequest(job_id=job.job_id))
            note_id = f"{run.run_id}#notify-0-expired-0"
            wait_for(lambda: _status(client, note_id) == pb.RUN_STATUS_DEAD_LETTER, 30, "the unsigned notification to fail")
            assert "does not hold" in client.get_run(note_id).error and not receiver.hooks
        finally:
            executor.kill()
            executor.wait()
        assert os.path.exists(os.path.join(str(tmp_path), "no-secrets.log"))


def _status(client: Client, run_id: str) -> int:
    try:
        return int(client.get_run(run_id).status)
    except Exception:  # not made yet
        return 0
