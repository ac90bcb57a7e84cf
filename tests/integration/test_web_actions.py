"""The web view's actions end to end: a 3-node cluster with tokens ([auth]) and HTTP endpoints, and Debian's
headless Chromium (``tests.browser``). A submitter limited to one queue signs in, pauses a job through the
confirmation step (gRPC then says PAUSED), triggers it, retries a FAILED run and cancels a PENDING one, each
confirmed and each answered with a flash message; a reader sees no button. Over plain HTTP: a reader's forged
POST is a 403, a POST without the session's CSRF token is a 403, and a confirmation form submitted twice
triggers one run (its request id). A screenshot of each confirmation is saved (the paths are printed)."""

from __future__ import annotations

import http.client
import re
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote, urlencode

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.cluster.app.local_security import Grant
from raftsched.cluster.domain.commands import VERDICT_FORMAT
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.browser import Screenshots, chromium, click_and_wait, require_chromium
from tests.helpers import wait_for

pytestmark = pytest.mark.integration

QUEUE = "q-acts"
GRANTS = {"alice": Grant(("submitter",), queues=(QUEUE,)), "viewer": Grant(("reader",))}


class World:
    """The cluster, an admin client, a job on ``QUEUE`` (no executor serves it), a FAILED run and a PENDING one."""

    def __init__(self, c: LocalCluster, client: Client, job: pb.Job, failed: pb.Run, pending: pb.Run) -> None:
        self.c, self.client, self.job, self.failed, self.pending = c, client, job, failed, pending

    def token(self, name: str) -> str:
        assert self.c.security is not None
        return self.c.security.tokens[name]

    def runs(self) -> list[pb.Run]:
        return self.client.list_runs(job_id=self.job.job_id)


def _failed_run(client: Client, job_id: str) -> pb.Run:
    """A run of the job that an executor (the admin token, by hand) failed, saying no retry can help."""
    run = client.trigger_job(job_id)
    grant = pb.AcquireLeaseRequest(executor_id="admin/by-hand", queues=[QUEUE], max_runs=1)
    cv.to_dur(5000, grant.wait)
    (lease,) = client.lease("AcquireLease", grant, timeout=20).leases
    assert lease.run.run_id == run.run_id
    done = pb.CompleteRunRequest(
        lease_id=lease.lease_id, fencing_token=lease.fencing_token, outcome=pb.OUTCOME_FAILED,
        error="no such table: reports", executor_id="admin/by-hand", non_retryable=True,
    )  # fmt: skip
    failed = client.lease("CompleteRun", done).run
    assert failed.status == pb.RUN_STATUS_FAILED
    return failed


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("web-actions")
    c = LocalCluster.create(str(root / "cluster"), 3, http=True, auth=True, tokens=GRANTS)
    c.start_all()
    try:
        c.wait_leader(30)
        with Client(c.addresses, deadline_s=10, security=c.client_security()) as client:
            # request ids (a form sent twice acts once) and RetryRun need command format 3, non_retryable 4
            wait_for(lambda: client.cluster_status().command_format >= VERDICT_FORMAT, 30, "command format 4")
            spec = pb.JobSpec(name="nightly-<report>", type="noop", queue=QUEUE)
            cv.to_dur(3_600_000, spec.every)
            job = client.create_job(spec)
            failed = _failed_run(client, job.job_id)
            pending = client.trigger_job(job.job_id)
            yield World(c, client, job, failed, pending)
    finally:
        c.stop_all()


class Http:
    """Plain HTTP to one node, as a browser of this site would send it (Host and Origin), no redirects followed."""

    def __init__(self, c: LocalCluster, node_id: str) -> None:
        self.address = c.nodes[node_id].http
        host, port = self.address.rsplit(":", 1)
        self.host, self.port = host, int(port)

    def __call__(
        self, method: str, path: str, cookie: str = "", form: dict[str, str] | None = None
    ) -> tuple[int, http.client.HTTPMessage, str]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            headers = {"Cookie": cookie} if cookie else {}
            body = None
            if form is not None:
                body = urlencode(form).encode()
                headers |= {"Content-Type": "application/x-www-form-urlencoded", "Origin": f"http://{self.address}"}
            conn.request(method, path, body=body, headers=headers)
            answer = conn.getresponse()
            return answer.status, answer.headers, answer.read().decode()
        finally:
            conn.close()

    def sign_in(self, token: str) -> str:
        status, headers, _ = self("POST", "/signin", form={"token": token, "next": "/"})
        assert status == 303, status
        return str(headers["Set-Cookie"]).split(";")[0]


def _hidden(body: str) -> dict[str, str]:
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', body))


