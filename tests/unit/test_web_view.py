"""The web view without a network: every page rendered from fakes as WSGI answers, with every
user-provided string escaped (a job named ``<script>alert(1)</script>``, its payload, a run's error and
log), no script and nothing fetched from elsewhere, the status and error pages, the attempts and
explanation sections with and without data, and, under [auth], the sign-in form, the session cookie's
attributes, bearer tokens, sign-out, expiry and cross-site sign-ins."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote, unquote, urlencode
from wsgiref.util import setup_testing_defaults

import pytest

from raftsched.cluster.domain.errors import RejectedError, Unavailable
from raftsched.cluster.domain.model import (
    Cron,
    Every,
    Job,
    JobSpec,
    JobStatus,
    RetryPolicy,
    Run,
    RunStatus,
    Schedule,
)
from raftsched.cluster.domain.results import NotFound
from raftsched.cluster.domain.schedule import explain_instant, upcoming
from raftsched.cluster.domain.spec_extras import matches, parse_selector
from raftsched.cluster.node.job_service import Counts, Page
from raftsched.cluster.node.run_output import RunOutput
from raftsched.rpc.http.ops import add_ops_routes
from raftsched.rpc.http.router import Router
from raftsched.rpc.http.web import ClusterOverview, MemberView, Sessions, TokenVerdict, WebAuth, WebView, add_web_routes
from raftsched.rpc.http.web.run_sections import LOG_SHOWN_BYTES
from raftsched.rpc.http.web.signin import safe_next

pytestmark = pytest.mark.unit

NOW = 1_792_800_000_000  # 2026-10-24T00:00:00Z
EVIL = "<script>alert(1)</script>"
EVIL_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


# ------------------------------------------------------------------ fakes


def make_job(job_id: str, name: str, schedule: Schedule, **kw: Any) -> Job:
    spec = JobSpec(name=name, schedule=schedule, type="shell", payload=b'{"command": "echo <b>hi</b>"}', **kw)
    return Job(job_id, spec, JobStatus.ACTIVE, NOW - 60_000, NOW - 1000, NOW + 2000, NOW - 60_000, NOW - 60_000, "", 3)


def make_run(job_id: str, scheduled_ms: int, status: RunStatus = RunStatus.SUCCEEDED, attempt: int = 1) -> Run:
    run = Run(f"{job_id}@{scheduled_ms}", job_id, "default", scheduled_ms, scheduled_ms + 3, status, attempt)
    run.executor_id, run.lease_id, run.fencing_token = "worker-1", "l-77", 41
    run.started_ms, run.finished_ms = scheduled_ms + 10, scheduled_ms + 900
    run.log_uri = f"file:///out/{job_id}/attempt-{attempt}-token-41.log"
    return run


class FakeJobs:
    """A ``JobReader`` over dicts; ``unavailable`` makes every barrier read fail as with no leader."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.runs: dict[str, Run] = {}
        self.logs: dict[str, bytes] = {}
        self.unavailable = False
        #: the spec each preview was shaped by (its bounds, extra crons and skips)
        self.shapes: list[JobSpec | None] = []

    def _check(self) -> None:
        if self.unavailable:
            raise Unavailable("no leader known (term 7)")

    def counts(self) -> Counts:
        return Counts(
            {RunStatus.SUCCEEDED: len(self.runs), RunStatus.PENDING: 2},
            len(self.jobs),
            {"default": 2, "q<&>": 1},
            {},
            {JobStatus.ACTIVE: len(self.jobs)},
        )

    def list_jobs(
        self,
        queue: str = "",
        status: JobStatus | None = None,
        name_prefix: str = "",
        page_size: int = 0,
        page_token: str = "",
        label_selector: str = "",
    ) -> Page:
        self._check()
        selector = parse_selector(label_selector)  # as the job service reads it
        jobs = [
            j
            for j in sorted(self.jobs.values(), key=lambda j: j.job_id)
            if (not queue or j.spec.queue == queue)
            and (status is None or j.status is status)
            and j.spec.name.startswith(name_prefix)
            and matches(selector, j.spec.labels)
        ]
        start = int(page_token or 0)
        return Page(jobs[start : start + page_size], str(start + page_size) if start + page_size < len(jobs) else "")

    def get_job(self, job_id: str) -> Job:
        self._check()
        if job_id not in self.jobs:
            raise RejectedError(NotFound(f"job {job_id} not found"))
        return self.jobs[job_id]

    def list_runs(
        self,
        job_id: str = "",
        status: RunStatus | None = None,
        page_size: int = 0,
        page_token: str = "",
        newest_first: bool = False,
    ) -> Page:
        self._check()
        runs = sorted((r for r in self.runs.values() if r.job_id == job_id), key=lambda r: r.scheduled_ms, reverse=newest_first)
        runs = [r for r in runs if status is None or r.status is status]
        start = int(page_token or 0)
        return Page(runs[start : start + page_size], str(start + page_size) if start + page_size < len(runs) else "")

    def get_run(self, run_id: str) -> Run:
        self._check()
        if run_id not in self.runs:
            raise RejectedError(NotFound(f"run {run_id} not found"))
        return self.runs[run_id]

    def get_run_output(self, run_id: str, attempt: int = 0, offset: int = 0) -> RunOutput:
        run = self.get_run(run_id)
        if attempt and attempt != run.attempt:  # as raftsched.cluster.node.run_output says it
            why = f"only the latest attempt ({run.attempt}) of run {run.run_id} is recorded"
            return RunOutput(run_id, attempt, b"", run.result, run.log_uri, why)
        if run.run_id not in self.logs:
            why = f"output missing: no log is stored for run {run_id} (status {run.status.value})"
            return RunOutput(run_id, run.attempt, b"", b"", "", why)
        log = self.logs[run.run_id]
        live = run.status is RunStatus.LEASED
        return RunOutput(run_id, run.attempt, log, b"" if live else b"result <i>", run.log_uri, "", live, len(log), len(log))

    def preview(
        self, spec_schedule: Schedule, after_ms: int | None, count: int, shape: JobSpec | None = None
    ) -> list[tuple[int, str]]:
        self.shapes.append(shape)
        start = NOW if after_ms is None else after_ms
        times = upcoming(spec_schedule, start, start, count)
        return [(t, explain_instant(spec_schedule, p, t)) for p, t in zip([start] + times, times)]


