"""The web view's actions without a network: sessions' CSRF tokens and flash messages, the Origin check,
which actions a status offers, the app's role check (the gRPC rules: roles, queue scopes), and every
step through the router as WSGI: buttons only for a token that may act, the confirmation page, the POST
with its CSRF token and request id, the 303 and its flash, and the 403s (reader, no or wrong CSRF token,
another site's Origin, a bearer header), 404 and 405."""

from __future__ import annotations

import re

import pytest

from raftsched.cluster.app.observability import action_check, grpc_words
from raftsched.cluster.domain.errors import RejectedError
from raftsched.cluster.domain.model import Every, Job, JobStatus, Run, RunStatus
from raftsched.cluster.domain.results import FailedPrecondition, NotFound
from raftsched.rpc.http.router import Request, Router
from raftsched.rpc.http.web import Sessions, TokenVerdict, WebAuth, WebView, add_web_routes
from raftsched.rpc.http.web import action_words as aw
from raftsched.rpc.http.web.actions import NO_SESSION, WebActions, same_origin
from raftsched.rpc.http.web.session import MAX_FLASHES
from raftsched.rpc.server.tokens import Token, TokenTable, token_digest
from tests.unit.test_web_view import EVIL, EVIL_ESCAPED, NOW, FakeJobs, assert_safe_page, call, make_job, make_run, overview

pytestmark = pytest.mark.unit

HOST = "127.0.0.1:8081"
COOKIE = "raftsched_session_n1"


class FakeActor(FakeJobs):
    """``FakeJobs`` that also acts, as the state machine would, recording each call with its request id."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str, str]] = []

    def _job_change(self, job_id: str, request_id: str, method: str, want: JobStatus, to: JobStatus) -> Job:
        job = self.get_job(job_id)
        self.calls.append((method, job_id, request_id))
        if job.status is not want and job.status is not to:
            raise RejectedError(FailedPrecondition(f"job {job_id} is {job.status.value}; only an {want.value} job can be"))
        job.status = to
        return job

    def pause_job(self, job_id: str, request_id: str = "") -> Job:
        return self._job_change(job_id, request_id, "PauseJob", JobStatus.ACTIVE, JobStatus.PAUSED)

    def resume_job(self, job_id: str, request_id: str = "") -> Job:
        return self._job_change(job_id, request_id, "ResumeJob", JobStatus.PAUSED, JobStatus.ACTIVE)

    def trigger_job(self, job_id: str, request_id: str = "") -> Run:
        self.get_job(job_id)
        self.calls.append(("TriggerJob", job_id, request_id))
        run = make_run(job_id, NOW + len(self.calls), RunStatus.PENDING)
        self.runs[run.run_id] = run
        return run

    def cancel_run(self, run_id: str, request_id: str = "") -> Run:
        run = self.get_run(run_id)
        self.calls.append(("CancelRun", run_id, request_id))
        run.status = RunStatus.CANCELLED
        return run

    def retry_run(self, run_id: str, request_id: str = "", requested_by: str = "") -> Run:
        run = self.get_run(run_id)
        self.calls.append(("RetryRun", run_id, f"{request_id} by {requested_by}"))
        if run.status not in (RunStatus.FAILED, RunStatus.DEAD_LETTER, RunStatus.CANCELLED):
            why = f"run {run_id} is {run.status.value}; only DEAD_LETTER, FAILED or CANCELLED runs can be retried"
            raise RejectedError(FailedPrecondition(why))
        run.status = RunStatus.PENDING
        return run


class Scopes:
    """A ``ScopeLookup`` over the fake's records (as ``raftsched.cluster.node.scope_lookup`` reads the state)."""

    def __init__(self, world: FakeActor) -> None:
        self.world = world

    def job(self, job_id: str) -> tuple[str, str] | None:
        job = self.world.jobs.get(job_id)
        return None if job is None else (job.spec.queue, job.spec.type)

    def run(self, run_id: str) -> tuple[str, str] | None:
        run = self.world.runs.get(run_id)
        return None if run is None else (run.queue, self.world.jobs[run.job_id].spec.type)

    def lease_queues(self, lease_ids: list[str]) -> list[str]:
        return []


TOKENS = TokenTable(
    [
        Token("viewer", token_digest("rst_viewer"), frozenset({"reader"})),
        Token("alice", token_digest("rst_alice"), frozenset({"submitter"}), queues=frozenset({"default"})),
        Token("bob", token_digest("rst_bob"), frozenset({"submitter"}), queues=frozenset({"elsewhere"})),
        Token("root", token_digest("rst_root"), frozenset({"admin"})),
    ]
)


def _sign_in_check(token: str) -> TokenVerdict:
    found = TOKENS.find(token)
    return TokenVerdict(holder=found.name) if found is not None else TokenVerdict(refusal="unknown")


