"""The web view's pages: the cluster (``/``), the jobs (``/jobs``, filtered by status, queue, name prefix
and a label selector), a job (``/jobs/{job_id}``: its spec, summary, pause and labels), a run
(``/runs/{run_id}``: its record, labels and what made it), and the style sheet (``/static/web.css``).

Server-rendered (``raftsched.rpc.http.web.render``), no script. Everything
is read through the node's services, never the state machine: the job
service (``JobReader``: ``raftsched.cluster.node.job_service.JobService`` fits it; its
reads run after a read barrier, so a page shows what is committed), and the
cluster status function (``ClusterOverview``, the one GetClusterStatus
answers with; no barrier, so the cluster page answers also without a
leader). A domain error becomes a page with its message and status: not
found 404, bad input 400, no leader 503, a limit 429.

Who may look is the router's business (``raftsched.rpc.http.web.signin`` under
``[auth]``); ``add_web_routes`` adds the pages as routes that need it, and
the style sheet as a public one (the sign-in form uses it). With
``actions`` (``raftsched.rpc.http.web.actions``, under ``[auth]`` only) the job
and run pages show the buttons the signed-in token may use, every page
shows the session's flash messages, and the actions' routes are added.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from raftsched.cluster.domain.errors import OutOfRange, Overloaded, RejectedError, Unavailable, ValidationError
from raftsched.cluster.domain.model import ACTIVE_RUN_STATUSES, Job, JobSpec, JobStatus, Run, RunStatus, Schedule
from raftsched.cluster.domain.results import NotFound
from raftsched.cluster.node.job_service import Counts, Page
from raftsched.cluster.node.run_output import RunOutput
from raftsched.rpc.http.router import Request, Response, Router
from raftsched.rpc.http.web import words
from raftsched.rpc.http.web.actions import WebActions
from raftsched.rpc.http.web.job_sections import (
    SELECTOR_EXAMPLE,
    job_row,
    label_chips,
    label_filter,
    next_fire_words,
    next_instants,
    pause_of,
    run_row,
    summary_of,
)
from raftsched.rpc.http.web.links import job_href, link, run_href
from raftsched.rpc.http.web.overview import ClusterOverview
from raftsched.rpc.http.web.render import CSS, STYLE_PATH, page, style_sheet
from raftsched.rpc.http.web.run_sections import (
    attempt_rows,
    explanation_rows,
    log_folder,
    output_view,
    run_fields,
    run_origin,
)
from raftsched.rpc.http.web.signin import WebAuth

JOBS_PAGE = 50
RUNS_PAGE = 25
#: seconds between reloads of a page that shows a run still going
LIVE_REFRESH_S = 3


class JobReader(Protocol):
    """What the pages read (``JobService``'s reads)."""

    def counts(self) -> Counts: ...

    def list_jobs(
        self,
        queue: str = "",
        status: JobStatus | None = None,
        name_prefix: str = "",
        page_size: int = 0,
        page_token: str = "",
        label_selector: str = "",
    ) -> Page: ...

    def get_job(self, job_id: str) -> Job: ...

    def list_runs(
        self,
        job_id: str = "",
        status: RunStatus | None = None,
        page_size: int = 0,
        page_token: str = "",
        newest_first: bool = False,
    ) -> Page: ...

    def get_run(self, run_id: str) -> Run: ...

    def get_run_output(self, run_id: str, attempt: int = 0, offset: int = 0) -> RunOutput: ...

    def preview(
        self, spec_schedule: Schedule, after_ms: int | None, count: int, shape: JobSpec | None = None
    ) -> list[tuple[int, str]]: ...


def _arg(request: Request, name: str) -> str:
    return (request.query.get(name) or [""])[0].strip()


def _status(enum: Any, value: str, what: str) -> Any:
    """A status filter from the query (None for any); a bad one is a ``ValidationError`` naming the choices."""
    if not value:
        return None
    try:
        return enum(value.upper())
    except ValueError:
        raise ValidationError(f"unknown {what} status {value!r}: choose one of {', '.join(s.value for s in enum)}") from None


class WebView:
    def __init__(
        self,
        jobs: JobReader,
        cluster: Callable[[], ClusterOverview],
        now_ms: Callable[[], int],
        node_id: str,
        scheme: str = "http",
        auth: WebAuth | None = None,
        actions: WebActions | None = None,
    ) -> None:
        self.jobs = jobs
        self.cluster = cluster
        self.now_ms = now_ms
        self.node_id = node_id
        #: how to link to the other members' web views (https under [tls])
        self.scheme = scheme
        self.auth = auth
        #: pause, resume, trigger, retry, cancel (None: a read-only view)
        self.actions = actions

    def _page(
        self, request: Request, status: int, template: str, title: str, crumbs: list[tuple[str, str]], **ctx: Any
    ) -> Response:
        holder = self.auth.who(request) if self.auth is not None else ""
        ctx.setdefault("refresh", 0)
        ctx.setdefault("buttons", [])
        if holder and self.auth is not None:
            ctx["flashes"] = self.auth.sessions.take_flashes(request.cookie(self.auth.cookie))
        return page(status, template, title=title, crumbs=crumbs, node_id=self.node_id, holder=holder, **ctx)

    def _buttons(self, request: Request, job: Job | None, run: Run | None = None) -> list[tuple[str, str, str]]:
        return [] if self.actions is None else self.actions.buttons(request, job, run)

    def guarded(self, handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
        """``handler``, with the domain's refusals shown as pages (bugs still go to the router: a 500)."""

        def serve(request: Request) -> Response:
            try:
                return handler(request)
            except RejectedError as exc:
                status = 404 if isinstance(exc.rejected, NotFound) else 409
                return self._error(request, status, str(exc))
            except (ValidationError, OutOfRange) as exc:
                return self._error(request, 400, str(exc))
            except Unavailable as exc:
                why = f"{exc}. This page shows only what the cluster has committed, and there is no leader to ask now: retry in a few seconds (the cluster page answers meanwhile)"
                return self._error(request, 503, why)
            except Overloaded as exc:
                return self._error(request, 429, str(exc))

        return serve

    def _error(self, request: Request, status: int, message: str) -> Response:
        crumbs = [("Cluster", "/"), ("Error", "")]
        return self._page(request, status, "error.html", f"Error {status}", crumbs, code=status, message=message)

    # ---------------------------------------------------------------- pages

    def cluster_page(self, request: Request) -> Response:
        overview = self.cluster()
        counts = self.jobs.counts()
        members = [(m, f"{self.scheme}://{m.http_address}/" if m.http_address else "") for m in overview.members]
        runs = [(s.value, counts.runs.get(s, 0)) for s in RunStatus]
        jobs = [(s.value, counts.jobs_by_status.get(s, 0)) for s in JobStatus]  # DELETED ones are kept too, readable
        queues = [(q, n, link("/jobs", queue=q)) for q, n in sorted(counts.pending_by_queue.items())]
        return self._page(
            request, 200, "cluster.html", "Cluster", [("Cluster", "")],
            overview=overview, members=members, runs=runs, jobs=jobs, job_total=counts.jobs, queues=queues,
        )  # fmt: skip

    def jobs_page(self, request: Request) -> Response:
        """The jobs, filtered by status, queue, name prefix and ``labels`` (ListJobs' label selector)."""
        status_text, queue, name, labels, token = (_arg(request, k) for k in ("status", "queue", "name", "labels", "page"))
        status = _status(JobStatus, status_text, "job")
        found = self.jobs.list_jobs(queue, status, name, JOBS_PAGE, token, label_selector=label_filter(labels))
        filters = {"status": status.value if status else "", "queue": queue, "name": name, "labels": labels}
        return self._page(
            request, 200, "jobs.html", "Jobs", [("Cluster", "/"), ("Jobs", "")],
            rows=[job_row(j) for j in found.items], filters=filters, statuses=[s.value for s in JobStatus],
            selector_example=SELECTOR_EXAMPLE,
            next_href=link("/jobs", **filters, page=found.next_token) if found.next_token else "",
            first_href=link("/jobs", **filters) if token else "",
        )  # fmt: skip

    def job_page(self, request: Request) -> Response:
        job = self.jobs.get_job(request.params["job_id"])
        status_text, token = _arg(request, "status"), _arg(request, "page")
        status = _status(RunStatus, status_text, "run")
        runs = self.jobs.list_runs(job.job_id, status, RUNS_PAGE, token, newest_first=True)
        here = job_href(job.job_id)
        payload, utf8 = words.text_of(job.spec.payload)
        now = self.now_ms()
        return self._page(
            request, 200, "job.html", f"Job {job.spec.name}", [("Cluster", "/"), ("Jobs", "/jobs"), (job.spec.name, "")],
            job=job, spec=words.spec_rows(job.spec, job.anchor_ms), payload=payload, payload_utf8=utf8,
            upcoming=next_instants(job, self.jobs.preview, now), next_fire=next_fire_words(job, now),
            summary=summary_of(job, now), pause=pause_of(job, now), labels=label_chips(job.spec.labels),
            runs=[run_row(r) for r in runs.items], run_status=status.value if status else "",
            run_statuses=[(s.value, link(here, status=s.value)) for s in RunStatus], all_runs_href=here,
            next_href=link(here, status=status_text.upper(), page=runs.next_token) if runs.next_token else "",
            first_href=link(here, status=status_text.upper()) if token else "", buttons=self._buttons(request, job),
        )  # fmt: skip

    def run_page(self, request: Request) -> Response:
        """A run; ``?attempt=N`` shows attempt N's output (GetRunOutput's ``attempt``; 0 or none: the latest)."""
        run = self.jobs.get_run(request.params["run_id"])
        attempt_text = _arg(request, "attempt") or "0"
        if not attempt_text.isdigit() or len(attempt_text) > 9:
            raise ValidationError(f"attempt {attempt_text!r} is not a number: use 1, 2, ... (or 0 for the latest)")
        try:
            job: Job | None = self.jobs.get_job(run.job_id)
        except RejectedError:
            job = None  # deleted since: the run's page still shows
        name = job.spec.name if job is not None else run.job_id
        crumbs = [("Cluster", "/"), ("Jobs", "/jobs"), (name, job_href(run.job_id)), (f"run {run.run_id}", "")]
        going = run.status in ACTIVE_RUN_STATUSES
        attempts = attempt_rows(run, job)
        # a run carries its job's labels (as GetRun and ListRuns answer: JobService.run_labels reads the job's)
        labels = label_chips(job.spec.labels) if job is not None else []
        return self._page(
            request, 200, "run.html", f"Run {run.run_id}", crumbs,
            run=run, job=job, job_name=name, job_link=job_href(run.job_id), fields=run_fields(run, job),
            labels=labels, origin=run_origin(run),
            output=output_view(self.jobs.get_run_output(run.run_id, int(attempt_text))), run_href=run_href(run.run_id),
            attempts=attempts, log_folder=log_folder(attempts), explanation=explanation_rows(getattr(self.jobs, "explain_run", None), run.run_id),
            refresh=LIVE_REFRESH_S if going else 0, buttons=self._buttons(request, job, run),
        )  # fmt: skip


def add_web_routes(router: Router, view: WebView) -> None:
    """The pages (behind the router's authorizer), the style sheet (public) and, under ``[auth]``, sign-in."""
    css = style_sheet()
    router.add(STYLE_PATH, lambda request: Response(200, css, CSS, (("Cache-Control", "max-age=3600"),)), public=True)
    router.add("/", view.guarded(view.cluster_page))
    router.add("/jobs", view.guarded(view.jobs_page))
    router.add("/jobs/{job_id}", view.guarded(view.job_page))
    router.add("/runs/{run_id}", view.guarded(view.run_page))
    if view.actions is not None:
        both = ("GET", "POST")
        router.add("/jobs/{job_id}/{action}", view.guarded(view.actions.on_job), methods=both)
        router.add("/runs/{run_id}/{action}", view.guarded(view.actions.on_run), methods=both)
    if view.auth is not None:
        view.auth.add_routes(router)
        router.refused = view.auth.refusal_page