def overview() -> ClusterOverview:
    members = [
        MemberView("n1", "LEADER", True, "0.1.0 (command format 2)", "127.0.0.1:7001", "127.0.0.1:50051", "127.0.0.1:8081"),
        MemberView("n2", "FOLLOWER", True, "0.1.0 (command format 2)", "127.0.0.1:7002", "127.0.0.1:50052", "127.0.0.1:8082"),
        MemberView("n3", "UNKNOWN", False, "", "127.0.0.1:7003", "127.0.0.1:50053", ""),
    ]
    return ClusterOverview("n1", "n1", 7, 120, 119, 100, True, 2, "", members)


@pytest.fixture()
def world() -> FakeJobs:
    jobs = FakeJobs()
    evil = make_job("j-evil", EVIL, Every(2000))
    cron = make_job("j-cron", "nightly-report", Cron("30 2 * * *", "Europe/Berlin"))
    jobs.jobs = {j.job_id: j for j in (evil, cron)}
    for k in range(30):
        run = make_run("j-evil", NOW - 60_000 + k * 2000)
        jobs.runs[run.run_id] = run
    failed = make_run("j-evil", NOW - 100_000, RunStatus.FAILED, attempt=2)
    failed.error = f"exit status 1: {EVIL}"
    jobs.runs[failed.run_id] = failed
    jobs.logs[failed.run_id] = f"line one\n{EVIL}\n".encode()
    return jobs


def app(jobs: FakeJobs, auth: WebAuth | None = None, scheme: str = "http") -> Router:
    router = Router(None if auth is None else auth.authorize)
    add_ops_routes(router, lambda: SimpleNamespace(serving=True, reason="ok: leader n1"), None)  # type: ignore[arg-type,return-value]
    add_web_routes(router, WebView(jobs, overview, lambda: NOW, "n1", scheme, auth))
    return router


