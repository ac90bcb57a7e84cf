"""A job's summary, pause, labels and newer schedule fields in the web view, end to end: a 3-node cluster with HTTP
endpoints, jobs created through the public gRPC API with labels, bounds, jitter, skips, extra crons, max_runs,
priority, a concurrency key, a pending TTL and a notify rule; a real executor (shell and notify, with a
``--notify-secrets`` file) whose runs succeed, then a trigger with its own payload that fails and is notified to a
receiver on loopback; a pause with a note and an until; a backfill. Debian's headless Chromium (``tests.browser``)
reads the job page (counts, last error, labels, pause note and until, a row for each field set, the secret's name
and never its value), the jobs page's label filter (by its form and by a label's chip) and a bad selector's 400, and
the run pages of the failed trigger, its notification and a backfilled run. Values are checked against what gRPC
answers. A screenshot of each page is saved in the test's temp dir (the paths are printed)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.cluster.domain.model import NOTIFY_QUEUE
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from raftsched.rpc.http.web import words
from tests.browser import Screenshots, chromium, click_and_wait, require_chromium
from tests.helpers import start_executor, wait_for

pytestmark = pytest.mark.integration

QUEUE, IDLE = "q-summary", "q-summary-idle"
SECRET_NAME, SECRET = "hooks-key", "s3cr3t-value-never-shown"
NOTE = "deploy freeze <b>until</b> the fix"
EVIL = "<script>alert(1)</script>"
LABELS = {"team": "billing", "tier": "gold", "owner": EVIL}
FAILING = json.dumps({"command": "echo 'Traceback: <boom>' >&2; exit 7"}).encode()
HOUR_MS = 3_600_000


class Receiver:
    """An HTTP server on loopback that takes the notifications' POSTs (204) and keeps their bodies."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                receiver.bodies.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@dataclass
class World:
    c: LocalCluster
    #: the job that ran, failed once by hand, was notified and paused; its state as gRPC answers, settled
    billing: pb.Job
    until_ms: int
    failed: pb.Run
    notification: pb.Run
    backfilled: pb.Run
    #: runs of ``billing`` its schedule fired (not by hand, not notifications)
    scheduled: int


def _billing_spec(now_ms: int, hook: str) -> pb.JobSpec:
    spec = pb.JobSpec(name="billing-report", type="shell", queue=QUEUE, payload=json.dumps({"command": "echo ok"}).encode())
    cv.to_dur(1000, spec.every)
    spec.retry.max_attempts = 1
    spec.labels.update(LABELS)
    cv.to_ts(now_ms - 60_000, spec.start_time)
    cv.to_ts(now_ms + 30 * 24 * HOUR_MS, spec.end_time)
    cv.to_dur(200, spec.jitter)
    spec.skip_dates.append("2031-12-25")
    window = spec.skip_windows.add()
    cv.to_ts(now_ms + 24 * HOUR_MS, window.start)
    cv.to_ts(now_ms + 25 * HOUR_MS, window.end)
    spec.max_runs, spec.pause_after_failures, spec.trigger_on_create = 1000, 5, True
    cv.to_dur(600_000, spec.pending_ttl)
    spec.priority, spec.concurrency_key, spec.concurrency_limit = 7, "reports", 2
    spec.notify.add(events=["DEAD_LETTER", "RECOVERED"], url=hook, secret_name=SECRET_NAME)
    return spec


def _idle_spec(name: str, labels: dict[str, str], cron: str = "") -> pb.JobSpec:
    spec = pb.JobSpec(name=name, type="noop", queue=IDLE)
    if cron:
        spec.cron.expression, spec.cron.timezone = cron, "UTC"
        spec.extra_crons.add(expression="30 12 * * *", timezone="UTC")
    else:
        cv.to_dur(HOUR_MS, spec.every)
    spec.labels.update(labels)
    return spec


