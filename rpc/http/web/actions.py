"""The web view's actions: pause, resume and trigger a job; retry and cancel a run.

**Who.** Only under ``[auth]``, and only for a signed-in session (the cookie
``/signin`` sets) whose token may call the gRPC method the action is
(``PauseJob``, ``ResumeJob``, ``TriggerJob``, ``RetryRun``, ``CancelRun``):
the app answers ``ActionCheck`` with the gRPC rules themselves (the token's
roles, and its ``queues`` and ``types`` against the job or run named by id),
so a ``submitter`` acts within its scope and an ``admin`` everywhere. A
``reader``, a request with a bearer header (scripts: use the CLI or gRPC),
and a web view without ``[auth]`` see no button; their requests to an
action are refused with 403 and a page saying why.

**How.** A button is a link to a confirmation page (GET: it changes
nothing) that says what will happen, naming the job or run. Its form POSTs
to the same address with the session's CSRF token and a request id made
for that form. The POST is refused with 403 unless the session is live,
its ``Origin`` (or, without one, its ``Referer``) names the host the
request was sent to (defence in depth beside the cookie's
``SameSite=Strict`` and the router's ``Host`` check), and its CSRF token is
the session's (compared in constant time); then the role is checked and
the node's own use case (``JobActor``: ``JobService``, which the gRPC
servicer calls too) runs with the form's request id, so a form submitted
twice acts once (the cluster answers the second with the first's result).
The answer is a 303 back to the job's or run's page, with a flash message
saying what happened or the refusal as gRPC words it
(``FAILED_PRECONDITION: run ... is SUCCEEDED; ...``). Any other method is a
405 (the router).
"""

from __future__ import annotations

import logging
import secrets
from typing import Any, Callable, Protocol
from urllib.parse import urlsplit

from raftsched.cluster.domain.errors import OutOfRange, Overloaded, RejectedError, Unavailable, ValidationError
from raftsched.cluster.domain.model import Job, Run
from raftsched.rpc.http.router import Request, Response
from raftsched.rpc.http.web import action_words as aw
from raftsched.rpc.http.web.job_sections import job_href, run_href
from raftsched.rpc.http.web.render import HTML, PAGE_HEADERS, page
from raftsched.rpc.http.web.signin import WebAuth

log = logging.getLogger("raftsched.http")

#: (the session's token name, the gRPC method, the job or run id) -> None when allowed, else why not
ActionCheck = Callable[[str, str, str], "str | None"]
#: a domain error as gRPC words it ("FAILED_PRECONDITION: ..."); None for one that is not a domain error
ErrorWords = Callable[[Exception], "str | None"]
#: the refusals of the cluster an action shows as a flash (anything else is a bug: a 500)
DOMAIN_ERRORS = (RejectedError, ValidationError, Unavailable, Overloaded, OutOfRange)
NO_SESSION = (
    "actions need a signed-in session of a token with the submitter or admin role: sign out and sign in with one "
    "(scripts use the command line or gRPC instead)"
)


class JobActor(Protocol):
    """The writes the actions make (``JobService``'s, the same the gRPC servicer calls)."""

    def pause_job(self, job_id: str, request_id: str = "") -> Job: ...

    def resume_job(self, job_id: str, request_id: str = "") -> Job: ...

    def trigger_job(self, job_id: str, request_id: str = "") -> Run: ...

    def cancel_run(self, run_id: str, request_id: str = "") -> Run: ...

    def retry_run(self, run_id: str, request_id: str = "", requested_by: str = "") -> Run: ...

    def get_job(self, job_id: str) -> Job: ...

    def get_run(self, run_id: str) -> Run: ...


def new_request_id() -> str:
    """A request id for one confirmation form."""
    return "web-" + secrets.token_hex(12)


def _netloc(url: str) -> str:
    try:
        return urlsplit(url).netloc.lower()
    except ValueError:
        return ""


def same_origin(request: Request) -> bool:
    """Whether a POST comes from a page of this host: its ``Origin`` (else its ``Referer``) names the ``Host``.
    Neither header: not a browser's cross-site form (browsers send ``Origin`` with every POST); the CSRF
    token still decides."""
    host = request.header("host").strip().lower()
    origin = request.header("origin").strip()
    if origin:
        return _netloc(origin) == host
    referer = request.header("referer").strip()
    return not referer or _netloc(referer) == host