def call(
    app: Any, path: str, method: str = "GET", headers: dict[str, str] | None = None, form: dict[str, str] | None = None
) -> tuple[int, dict[str, list[str]], str]:
    """(status, headers by lower-case name -> values, body) of one WSGI request."""
    environ: dict[str, Any] = {"REQUEST_METHOD": method, "PATH_INFO": unquote(path.split("?")[0])}  # as wsgiref does
    if "?" in path:
        environ["QUERY_STRING"] = path.split("?", 1)[1]
    for key, value in (headers or {}).items():
        environ["HTTP_" + key.upper().replace("-", "_")] = value
    if form is not None:
        import io

        body = urlencode(form).encode()
        environ.update(CONTENT_TYPE="application/x-www-form-urlencoded", CONTENT_LENGTH=str(len(body)))
        environ["wsgi.input"] = io.BytesIO(body)
    setup_testing_defaults(environ)
    got: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]]) -> None:
        got["status"] = int(status.split()[0])
        got["headers"] = {}
        for name, value in response_headers:
            got["headers"].setdefault(name.lower(), []).append(value)

    body = b"".join(app(environ, start_response))
    return got["status"], got["headers"], body.decode()


def assert_safe_page(body: str) -> None:
    """Escaped, script-free, self-contained, readable on a phone."""
    assert "<script" not in body.lower() and EVIL not in body
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in body
    assert re.search(r"<title>[^<]+ · raftsched n1</title>", body)
    assert 'aria-label="Breadcrumb"' in body
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", body.replace('href="http://127.0.0.1:808', "")), (
        "nothing from elsewhere"
    )
    assert '<link rel="stylesheet" href="/static/web.css">' in body


# ------------------------------------------------------------------ pages


def test_the_cluster_page_shows_raft_members_counts_and_queues(world: FakeJobs) -> None:
    status, headers, body = call(app(world), "/")
    assert status == 200 and headers["content-type"] == ["text/html; charset=utf-8"]
    assert_safe_page(body)
    assert (
        "default-src 'none'" in headers["content-security-policy"][0]
        and "script-src" not in headers["content-security-policy"][0]
    )
    assert headers["cache-control"] == ["no-store"] and headers["x-content-type-options"] == ["nosniff"]
    assert '<dd id="leader">n1</dd>' in body and '<dd id="term">7</dd>' in body
    assert '<dd id="commit-index">120</dd>' in body and '<dd id="applied-index">119</dd>' in body
    assert '<a href="http://127.0.0.1:8082/">127.0.0.1:8082</a>' in body  # each member's own web view
    assert "NO: unreachable" in body and '<span class="status status-leader">LEADER</span>' in body
    assert "q&lt;&amp;&gt;" in body and 'href="/jobs?queue=q%3C%26%3E"' in body  # a queue name is escaped in text and URL


def test_the_cluster_page_says_no_leader_and_no_quorum() -> None:
    lonely = ClusterOverview("n2", "", 9, 5, 5, 0, False, 2, "removing n3 (raft 127.0.0.1:7003), begun at entry 4", [])
    router = Router()
    add_web_routes(router, WebView(FakeJobs(), lambda: lonely, lambda: NOW, "n2"))
    status, _, body = call(router, "/")
    assert status == 200 and "none known" in body and "NOT reached" in body and "removing n3" in body