def _confirm(driver: Any, button_id: str, shots: Screenshots, name: str) -> str:
    """Click an action's button, check the confirmation page, confirm; the flash message it ends with."""
    from selenium.webdriver.common.by import By

    click_and_wait(driver, driver.find_element(By.ID, button_id))
    question = driver.find_element(By.ID, "confirm-question").text
    shots.take(f"confirm-{name}")
    click_and_wait(driver, driver.find_element(By.ID, "confirm-button"))
    flashes = driver.find_elements(By.CSS_SELECTOR, "#flashes li")
    assert len(flashes) == 1, driver.page_source[:3000]
    return f"{question}\n{flashes[0].text}"


def test_a_submitter_acts_in_chromium_and_a_reader_sees_no_button(world: World, tmp_path: Path) -> None:
    require_chromium()
    from selenium.webdriver.common.by import By

    c, job = world.c, world.job
    driver = chromium(tmp_path)
    shots = Screenshots(driver, tmp_path / "screenshots")
    job_path = "/jobs/" + quote(job.job_id, safe="")
    try:
        driver.get(c.http_url("n1", job_path))
        driver.find_element(By.ID, "token").send_keys(world.token("alice"))
        click_and_wait(driver, driver.find_element(By.ID, "signin-button"))
        assert driver.find_element(By.ID, "job-name").text == "nightly-<report>"
        shots.take("job-as-submitter")

        said = _confirm(driver, "action-pause", shots, "pause")
        assert f"Pause job nightly-<report> ({job.job_id})?" in said
        assert f"Paused job nightly-<report> ({job.job_id}): it is PAUSED." in said
        assert world.client.get_job(job.job_id).status == pb.JOB_STATUS_PAUSED  # as gRPC sees it
        assert driver.find_elements(By.ID, "action-resume") and not driver.find_elements(By.ID, "action-pause")

        before = len(world.runs())
        said = _confirm(driver, "action-trigger", shots, "trigger")
        assert f"Triggered job nightly-<report> ({job.job_id}): run " in said and "is PENDING." in said
        assert len(world.runs()) == before + 1

        driver.get(c.http_url("n1", "/runs/" + quote(world.failed.run_id, safe="")))
        said = _confirm(driver, "action-retry", shots, "retry")
        assert f"Retry run {world.failed.run_id}" in said and "it is PENDING again" in said
        assert world.client.get_run(world.failed.run_id).status == pb.RUN_STATUS_PENDING
        steps = world.client.explain_run(world.failed.run_id)
        assert any("RetryRun by 'alice'" in s.detail for s in steps.steps), steps

        driver.get(c.http_url("n1", "/runs/" + quote(world.pending.run_id, safe="")))
        said = _confirm(driver, "action-cancel", shots, "cancel")
        assert f"Run {world.pending.run_id} is CANCELLED." in said
        assert world.client.get_run(world.pending.run_id).status == pb.RUN_STATUS_CANCELLED

        click_and_wait(driver, driver.find_element(By.ID, "signout"))
        driver.find_element(By.ID, "token").send_keys(world.token("viewer"))
        click_and_wait(driver, driver.find_element(By.ID, "signin-button"))
        for path in (job_path, "/runs/" + quote(world.failed.run_id, safe="")):
            driver.get(c.http_url("n1", path))
            assert "signed in as viewer" in driver.find_element(By.CLASS_NAME, "who").text
            assert driver.find_elements(By.ID, "actions") == [] and driver.find_elements(By.TAG_NAME, "form") == []
        shots.take("job-as-reader")
    finally:
        driver.quit()


def test_forged_and_csrf_less_posts_are_refused_and_a_double_submit_acts_once(world: World) -> None:
    request = Http(world.c, "n2")
    job_path = "/jobs/" + quote(world.job.job_id, safe="")
    reader = request.sign_in(world.token("viewer"))
    status, _, body = request("GET", job_path, reader)
    assert status == 200 and 'id="actions"' not in body
    status, _, body = request("GET", job_path + "/trigger", reader)
    assert status == 403 and "needs the submitter role" in body
    status, _, body = request("POST", job_path + "/trigger", reader, form={"csrf": "forged", "request_id": "web-forged"})
    assert status == 403 and 'id="error-message"' in body

    submitter = request.sign_in(world.token("alice"))
    before = len(world.runs())
    status, _, body = request("POST", job_path + "/trigger", submitter, form={"request_id": "web-no-csrf"})
    assert status == 403 and "CSRF token is missing" in body
    status, _, _ = request("PUT", job_path + "/trigger", submitter)
    assert status == 405
    assert len(world.runs()) == before

    status, _, body = request("GET", job_path + "/trigger", submitter)
    assert status == 200
    form = _hidden(body)
    for _ in range(2):  # a double click: the same form twice
        status, headers, _ = request("POST", job_path + "/trigger", submitter, form=form)
        assert status == 303 and headers["Location"] == job_path
    assert len(world.runs()) == before + 1
    status, _, body = request("GET", job_path, submitter)
    assert body.count("Triggered job") == 2 and 'id="action-resume"' in body  # the same run named twice