def _settle(client: Client, job_id: str, receiver: Receiver, now_ms: int) -> tuple[pb.Job, int, pb.Run, pb.Run]:
    """Pause the running job with a note and an until, let its runs end, fail a trigger of its own payload and
    wait for its notification to be delivered: (the job, its until, the failed run, the notification)."""
    wait_for(lambda: client.get_job(job_id).success_count >= 3, 60, "three runs of the job to succeed")
    until_ms = now_ms + HOUR_MS
    pause = pb.PauseJobRequest(job_id=job_id, note=NOTE)
    cv.to_ts(until_ms, pause.until)
    client.job("PauseJob", pause)

    def quiet() -> bool:
        return not [r for r in client.list_runs(job_id) if r.status in (pb.RUN_STATUS_PENDING, pb.RUN_STATUS_LEASED)]

    wait_for(quiet, 60, "the paused job's runs to end")
    failed = client.job("TriggerJob", pb.TriggerJobRequest(job_id=job_id, payload=FAILING))
    wait_for(lambda: client.get_run(failed.run_id).status == pb.RUN_STATUS_DEAD_LETTER, 60, "the trigger to fail")

    def delivered() -> pb.Run | None:
        notes = [r for r in client.list_runs(job_id) if r.queue == NOTIFY_QUEUE]
        return notes[0] if notes and notes[0].status == pb.RUN_STATUS_SUCCEEDED and receiver.bodies else None

    notification = wait_for(delivered, 60, "the notification of the failure to be delivered")
    return client.get_job(job_id), until_ms, client.get_run(failed.run_id), notification


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("web-summary")
    secrets = root / "notify-secrets.toml"
    secrets.write_text(f'{SECRET_NAME} = "{SECRET}"\n')
    receiver = Receiver()
    c = LocalCluster.create(str(root / "cluster"), 3, http=True)
    c.start_all()
    proc = None
    try:
        c.wait_leader(30)
        proc = start_executor(
            c, str(root), "summary-ex", QUEUE, "--http-allow", "127.0.0.1/32", "--notify-secrets", str(secrets),
            allow=("shell", "notify"),
        )  # fmt: skip
        with Client(c.addresses, deadline_s=10) as client:
            wait_for(lambda: client.cluster_status().command_format >= 5, 30, "the cluster on command format 5")
            now_ms = int(time.time() * 1000)
            billing = client.create_job(_billing_spec(now_ms, receiver.url))
            client.create_job(_idle_spec("search-index", {"team": "search", "tier": "low"}))
            client.create_job(_idle_spec("no-labels", {}))
            rollup = client.create_job(_idle_spec("hourly-rollup", {"team": "billing", "tier": "low"}, cron="0 * * * *"))
            backfill = pb.BackfillJobRequest(job_id=rollup.job_id)
            cv.to_ts(now_ms - 3 * HOUR_MS - 60_000, backfill.start_time)
            cv.to_ts(now_ms, backfill.end_time)
            backfilled = client.job("BackfillJob", backfill).runs
            assert backfilled, "the backfill made no run"
            job, until_ms, failed, notification = _settle(client, billing.job_id, receiver, now_ms)
            runs = client.list_runs(billing.job_id)
            scheduled = sum(1 for r in runs if not r.manual and r.queue != NOTIFY_QUEUE and r.status != pb.RUN_STATUS_SKIPPED)
        yield World(c, job, until_ms, failed, notification, backfilled[0], scheduled)
    finally:
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        c.stop_all()
        receiver.server.shutdown()


def _text(driver: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.ID, element_id).text)


def _no_secret_and_no_script(driver: Any) -> None:
    from selenium.webdriver.common.by import By

    assert SECRET not in driver.page_source
    assert driver.find_elements(By.TAG_NAME, "script") == []