def test_the_jobs_page_lists_filters_and_pages_with_escaped_names(world: FakeJobs) -> None:
    router = app(world)
    status, _, body = call(router, "/jobs")
    assert status == 200
    assert_safe_page(body)
    assert EVIL_ESCAPED in body and 'href="/jobs/j-evil"' in body and "nightly-report" in body
    assert "cron &#39;30 2 * * *&#39; Europe/Berlin" in body and "every 2s" in body
    _, _, body = call(router, "/jobs?name=night")
    assert "nightly-report" in body and "j-evil" not in body
    _, _, body = call(router, "/jobs?status=paused")
    assert 'id="no-jobs"' in body and '<option value="PAUSED" selected>' in body
    for i in range(60):
        world.jobs[f"j-{i:03d}"] = make_job(f"j-{i:03d}", f"bulk-{i}", Every(1000))
    _, _, body = call(router, "/jobs")
    assert body.count('class="job-link"') == 50 and 'id="next-page"' in body
    next_href = re.search(r'href="([^"]+)" id="next-page"', body)
    assert next_href is not None
    _, _, second = call(router, next_href.group(1).replace("&amp;", "&"))
    assert second.count('class="job-link"') == 12 and "First page" in second


def test_a_bad_filter_is_a_400_naming_the_choices(world: FakeJobs) -> None:
    status, _, body = call(app(world), "/jobs?status=" + quote(EVIL))
    assert status == 400 and "ACTIVE, PAUSED, COMPLETED, DELETED" in body
    assert_safe_page(body)


def test_the_job_page_shows_the_spec_next_instants_in_its_zone_and_runs_newest_first(world: FakeJobs) -> None:
    router = app(world)
    status, _, body = call(router, "/jobs/j-evil")
    assert status == 200
    assert_safe_page(body)
    assert f'<span id="job-name">{EVIL_ESCAPED}</span>' in body
    assert "echo &lt;b&gt;hi&lt;/b&gt;" in body  # the payload, as text
    assert "every 2s, counted from" in body and "up to 3 attempts" in body
    scheduled = [m for m in re.findall(r'href="/runs/([^"]+)" class="run-link"', body)]
    assert len(scheduled) == 25 and 'id="next-page"' in body
    instants = [int(s.split("%40")[1]) for s in scheduled]
    assert instants == sorted(instants, reverse=True)  # newest first
    _, _, body = call(router, "/jobs/j-evil?status=FAILED")
    assert body.count('class="run-link"') == 1 and "exit status 1: &lt;script&gt;" in body

    _, _, body = call(router, "/jobs/j-cron")
    assert "in Europe/Berlin, UTC beside" in body
    # 02:30 CEST is 00:30 UTC; on 25 Oct 02:30 comes twice (it fires on the first pass, and the page says
    # so); from then on 02:30 CET is 01:30 UTC
    world.jobs["j-cron"].next_fire_ms = 1_792_801_800_000
    _, _, body = call(router, "/jobs/j-cron")
    assert "Sat 2026-10-24 02:30:00 CEST (UTC+02:00)" in body and "2026-10-24 00:30:00 UTC" in body
    assert "Sun 2026-10-25 02:30:00 CEST (UTC+02:00)" in body and "repeated hour (first pass, CEST)" in body
    assert "Mon 2026-10-26 02:30:00 CET (UTC+01:00)" in body and "2026-10-26 01:30:00 UTC" in body
    assert "minute 30, hour 2, any day of the month, any month, any day of the week" in body


def test_the_job_page_of_a_paused_or_unknown_job(world: FakeJobs) -> None:
    world.jobs["j-cron"].status = JobStatus.PAUSED
    world.jobs["j-cron"].next_fire_ms = None
    _, _, body = call(app(world), "/jobs/j-cron")
    assert "the job is PAUSED" in body and 'id="upcoming"' in body
    status, _, body = call(app(world), "/jobs/" + quote("<img src=x onerror=alert(1)>", safe=""))
    assert status == 404 and "job &lt;img src=x onerror=alert(1)&gt; not found" in body and "<img" not in body
    assert_safe_page(body)