@pytest.fixture()
def world() -> FakeActor:
    jobs = FakeActor()
    evil = make_job("j-evil", EVIL, Every(2000))
    jobs.jobs = {"j-evil": evil}
    for status in (RunStatus.FAILED, RunStatus.PENDING, RunStatus.SUCCEEDED):
        run = make_run("j-evil", NOW - 100_000 + len(jobs.runs), status)
        jobs.runs[run.run_id] = run
    return jobs


def _run(world: FakeActor, status: RunStatus) -> Run:
    return next(r for r in world.runs.values() if r.status is status)


class Site:
    """The web view with actions over ``world``, and a signed-in session per token name."""

    def __init__(self, world: FakeActor) -> None:
        self.world = world
        self.auth = WebAuth(_sign_in_check, "n1", secure=False, sessions=Sessions())
        actions = WebActions(world, self.auth, action_check(TOKENS, Scopes(world)), grpc_words)
        self.router = Router(self.auth.authorize)
        add_web_routes(self.router, WebView(world, overview, lambda: NOW, "n1", "http", self.auth, actions))
        self.sessions: dict[str, str] = {}

    def session(self, holder: str) -> str:
        if holder not in self.sessions:
            self.sessions[holder] = self.auth.sessions.open(holder)
        return self.sessions[holder]

    def get(self, holder: str, path: str) -> tuple[int, dict[str, list[str]], str]:
        return call(self.router, path, headers={"Cookie": f"{COOKIE}={self.session(holder)}", "Host": HOST})

    def post(
        self, holder: str, path: str, form: dict[str, str], origin: str = f"http://{HOST}", method: str = "POST"
    ) -> tuple[int, dict[str, list[str]], str]:
        headers = {"Cookie": f"{COOKIE}={self.session(holder)}", "Host": HOST}
        if origin:
            headers["Origin"] = origin
        return call(self.router, path, method, headers=headers, form=form)

    def confirm_form(self, holder: str, path: str) -> dict[str, str]:
        """The hidden fields of the confirmation page's form."""
        status, _, body = self.get(holder, path)
        assert status == 200, body
        return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', body))


# ------------------------------------------------------------------ the parts


def test_each_session_has_its_own_csrf_token_and_flashes_shown_once() -> None:
    sessions = Sessions()
    one, two = sessions.open("alice"), sessions.open("alice")
    token_one, token_two = sessions.csrf(one), sessions.csrf(two)
    assert len(token_one) >= 40 and token_one != token_two and token_one not in (one, two)
    assert sessions.csrf_matches(one, token_one) and not sessions.csrf_matches(one, token_two)
    assert not sessions.csrf_matches(one, "") and not sessions.csrf_matches("", "") and sessions.csrf("nope") == ""
    for k in range(MAX_FLASHES + 2):
        sessions.flash(one, "ok", f"done {k}")
    shown = sessions.take_flashes(one)
    assert [f.text for f in shown] == [f"done {k}" for k in range(2, MAX_FLASHES + 2)]  # the oldest went first
    assert sessions.take_flashes(one) == [] and sessions.take_flashes(two) == []
    sessions.flash(one, "error", "refused")
    sessions.close(one)
    assert sessions.take_flashes(one) == [] and not sessions.csrf_matches(one, token_one)
    sessions.flash("not-a-session", "ok", "x")
    assert sessions.take_flashes("not-a-session") == []


def _request(headers: dict[str, str]) -> Request:
    return Request("POST", "/jobs/j/pause", {}, {k.lower(): v for k, v in headers.items()})


@pytest.mark.parametrize(
    ("headers", "same"),
    [
        ({"Host": HOST, "Origin": f"http://{HOST}"}, True),
        ({"Host": HOST, "Origin": "https://evil.example"}, False),
        ({"Host": HOST, "Origin": "null"}, False),
        ({"Host": HOST, "Referer": f"http://{HOST}/jobs/j/pause"}, True),
        ({"Host": HOST, "Referer": "https://evil.example/x"}, False),
        ({"Host": HOST}, True),  # no browser's cross-site form: the CSRF token decides
    ],
)
def test_a_post_must_come_from_a_page_of_this_host(headers: dict[str, str], same: bool) -> None:
    assert same_origin(_request(headers)) is same