def test_the_job_page_shows_the_summary_pause_labels_and_spec_rows_as_grpc_answers(world: World, tmp_path: Path) -> None:
    require_chromium()
    from selenium.webdriver.common.by import By

    job, c = world.billing, world.c
    assert job.status == pb.JOB_STATUS_PAUSED and job.failure_count == 1 and job.success_count >= 3
    assert "command exited with code 7" in job.last_error and job.pause_note == NOTE
    # the page says how long ago the failure was, "now" within a second of it: load it once that second is over
    time.sleep(max(0.0, cv.ts_ms(job.last_failure_time) / 1000 + 1.2 - time.time()))
    driver = chromium(tmp_path)
    shots = Screenshots(driver, tmp_path / "screenshots")
    try:
        driver.get(c.http_url("n2", "/jobs/" + quote(job.job_id, safe="")))  # a follower serves the same page
        assert driver.title == "Job billing-report · raftsched n2"
        assert _text(driver, "job-status") == "PAUSED" and _text(driver, "next-fire") == "none while it is PAUSED"
        assert _text(driver, "pause-note") == NOTE  # as text, never as markup
        until = _text(driver, "paused-until")  # in 59m30s, or a little less on a slow machine
        assert re.fullmatch(rf"resumes by itself at {re.escape(words.utc(world.until_ms))} \(in [1-5]?\dm(\d+s)?\)", until), until
        summary = {k: _text(driver, f"summary-{k}") for k in ("succeeded", "failed", "skipped", "in-a-row", "scheduled-runs")}
        assert summary == {
            "succeeded": str(job.success_count),
            "failed": "1",
            "skipped": str(job.skipped_count),
            "in-a-row": "1 (it pauses itself at 5)",
            "scheduled-runs": f"{world.scheduled} of 1000",
        }
        assert world.scheduled >= 2  # the run on create is triggered: not one of them
        assert _text(driver, "summary-last-success").startswith(words.utc(cv.ts_ms(job.last_success_time)) + " (")
        assert _text(driver, "summary-last-failure").startswith(words.utc(cv.ts_ms(job.last_failure_time)) + " (")
        assert " ago)" in _text(driver, "summary-last-failure")
        assert _text(driver, "summary-last-error") == words.shorten(job.last_error, 160)
        chips = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#labels li.chip")]
        assert chips == [f"owner={EVIL}", "team=billing", "tier=gold"]  # sorted by key, as text
        spec = {e.get_attribute("id")[5:]: e.text for e in driver.find_elements(By.CSS_SELECTOR, "#spec dd")}
        assert spec["start"] == f"no instant before {words.utc(cv.ts_ms(job.spec.start_time))}"
        assert spec["end"] == f"no instant after {words.utc(cv.ts_ms(job.spec.end_time))}: the job is COMPLETED then"
        assert spec["jitter"].startswith("each instant's run becomes leasable up to 200ms after it")
        assert spec["skip-dates"].startswith("2031-12-25 (in UTC): ")
        assert spec["skip-windows"].startswith(f"{words.utc(cv.ts_ms(job.spec.skip_windows[0].start))} to ")
        assert spec["max-runs"].startswith("1000: the job is COMPLETED after 1000 runs of its schedule")
        assert spec["pause-after-failures"] == "after 5 runs in a row end FAILED, DEAD_LETTER or EXPIRED"
        assert spec["trigger-on-create"].startswith("yes")
        assert spec["pending-ttl"].startswith("10m: ")
        assert spec["priority"] == f"7 (0-9): leased before runs of lower priorities in queue {QUEUE}"
        assert spec["concurrency-key"] == "'reports': at most 2 run(s) LEASED at once across every job with this key"
        assert spec["notify-0"] == (
            f"DEAD_LETTER, RECOVERED → {job.spec.notify[0].url}, "
            f"signed with the secret named '{SECRET_NAME}' (its value stays with the executors)"
        )
        assert "extra-crons" not in spec and spec["schedule"].startswith("every 1s")
        _no_secret_and_no_script(driver)
        shots.take("job-summary")

        notes = [r for r in driver.find_elements(By.CSS_SELECTOR, "#runs td.text") if r.text]
        assert "notification of DEAD_LETTER" in [n.text for n in notes]
        click_and_wait(driver, driver.find_element(By.LINK_TEXT, "team=billing"))  # a chip: the jobs carrying it
        assert sorted(a.text for a in driver.find_elements(By.CSS_SELECTOR, "a.job-link")) == ["billing-report", "hourly-rollup"]
        assert driver.find_element(By.ID, "labels-filter").get_attribute("value") == "team=billing"
    finally:
        driver.quit()


def _filter(driver: Any, selector: str) -> list[str]:
    """Type ``selector`` into the jobs page's labels filter and submit it: the job names listed."""
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "labels-filter")
    box.clear()
    box.send_keys(selector)
    click_and_wait(driver, driver.find_element(By.ID, "filter-button"))
    return sorted(a.text for a in driver.find_elements(By.CSS_SELECTOR, "a.job-link"))