def test_the_run_page_shows_fields_log_result_and_the_sections_to_come(world: FakeJobs) -> None:
    run = world.runs[f"j-evil@{NOW - 100_000}"]
    status, _, body = call(app(world), "/runs/" + quote(run.run_id, safe=""))
    assert status == 200
    assert_safe_page(body)
    assert '<dd id="run-status">FAILED</dd>' in body and '<dd id="run-attempt">2 of at most 3</dd>' in body
    assert '<dd id="run-executor">worker-1</dd>' in body and '<dd id="run-token">41</dd>' in body
    assert f'<dd id="run-error">exit status 1: {EVIL_ESCAPED}</dd>' in body
    assert f'<pre id="run-log">line one\n{EVIL_ESCAPED}\n</pre>' in body
    assert '<pre id="run-result">result &lt;i&gt;</pre>' in body
    assert 'id="attempts-note"' in body and "latest attempt only" in body  # no fake history
    assert 'id="explanation-note"' in body
    assert 'http-equiv="refresh"' not in body  # a finished run does not reload
    assert f'href="/jobs/j-evil">{EVIL_ESCAPED}</a>' in body  # breadcrumb back to its job


def test_the_run_page_shows_an_earlier_attempts_output_when_asked(world: FakeJobs) -> None:
    path = "/runs/" + quote(f"j-evil@{NOW - 100_000}", safe="")
    status, _, body = call(app(world), path + "?attempt=1")
    assert status == 200 and "attempt 1 (the latest is <a" in body
    assert "only the latest attempt (2) of run" in body and 'id="run-log"' not in body
    status, _, body = call(app(world), path + "?attempt=" + quote(EVIL))
    assert status == 400 and "is not a number" in body
    assert_safe_page(body)


def test_the_run_page_of_a_run_still_going_reloads_and_says_why_output_is_missing(world: FakeJobs) -> None:
    run = make_run("j-evil", NOW + 5000, RunStatus.LEASED, attempt=1)
    world.runs[run.run_id] = run
    world.logs[run.run_id] = b"x" * (LOG_SHOWN_BYTES + 5000)
    _, _, body = call(app(world), "/runs/" + quote(run.run_id, safe=""))
    assert '<meta http-equiv="refresh" content="3">' in body and "live: what attempt 1" in body
    assert "bytes not shown" in body and "raftsched run logs" in body
    lost = make_run("j-evil", NOW - 500_000, RunStatus.DEAD_LETTER, attempt=3)
    world.runs[lost.run_id] = lost
    _, _, body = call(app(world), "/runs/" + quote(lost.run_id, safe=""))
    assert '<p class="warn" id="log-missing">output missing: no log is stored' in body


def test_attempts_and_explanation_render_when_the_record_and_service_have_them(world: FakeJobs) -> None:
    run = world.runs[f"j-evil@{NOW - 100_000}"]
    attempt = SimpleNamespace(
        attempt=1, executor_id=EVIL, lease_id="l-1", fencing_token=40, leased_ms=NOW - 99_000, finished_ms=NOW - 98_000,
        outcome=SimpleNamespace(value="LEASE_EXPIRED"), error="lease expired", log_uri="",
    )  # fmt: skip
    with_attempts = SimpleNamespace(**{name: getattr(run, name) for name in Run.__slots__}, attempts=[attempt])
    world.runs[run.run_id] = with_attempts  # type: ignore[assignment]
    steps = [SimpleNamespace(at_ms=NOW - 100_000, kind="fired", detail=f"by leader n1 {EVIL}", node_id="n1")]
    world.explain_run = lambda run_id: SimpleNamespace(steps=steps)  # type: ignore[attr-defined]
    _, _, body = call(app(world), "/runs/" + quote(run.run_id, safe=""))
    assert 'id="attempts-table"' in body and "status-lease-expired" in body and "attempts-note" not in body
    assert f'<a href="/runs/{quote(run.run_id, safe="")}?attempt=1">1</a>' in body  # each attempt's own output
    assert 'id="explanation-steps"' in body and f"by leader n1 {EVIL_ESCAPED}" in body
    assert_safe_page(body)