def test_which_actions_a_status_offers(world: FakeActor) -> None:
    job = world.jobs["j-evil"]
    by_status = {}
    for status in JobStatus:
        job.status = status
        by_status[status] = [a.name for a in aw.job_actions(job)]
    assert by_status[JobStatus.ACTIVE] == ["pause", "trigger"] and by_status[JobStatus.PAUSED] == ["resume", "trigger"]
    assert by_status[JobStatus.DELETED] == [] and by_status[JobStatus.COMPLETED] == ["trigger"]
    job.status = JobStatus.ACTIVE
    run = make_run("j-evil", NOW)
    offered = {}
    for status in RunStatus:
        run.status = status
        offered[status] = [a.name for a in aw.run_actions(run, job)]
    assert {s for s, names in offered.items() if names == ["retry"]} == {
        RunStatus.FAILED,
        RunStatus.DEAD_LETTER,
        RunStatus.CANCELLED,
    }
    assert {s for s, names in offered.items() if names == ["cancel"]} == {RunStatus.PENDING, RunStatus.LEASED}
    run.status, run.cancel_requested = RunStatus.LEASED, True
    assert aw.run_actions(run, job) == []  # asked once already
    run.status = RunStatus.FAILED
    assert aw.run_actions(run, None) == []  # its job is deleted and gone


def test_the_app_decides_with_the_grpc_rules_roles_and_queue_scopes(world: FakeActor) -> None:
    check = action_check(TOKENS, Scopes(world))
    failed = _run(world, RunStatus.FAILED).run_id
    assert check("root", "PauseJob", "j-evil") is None and check("alice", "RetryRun", failed) is None
    assert "may not call PauseJob: it needs the submitter role" in str(check("viewer", "PauseJob", "j-evil"))
    assert "may not use queue 'default' in CancelRun" in str(check("bob", "CancelRun", failed))
    assert "not in this node's [auth] tokens_file" in str(check("gone", "TriggerJob", "j-evil"))
    assert grpc_words(RejectedError(NotFound("job j-x not found"))) == "NOT_FOUND: job j-x not found"
    assert grpc_words(RuntimeError("a bug")) is None


# ------------------------------------------------------------------ through the router


def test_a_submitter_pauses_a_job_through_the_confirmation_step(world: FakeActor) -> None:
    site = Site(world)
    status, _, body = site.get("alice", "/jobs/j-evil")
    assert status == 200 and 'href="/jobs/j-evil/pause" id="action-pause"' in body and 'id="action-trigger"' in body
    assert 'id="action-resume"' not in body
    status, _, body = site.get("alice", "/jobs/j-evil/pause")
    assert status == 200 and world.calls == []  # the confirmation changes nothing
    assert f"Pause job {EVIL_ESCAPED} (j-evil)?" in body and "Runs already fired are not affected" in body
    assert '<form method="post" action="/jobs/j-evil/pause" class="confirm">' in body
    assert_safe_page(body)
    form = site.confirm_form("alice", "/jobs/j-evil/pause")
    assert form["csrf"] == site.auth.sessions.csrf(site.session("alice")) and form["request_id"].startswith("web-")
    assert site.confirm_form("alice", "/jobs/j-evil/pause")["request_id"] != form["request_id"]  # one per form

    status, headers, _ = site.post("alice", "/jobs/j-evil/pause", form)
    assert status == 303 and headers["location"] == ["/jobs/j-evil"]
    assert world.calls == [("PauseJob", "j-evil", form["request_id"])] and world.jobs["j-evil"].status is JobStatus.PAUSED
    _, _, body = site.get("alice", "/jobs/j-evil")
    assert f'<li class="flash ok">Paused job {EVIL_ESCAPED} (j-evil): it is PAUSED.</li>' in body
    assert 'id="action-resume"' in body and 'id="action-pause"' not in body
    assert 'id="flashes"' not in site.get("alice", "/jobs/j-evil")[2]  # shown once


def test_trigger_retry_and_cancel_and_a_refusal_worded_as_grpc_words_it(world: FakeActor) -> None:
    site = Site(world)
    form = site.confirm_form("root", "/jobs/j-evil/trigger")
    assert site.post("root", "/jobs/j-evil/trigger", form)[0] == 303
    assert "Triggered job" in site.get("root", "/jobs/j-evil")[2] and world.calls[-1][0] == "TriggerJob"

    failed, pending, done = (_run(world, s).run_id for s in (RunStatus.FAILED, RunStatus.PENDING, RunStatus.SUCCEEDED))
    path = f"/runs/{failed}"
    assert 'id="action-retry"' in site.get("alice", path)[2]
    status, headers, _ = site.post("alice", path + "/retry", site.confirm_form("alice", path + "/retry"))
    assert status == 303 and headers["location"] == [path.replace("@", "%40")]
    assert world.calls[-1][2].endswith(" by alice")  # RetryRun names who asked
    assert f"Retried run {failed}: it is PENDING again" in site.get("alice", path)[2]

    assert 'id="action-cancel"' in site.get("alice", f"/runs/{pending}")[2]
    assert site.post("alice", f"/runs/{pending}/cancel", site.confirm_form("alice", f"/runs/{pending}/cancel"))[0] == 303
    assert f"Run {pending} is CANCELLED." in site.get("alice", f"/runs/{pending}")[2]

    _, _, body = site.get("alice", f"/runs/{done}")
    assert 'id="actions"' not in body  # a SUCCEEDED run offers nothing
    form = {"csrf": site.auth.sessions.csrf(site.session("alice")), "request_id": "web-by-hand"}
    assert site.post("alice", f"/runs/{done}/retry", form)[0] == 303
    _, _, body = site.get("alice", f"/runs/{done}")
    assert f"RetryRun was refused: FAILED_PRECONDITION: run {done} is SUCCEEDED; only DEAD_LETTER" in body