def test_the_jobs_page_shows_labels_filters_by_a_selector_and_explains_a_bad_one(world: World, tmp_path: Path) -> None:
    require_chromium()
    from selenium.webdriver.common.by import By

    c = world.c
    driver = chromium(tmp_path)
    shots = Screenshots(driver, tmp_path / "screenshots")
    try:
        driver.get(c.http_url("n1", "/jobs"))
        everyone = sorted(a.text for a in driver.find_elements(By.CSS_SELECTOR, "a.job-link"))
        assert everyone == ["billing-report", "hourly-rollup", "no-labels", "search-index"]
        row = driver.find_element(By.XPATH, "//a[text()='billing-report']/ancestor::tr")
        assert [li.text for li in row.find_elements(By.CSS_SELECTOR, "td.labels li.chip")] == [
            f"owner={EVIL}", "team=billing", "tier=gold",
        ]  # fmt: skip
        rollup = driver.find_element(By.XPATH, "//a[text()='hourly-rollup']/ancestor::tr")
        assert "cron '0 * * * *' UTC +1 cron" in rollup.text
        shots.take("jobs-labels")

        assert _filter(driver, "team=billing,tier!=low") == ["billing-report"]
        assert _filter(driver, "tier!=low") == ["billing-report", "no-labels"]  # a job without tier has no tier=low
        assert _filter(driver, "!team") == ["no-labels"]
        assert _filter(driver, "tier") == ["billing-report", "hourly-rollup", "search-index"]
        assert (
            _filter(driver, "team=nobody") == [] and driver.find_element(By.ID, "no-jobs").text == "No job matches these filters."
        )
        shots.take("jobs-filtered")

        assert _filter(driver, "Bad Key=x") == []
        assert driver.title == "Error 400 · raftsched n1"
        assert _text(driver, "error-message") == (
            "the labels filter term 'Bad Key=x' is not valid: use k=v, k!=v, k or !k with keys of a-z 0-9 . _ / -; "
            "for example team=billing,tier!=low (every term must hold)"
        )
        shots.take("jobs-bad-selector")
    finally:
        driver.quit()
    try:
        urllib.request.urlopen(c.http_url("n1", "/jobs?labels=" + quote(f"{EVIL}=x")), timeout=10)
        raise AssertionError("a bad selector was answered 200")
    except urllib.error.HTTPError as exc:
        body = exc.read().decode()
        assert exc.code == 400 and "&lt;script&gt;alert(1)&lt;/script&gt;=x" in body and EVIL not in body


def test_the_run_pages_show_labels_and_say_what_made_each_run(world: World, tmp_path: Path) -> None:
    require_chromium()
    from selenium.webdriver.common.by import By

    c, failed, note = world.c, world.failed, world.notification
    assert failed.manual and bytes(failed.payload) == FAILING and dict(failed.labels) == LABELS
    driver = chromium(tmp_path)
    shots = Screenshots(driver, tmp_path / "screenshots")
    try:
        driver.get(c.http_url("n1", "/runs/" + quote(failed.run_id, safe="")))
        assert _text(driver, "run-status") == "DEAD_LETTER" and _text(driver, "run-error") == failed.error
        assert [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#run-labels li.chip")] == [
            f"owner={EVIL}", "team=billing", "tier=gold",
        ]  # fmt: skip
        assert _text(driver, "run-origin").startswith("Triggered by hand with its own payload")
        assert json.loads(_text(driver, "run-payload")) == json.loads(FAILING)
        _no_secret_and_no_script(driver)
        shots.take("run-own-payload")

        driver.get(c.http_url("n1", "/runs/" + quote(note.run_id, safe="")))
        assert note.run_id == f"{failed.run_id}#notify-1-dead_letter-0"
        assert _text(driver, "run-status") == "SUCCEEDED" and _text(driver, "run-kind") == "notification of DEAD_LETTER"
        assert _text(driver, "notification-event") == "DEAD_LETTER"
        assert _text(driver, "notification-url") == world.billing.spec.notify[0].url
        assert _text(driver, "notification-secret").startswith(f"the secret named {SECRET_NAME} in the executor's")
        body = json.loads(_text(driver, "notification-body"))
        assert body["run_id"] == failed.run_id and body["labels"] == LABELS and body["status"] == "DEAD_LETTER"
        _no_secret_and_no_script(driver)
        shots.take("run-notification")
        click_and_wait(driver, driver.find_element(By.ID, "notification-of"))
        assert _text(driver, "run-id") == failed.run_id

        driver.get(c.http_url("n1", "/runs/" + quote(world.backfilled.run_id, safe="")))
        assert world.backfilled.backfill and _text(driver, "run-kind") == "backfill of a past instant"
        assert _text(driver, "run-origin").startswith("A backfill: BackfillJob made this run")
        assert [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#run-labels li.chip")] == ["team=billing", "tier=low"]
        shots.take("run-backfill")
    finally:
        driver.quit()