def _retried_run(world: FakeJobs, attempt: int, status: RunStatus) -> Run:
    """A run of a job allowing 2 attempts that failed 3, was retried by hand (RetryRun) and went on to ``attempt``."""
    world.jobs["j-evil"].spec = world.jobs["j-evil"].spec._replace(retry=RetryPolicy(max_attempts=2))
    run = make_run("j-evil", NOW - 200_000, status, attempt=attempt)
    run.budget_base = 3
    folder = f"file:///out/j-evil/{run.run_id}"
    run.attempts_raw = tuple(
        (n, "worker-1", f"l-{n}", 40 + n, NOW - 199_000 + n * 1000, NOW - 198_500 + n * 1000, "FAILED", f"exit status {n}",
         f"{folder}/attempt-{n}-token-{40 + n}.log", 0)
        for n in range(1, attempt + 1)
    )  # fmt: skip
    run.error = f"attempt {attempt - 3} of 2 failed: exit status {attempt}" if status is RunStatus.DEAD_LETTER else ""
    world.runs[run.run_id] = run
    return run


def test_after_a_manual_retry_the_attempt_is_counted_as_the_runs_own_messages_count_it(world: FakeJobs) -> None:
    run = _retried_run(world, 5, RunStatus.DEAD_LETTER)
    _, _, body = call(app(world), "/runs/" + quote(run.run_id, safe=""))
    # the record says "attempt 2 of 2 failed": the page's own count agrees, and names the attempt by its number
    assert '<dd id="run-error">attempt 2 of 2 failed: exit status 5</dd>' in body
    assert '<dd id="run-attempt">5 (2 of at most 2 since the manual retry after attempt 3)</dd>' in body
    assert "of at most 2</dd>" not in body.replace("since the manual retry after attempt 3)</dd>", "")
    retry_line = body.index(
        "manual retry (RetryRun) after attempt 3: a fresh budget of at most 2 attempt(s) counts from attempt 4"
    )
    assert body.index("?attempt=3") < retry_line < body.index("?attempt=4")  # between the attempts it separates
    assert f"Each attempt's log is in <code>file:///out/j-evil/{run.run_id}/</code>" in body
    assert '<code title="file:///out/j-evil/' in body and ">attempt-5-token-45.log</code>" in body
    assert "500ms" in body  # how long each attempt took

    pending = _retried_run(world, 3, RunStatus.PENDING)
    _, _, body = call(app(world), "/runs/" + quote(pending.run_id, safe=""))
    assert (
        '<dd id="run-attempt">3; a manual retry gave it a fresh budget of at most 2 attempt(s): the next is attempt 4</dd>'
        in body
    )


def test_the_cluster_page_counts_every_kept_job_in_its_rows(world: FakeJobs) -> None:
    by_status = {JobStatus.ACTIVE: 9, JobStatus.PAUSED: 1, JobStatus.COMPLETED: 1, JobStatus.DELETED: 1}
    world.counts = lambda: Counts({}, 12, {}, {}, by_status)  # type: ignore[method-assign]
    _, _, body = call(app(world), "/")
    table = body[body.index('id="job-counts"') : body.index("</table>", body.index('id="job-counts"'))]
    rows = [int(n) for n in re.findall(r'<td class="num">(\d+)</td>', table)]
    assert "(12 kept)" in body and sum(rows) == 12 and len(rows) == 4, table
    assert 'href="/jobs?status=DELETED"' in table


def test_no_leader_is_a_503_saying_to_retry(world: FakeJobs) -> None:
    world.unavailable = True
    status, _, body = call(app(world), "/jobs")
    assert status == 503 and "no leader known" in body and "retry" in body
    assert call(app(world), "/")[0] == 200  # the cluster page needs no leader


def test_the_style_sheet_is_ours_and_public() -> None:
    router = app(FakeJobs(), WebAuth(lambda t: TokenVerdict(refusal="no"), "n1", secure=False))
    status, headers, body = call(router, "/static/web.css")
    assert status == 200 and headers["content-type"] == ["text/css; charset=utf-8"]
    assert "@media" in body and "url(" not in body and "@import" not in body  # no font or image from anywhere


# ------------------------------------------------------------------ [auth]

READER, WORKER = "rst_reader-secret-0123456789", "rst_worker-secret-0123456789"