class WebActions:
    def __init__(self, actor: JobActor, auth: WebAuth, check: ActionCheck, words: ErrorWords | None = None) -> None:
        self.actor = actor
        self.auth = auth
        self.check = check
        self.words = words

    # ---------------------------------------------------------------- buttons

    def buttons(self, request: Request, job: Job | None = None, run: Run | None = None) -> list[tuple[str, str, str]]:
        """(label, href, element id) of each action the page's job or run allows now and the session may do."""
        holder = self.auth.who(request)
        if not holder:
            return []
        if run is not None:
            offered, target, href = aw.run_actions(run, job), run.run_id, run_href(run.run_id)
        elif job is not None:
            offered, target, href = aw.job_actions(job), job.job_id, job_href(job.job_id)
        else:
            return []
        return [
            (a.label, f"{href}/{a.name}", f"action-{a.name}") for a in offered if self.check(holder, a.method, target) is None
        ]

    # ---------------------------------------------------------------- the routes

    def on_job(self, request: Request) -> Response:
        """``/jobs/{job_id}/{action}``: GET the confirmation, POST the action."""
        return self._serve(request, aw.JOB, request.params["job_id"])

    def on_run(self, request: Request) -> Response:
        """``/runs/{run_id}/{action}``: GET the confirmation, POST the action."""
        return self._serve(request, aw.RUN, request.params["run_id"])

    def _serve(self, request: Request, kind: str, target_id: str) -> Response:
        action = aw.ACTIONS[kind].get(request.params["action"])
        if action is None:
            names = ", ".join(aw.ACTIONS[kind])
            return self._error(request, 404, f"no such action on a {kind}: {request.params['action']!r} (there are {names})")
        session_id = request.cookie(self.auth.cookie)
        holder = self.auth.sessions.holder(session_id) if session_id else None
        if not holder:
            return self._error(request, 403, NO_SESSION)
        if request.method == "POST":
            refusal = self._post_refusal(request, session_id)
            if refusal:
                log.info("web view: %s of %s %s by %r refused: %s", action.name, kind, target_id, holder, refusal)
                return self._error(request, 403, refusal)
        job, run = self._records(kind, target_id)
        why = self.check(holder, action.method, target_id)
        if why is not None:
            if request.method == "POST":
                log.info("web view: %s of %s %s by %r refused: %s", action.name, kind, target_id, holder, why)
            return self._error(request, 403, f"you are signed in as {holder!r}, which may not do this: {why}")
        if request.method != "POST":
            return self._confirm(request, action, job, run, session_id)
        return self._act(request, action, job, run, session_id, holder)

    def _post_refusal(self, request: Request, session_id: str) -> str:
        if not same_origin(request):
            return "this form was sent from another site's page (its Origin or Referer names another host): refused"
        if not self.auth.sessions.csrf_matches(session_id, request.form().get("csrf", "")):
            return (
                "this form's CSRF token is missing or not your session's (a form from before you signed in again, or "
                "from another site): open the page again and use its buttons"
            )
        return ""

    def _records(self, kind: str, target_id: str) -> tuple[Job | None, Run | None]:
        """The job (and run) acted on, read after a read barrier (an unknown one raises: the view's 404)."""
        if kind == aw.JOB:
            return self.actor.get_job(target_id), None
        run = self.actor.get_run(target_id)
        try:
            return self.actor.get_job(run.job_id), run
        except RejectedError:
            return None, run  # the job is deleted since

    # ---------------------------------------------------------------- the two steps

    def _confirm(self, request: Request, action: aw.Action, job: Job | None, run: Run | None, session_id: str) -> Response:
        asked, consequence = aw.question(action, job, run)
        back = run_href(run.run_id) if run is not None else job_href(job.job_id if job is not None else "")
        crumbs = [("Cluster", "/"), ("Jobs", "/jobs")]
        if job is not None:
            crumbs.append((job.spec.name, job_href(job.job_id)))
        if run is not None:
            crumbs.append((f"run {run.run_id}", run_href(run.run_id)))
        crumbs.append((action.label, ""))
        return self._page(
            request, 200, "confirm.html", asked, crumbs,
            question=asked, consequence=consequence, label=action.label, back=back,
            action_href=f"{back}/{action.name}", csrf=self.auth.sessions.csrf(session_id), request_id=new_request_id(),
            status_now=(run.status.value if run is not None else job.status.value if job is not None else ""),
        )  # fmt: skip

    def _act(
        self, request: Request, action: aw.Action, job: Job | None, run: Run | None, session_id: str, holder: str
    ) -> Response:
        request_id = request.form().get("request_id", "").strip()
        if not request_id:
            return self._error(request, 400, "the form holds no request id: open the confirmation page again")
        name = job.spec.name if job is not None else (run.job_id if run is not None else "")
        try:
            done = self._call(action, job, run, request_id, holder)
        except DOMAIN_ERRORS as exc:
            worded = (self.words(exc) if self.words is not None else None) or str(exc)
            self.auth.sessions.flash(session_id, "error", f"{action.method} was refused: {worded}")
            log.info("web view: %s by %r refused by the cluster: %s", action.method, holder, worded)
        else:
            self.auth.sessions.flash(session_id, "ok", aw.outcome(action, done, name))
            log.info("web view: %s by %r (request id %s)", action.method, holder, request_id)
        back = run_href(run.run_id) if run is not None else job_href(job.job_id if job is not None else "")
        return Response(303, b"", HTML, PAGE_HEADERS + (("Location", back),))

    def _call(self, action: aw.Action, job: Job | None, run: Run | None, request_id: str, holder: str) -> Job | Run:
        if run is not None:
            if action is aw.RETRY:
                return self.actor.retry_run(run.run_id, request_id, holder)
            return self.actor.cancel_run(run.run_id, request_id)
        assert job is not None
        if action is aw.PAUSE:
            return self.actor.pause_job(job.job_id, request_id)
        if action is aw.RESUME:
            return self.actor.resume_job(job.job_id, request_id)
        return self.actor.trigger_job(job.job_id, request_id)

    # ---------------------------------------------------------------- pages

    def _page(
        self, request: Request, status: int, template: str, title: str, crumbs: list[tuple[str, str]], **ctx: Any
    ) -> Response:
        holder = self.auth.who(request)
        return page(status, template, title=title, crumbs=crumbs, node_id=self.auth.node_id, holder=holder, refresh=0, **ctx)

    def _error(self, request: Request, status: int, message: str) -> Response:
        holder = self.auth.who(request)
        crumbs = [("Cluster", "/"), ("Error", "")]
        return page(
            status, "error.html", title=f"Error {status}", crumbs=crumbs, node_id=self.auth.node_id, holder=holder,
            refresh=0, code=status, message=message,
        )  # fmt: skip