def test_a_reader_sees_no_button_and_is_refused_when_it_posts(world: FakeActor) -> None:
    site = Site(world)
    failed = _run(world, RunStatus.FAILED).run_id
    for path in ("/jobs/j-evil", f"/runs/{failed}"):
        status, _, body = site.get("viewer", path)
        assert status == 200 and 'id="actions"' not in body and "/pause" not in body and "/retry" not in body
    status, _, body = site.get("viewer", "/jobs/j-evil/pause")
    assert status == 403 and "you are signed in as &#39;viewer&#39;" in body and "needs the submitter role" in body
    form = {"csrf": site.auth.sessions.csrf(site.session("viewer")), "request_id": "web-forged"}
    status, _, body = site.post("viewer", "/jobs/j-evil/pause", form)
    assert status == 403 and "needs the submitter role" in body and 'id="error-message"' in body
    status, _, _ = site.post(
        "bob", "/jobs/j-evil/trigger", {"csrf": site.auth.sessions.csrf(site.session("bob")), "request_id": "web-1"}
    )
    assert status == 403  # a submitter outside its queues
    assert 'id="actions"' not in site.get("bob", "/jobs/j-evil")[2]
    assert world.calls == []


@pytest.mark.parametrize(
    ("form", "origin", "why"),
    [
        ({"request_id": "web-1"}, f"http://{HOST}", "CSRF token is missing or not your session"),
        ({"csrf": "guessed", "request_id": "web-1"}, f"http://{HOST}", "CSRF token is missing or not your session"),
        ({"csrf": "<own>", "request_id": "web-1"}, "https://evil.example", "sent from another site"),
    ],
)
def test_a_post_without_the_sessions_csrf_token_or_from_another_site_is_a_403(
    world: FakeActor, form: dict[str, str], origin: str, why: str
) -> None:
    site = Site(world)
    form = {k: site.auth.sessions.csrf(site.session("root")) if v == "<own>" else v for k, v in form.items()}
    status, _, body = site.post("root", "/jobs/j-evil/pause", form, origin=origin)
    assert status == 403 and why in body and world.calls == []
    other = Site(world)  # a token of another node's session is no token here
    status, _, _ = other.post(
        "root", "/jobs/j-evil/pause", {"csrf": site.auth.sessions.csrf(site.session("root")), "request_id": "r"}
    )
    assert status == 403 and world.calls == []


def test_no_session_no_request_id_wrong_method_and_unknown_action(world: FakeActor) -> None:
    site = Site(world)
    bearer = {"Authorization": "Bearer rst_root", "Host": HOST}
    status, _, body = call(site.router, "/jobs/j-evil", headers=bearer)
    assert status == 200 and 'id="actions"' not in body  # scripts read; they act through the CLI
    status, _, body = call(site.router, "/jobs/j-evil/pause", "POST", headers=bearer, form={"csrf": "x"})
    assert status == 403 and NO_SESSION.split(":")[0] in body
    status, _, body = call(site.router, "/jobs/j-evil/pause", "POST", headers={"Host": HOST}, form={})
    assert status == 401 and 'name="token"' in body  # no session at all: the sign-in form
    status, _, body = site.post("root", "/jobs/j-evil/pause", {"csrf": site.auth.sessions.csrf(site.session("root"))})
    assert status == 400 and "no request id" in body and world.calls == []
    status, headers, _ = site.post("root", "/jobs/j-evil/pause", {}, method="PUT")
    assert status == 405 and headers["allow"] == ["GET, HEAD, POST"]
    assert site.post("root", "/jobs/j-evil", {})[0] == 405  # the job's page itself takes no POST
    status, _, body = site.get("root", "/jobs/j-evil/delete")
    assert status == 404 and "no such action on a job: &#39;delete&#39; (there are pause, resume, trigger)" in body
    assert site.get("root", "/jobs/j-nope/pause")[0] == 404


def test_a_web_view_without_auth_has_no_actions(world: FakeActor) -> None:
    router = Router()
    add_web_routes(router, WebView(world, overview, lambda: NOW, "n1"))
    status, _, body = call(router, "/jobs/j-evil")
    assert status == 200 and 'id="actions"' not in body
    assert call(router, "/jobs/j-evil/pause")[0] == 404
    assert call(router, "/jobs/j-evil/pause", "POST", form={"request_id": "x"})[0] == 404