def check(token: str) -> TokenVerdict:
    if token == READER:
        return TokenVerdict(holder="viewer")
    if token == WORKER:
        return TokenVerdict(refusal="token 'worker' (roles: executor) may not call ListJobs: it needs the reader role")
    return TokenVerdict(refusal="it is not one of this cluster's tokens")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_without_a_token_a_page_is_the_sign_in_form_and_ops_stay_open(world: FakeJobs) -> None:
    router = app(world, WebAuth(check, "n1", secure=False))
    status, headers, body = call(router, "/jobs/j-evil?status=FAILED")
    assert status == 401 and headers["www-authenticate"][0].startswith("Bearer")
    assert '<input type="password" id="token" name="token"' in body and "needs a reader token" in body
    assert '<input type="hidden" name="next" value="/jobs/j-evil?status=FAILED">' in body
    assert EVIL_ESCAPED not in body  # nothing of the cluster before signing in
    assert_safe_page(body)
    assert call(router, "/healthz")[0] == 200  # public routes stay public


def test_a_wrong_token_is_refused_clearly_and_never_echoed(world: FakeJobs) -> None:
    router = app(world, WebAuth(check, "n1", secure=False))
    for token, why in (("rst_nope-9999", "not one of this cluster&#39;s tokens"), (WORKER, "needs the reader role")):
        status, headers, body = call(router, "/signin", "POST", form={"token": token, "next": "/"})
        assert status == 401 and "that token was refused" in body and why in body
        assert token not in body and "set-cookie" not in headers
    status, _, body = call(router, "/jobs", headers={"Authorization": f"Bearer {WORKER}"})
    assert status == 401 and "needs the reader role" in body and WORKER not in body


@pytest.mark.parametrize("secure", [False, True])
def test_a_reader_token_signs_in_with_a_strict_bounded_cookie(world: FakeJobs, secure: bool) -> None:
    sessions = Sessions(clock=Clock())
    router = app(world, WebAuth(check, "n1", secure=secure, sessions=sessions), "https" if secure else "http")
    status, headers, body = call(router, "/signin", "POST", form={"token": READER, "next": "/jobs?status=ACTIVE"})
    assert status == 303 and headers["location"] == ["/jobs?status=ACTIVE"] and READER not in body
    (cookie,) = headers["set-cookie"]
    name, _, rest = cookie.partition("=")
    value, *attributes = [part.strip() for part in rest.split(";")]
    assert name == "raftsched_session_n1" and len(value) >= 40 and READER not in cookie
    assert {"Path=/", "HttpOnly", "SameSite=Strict", "Max-Age=28800"} <= set(attributes)
    assert ("Secure" in attributes) is secure
    status, _, body = call(router, "/jobs", headers={"Cookie": f"other=1; {name}={value}"})
    assert status == 200 and EVIL_ESCAPED in body and "signed in as <b>viewer</b>" in body and 'id="signout"' in body
    assert READER not in body
    assert call(router, "/jobs", headers={"Authorization": f"Bearer {READER}"})[0] == 200  # scripts: the header


def test_sign_out_ends_the_session_and_sessions_expire_and_are_bounded(world: FakeJobs) -> None:
    clock = Clock()
    sessions = Sessions(lifetime_s=60, max_sessions=3, clock=clock)
    router = app(world, WebAuth(check, "n1", secure=False, sessions=sessions))
    ids = [sessions.open("viewer") for _ in range(5)]
    assert len(sessions) == 3 and sessions.holder(ids[0]) is None and sessions.holder(ids[4]) == "viewer"
    cookie = {"Cookie": f"raftsched_session_n1={ids[4]}"}
    assert call(router, "/", headers=cookie)[0] == 200
    status, headers, _ = call(router, "/signout", headers=cookie)
    assert status == 303 and headers["location"] == ["/signin?signed_out=1"]
    assert "Max-Age=0" in headers["set-cookie"][0] and headers["set-cookie"][0].startswith("raftsched_session_n1=;")
    status, _, body = call(router, "/", headers=cookie)
    assert status == 401 and "your session has ended" in body
    clock.now += 61
    assert sessions.holder(ids[3]) is None  # past its lifetime


def test_a_cross_site_sign_in_is_refused_and_next_stays_on_this_site(world: FakeJobs) -> None:
    router = app(world, WebAuth(check, "n1", secure=False))
    status, headers, _ = call(
        router, "/signin", "POST", headers={"Origin": "https://evil.example", "Host": "127.0.0.1:8081"}, form={"token": READER}
    )
    assert status == 403 and "set-cookie" not in headers
    status, headers, _ = call(
        router, "/signin", "POST", headers={"Origin": "http://127.0.0.1:8081", "Host": "127.0.0.1:8081"},
        form={"token": READER, "next": "//evil.example/x"},
    )  # fmt: skip
    assert status == 303 and headers["location"] == ["/"]
    assert [safe_next(t) for t in ("/jobs?x=1", "//evil", "https://evil", "/\\evil", "jobs")] == ["/jobs?x=1", "/", "/", "/", "/"]


def test_a_large_body_is_a_413_before_any_handler(world: FakeJobs) -> None:
    router = app(world, WebAuth(check, "n1", secure=False))
    status, _, body = call(router, "/signin", "POST", form={"token": "x" * 20_000})
    assert status == 413 and "16384 bytes" in body


def test_the_cluster_status_as_plain_data_and_the_app_token_check() -> None:
    from raftsched.cluster.app.observability import token_check
    from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
    from raftsched.rpc.http.web import overview_of
    from raftsched.rpc.server.tokens import Token, TokenTable, token_digest

    status = pb.ClusterStatus(self_id="n2", leader_id="n1", term=4, commit_index=9, applied_index=8, has_quorum=True)
    status.members.add(id="n1", role=pb.MEMBER_ROLE_LEADER, reachable=True, http_address="127.0.0.1:8081", version="v")
    got = overview_of(status)
    assert (got.self_id, got.leader_id, got.term, got.commit_index, got.applied_index, got.has_quorum) == (
        "n2",
        "n1",
        4,
        9,
        8,
        True,
    )
    assert got.members == [MemberView("n1", "LEADER", True, "v", "", "", "127.0.0.1:8081")]

    table = TokenTable(
        [
            Token("viewer", token_digest(READER), frozenset({"reader"})),
            Token("worker", token_digest(WORKER), frozenset({"executor"})),
        ]
    )
    verdicts = token_check(table)
    assert verdicts(READER) == TokenVerdict(holder="viewer")
    assert "needs the reader role" in verdicts(WORKER).refusal and not verdicts(WORKER).holder
    assert "not one of this cluster's tokens" in verdicts("rst_other").refusal


def test_words_for_times_spans_and_cron_fields() -> None:
    from raftsched.rpc.http.web import words

    assert words.utc(None) == words.utc(0) == "-"
    assert words.utc(NOW) == "2026-10-24 00:00:00 UTC" and words.utc(NOW + 250) == "2026-10-24 00:00:00.250 UTC"
    assert words.utc(NOW, millis=True) == "2026-10-24 00:00:00.000 UTC"
    assert words.in_zone(NOW, "America/New_York") == "Fri 2026-10-23 20:00:00 EDT (UTC-04:00)"
    assert words.in_zone(NOW, "Not/AZone") == "Sat 2026-10-24 00:00:00 UTC (UTC+00:00)"  # the server refused it already
    assert [words.span(ms) for ms in (0, 500, 2000, 90_000, 86_400_000 + 1)] == ["0s", "500ms", "2s", "1m30s", "1d1ms"]
    assert (words.relative(NOW + 4200, NOW), words.relative(NOW - 12_000, NOW), words.relative(NOW, NOW)) == (
        "in 4s",
        "12s ago",
        "now",
    )
    assert words.relative(NOW + 86_400_000 + 12 * 3_600_000 + 8 * 60_000 + 12_000, NOW) == "in 1d12h"
    assert words.cron_fields("*/15 9-17 * * 1-5") == (
        "every 15 minutes, hour 9-17, any day of the month, any month, day of the week 1-5"
    )
    assert words.cron_fields("@daily") == "@daily"
