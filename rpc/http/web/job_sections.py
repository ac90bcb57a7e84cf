"""What the jobs and job pages show, built from domain records: table rows with their labels, a job's
summary and pause, its next instants.

Pure but for the ``preview`` it is handed (``JobService.preview``: the
schedule evaluation PreviewSchedule answers with, DST notes included, the
spec's bounds, extra crons and skips applied). A job's summary and pause are
``Job.info`` as the job service reads it (what GetJob answers with:
``raftsched.rpc.convert.job_to_pb``); a run carries its job's labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.model import After, At, Cron, Every, Job, JobSpec, JobStatus, Run, Schedule
from raftsched.cluster.domain.spec_extras import parse_selector
from raftsched.rpc.http.web import words
from raftsched.rpc.http.web.links import job_href, link, run_href
from raftsched.rpc.http.web.run_sections import is_notification, origin_note

#: ``preview(schedule, after_ms, count, shape)`` -> [(instant ms, DST or skip note)]
Preview = Callable[[Schedule, "int | None", int, "JobSpec | None"], list[tuple[int, str]]]
NEXT_COUNT = 5
NOTE_CHARS = 80
#: characters of a job's last error its summary shows on one line (the whole of it is one click away)
ERROR_CHARS = 160
#: labels a row of the jobs table shows (the rest: "+N", all of them in its title)
ROW_LABELS = 3
#: what a bad selector's page suggests, and the name ListJobs' messages give the selector
SELECTOR_EXAMPLE = "team=billing,tier!=low"
SELECTOR_FIELD = "label_selector"


def schedule_short(schedule: Schedule, extra_crons: int = 0) -> str:
    """``every 2s``, ``cron '30 2 * * *' Europe/Berlin +1 cron``, ``at ...``, ``after 5m``: a table cell."""
    if isinstance(schedule, At):
        return f"at {words.utc(schedule.at_ms)}"
    if isinstance(schedule, After):
        return f"after {words.span(schedule.after_ms)}"
    if isinstance(schedule, Every):
        return f"every {words.span(schedule.every_ms)}"
    if isinstance(schedule, Cron):
        more = f" +{extra_crons} cron{'s' if extra_crons > 1 else ''}" if extra_crons else ""
        return f"cron '{schedule.expression}' {schedule.timezone or 'UTC'}{more}"
    return words.NONE


class LabelChip(NamedTuple):
    """A label as ``key=value``, and the jobs page of the jobs that carry it ("" when its value cannot be
    written in a selector: it holds a ``,``, ``=`` or ``!``, or space at an end)."""

    text: str
    href: str


def label_chips(labels: tuple[tuple[str, str], ...]) -> list[LabelChip]:
    chips = []
    for key, value in labels:
        selectable = not any(c in value for c in ",=!") and value == value.strip()
        chips.append(LabelChip(f"{key}={value}", link("/jobs", labels=f"{key}={value}") if selectable else ""))
    return chips


def label_filter(text: str) -> str:
    """The jobs page's ``labels`` filter, checked as ListJobs' ``label_selector`` is: a ``ValidationError``
    (a 400 page) that names the filter by the name the page gives it, says what is wrong and shows one."""
    try:
        parse_selector(text)
    except ValidationError as exc:
        why = str(exc)
        if why.startswith(SELECTOR_FIELD):
            why = "the labels filter" + why[len(SELECTOR_FIELD) :]
        raise ValidationError(f"{why}; for example {SELECTOR_EXAMPLE} (every term must hold)") from None
    return text


def next_fire_words(job: Job, now_ms: int) -> str:
    """When the job fires next (``2026-... UTC (in 4s)``): only an ACTIVE job fires (as GetJob shows it)."""
    if job.status is not JobStatus.ACTIVE:
        return f"none while it is {job.status.value}"
    return words.utc_ago(job.next_fire_ms, now_ms)


@dataclass(frozen=True)
class JobRow:
    href: str
    job_id: str
    name: str
    status: str
    queue: str
    type: str
    schedule: str
    next_fire: str
    #: the first ``ROW_LABELS`` labels; how many more; all of them in one line (the cell's title)
    labels: tuple[LabelChip, ...] = ()
    more_labels: int = 0
    all_labels: str = ""


def job_row(job: Job) -> JobRow:
    chips = label_chips(job.spec.labels)
    return JobRow(
        job_href(job.job_id),
        job.job_id,
        job.spec.name,
        job.status.value,
        job.spec.queue,
        job.spec.type,
        schedule_short(job.spec.schedule, len(job.spec.extra_crons)),
        words.utc(job.next_fire_ms) if job.status is JobStatus.ACTIVE else words.NONE,
        tuple(chips[:ROW_LABELS]),
        max(0, len(chips) - ROW_LABELS),
        ", ".join(c.text for c in chips),
    )


@dataclass(frozen=True)
class RunRow:
    href: str
    run_id: str
    status: str
    scheduled: str
    fired: str
    attempt: int
    executor: str
    finished: str
    note: str
    #: when it fired and finished, after its scheduled instant (``+3ms``; a fire's look-ahead is negative)
    fired_after: str = words.NONE
    finished_after: str = words.NONE


def run_note(run: Run) -> str:
    """The error (shortened), or what a run is doing; a notification says so first, whatever else it says."""
    origin = origin_note(run)
    error = words.shorten(run.error, NOTE_CHARS) if run.error else ""
    if is_notification(run):
        return f"{origin}: {error}" if error else origin
    if error:
        return error
    if origin:
        return origin
    if run.skipped_count:
        return f"stands for {run.skipped_count} skipped instant(s)"
    return ""


def run_row(run: Run) -> RunRow:
    return RunRow(
        run_href(run.run_id),
        run.run_id,
        run.status.value,
        words.utc(run.scheduled_ms, millis=True),
        words.utc(run.fired_ms, millis=True),
        run.attempt,
        run.executor_id or words.NONE,
        words.utc(run.finished_ms, millis=True),
        run_note(run),
        words.after(run.fired_ms, run.scheduled_ms),
        words.after(run.finished_ms, run.scheduled_ms),
    )


@dataclass(frozen=True)
class Summary:
    """A job's runs in numbers (``JobInfo``, kept by apply): each value as its cell shows it."""

    succeeded: str
    failed: str
    skipped: str
    #: failures since the last success, and where the job pauses itself (``pause_after_failures``)
    in_a_row: str
    last_success: str
    last_failure: str
    #: the last error on one line, cut to ``ERROR_CHARS`` ("" for none); the whole of it when that was cut
    last_error: str
    last_error_full: str
    #: runs its schedule fired (``Job.fire_count``); ``N of max_runs`` when the spec sets one (``JobInfo.scheduled_runs``)
    scheduled_runs: str


def summary_of(job: Job, now_ms: int) -> Summary:
    info, spec = job.info, job.spec
    in_a_row = str(info.consecutive_failures)
    if spec.pause_after_failures:
        in_a_row += f" (it pauses itself at {spec.pause_after_failures})"
    error = words.shorten(info.last_error, ERROR_CHARS) if info.last_error else ""
    full = info.last_error if error and error != info.last_error else ""
    # apply counts a job's scheduled runs against its max_runs only while it has one: else the job's own count
    fired = f"{info.scheduled_runs} of {spec.max_runs}" if spec.max_runs else str(job.fire_count)
    return Summary(
        str(info.success_count),
        str(info.failure_count),
        str(info.skipped_count),
        in_a_row,
        words.utc_ago(info.last_success_ms, now_ms, "never"),
        words.utc_ago(info.last_failure_ms, now_ms, "never"),
        error,
        full,
        fired,
    )


@dataclass(frozen=True)
class Pause:
    """Why a PAUSED job is paused ("" when no note was given) and when it resumes by itself."""

    note: str
    #: ``resumes by itself at <UTC> (in 59m)``, or that it waits to be resumed
    until: str


def pause_of(job: Job, now_ms: int) -> Pause | None:
    """The job's pause; None unless it is PAUSED (as GetJob, which shows a pause's note and until only then)."""
    if job.status is not JobStatus.PAUSED:
        return None
    until_ms = job.info.paused_until_ms
    if not until_ms:
        return Pause(job.info.pause_note, "until someone resumes it (no time to resume by itself was given)")
    return Pause(job.info.pause_note, f"resumes by itself at {words.utc_ago(until_ms, now_ms)}")


@dataclass(frozen=True)
class Instant:
    in_zone: str
    utc: str
    relative: str
    note: str


@dataclass(frozen=True)
class NextInstants:
    zone: str
    instants: list[Instant]
    #: why there are none, or what they mean (a paused job's)
    remark: str


def _after_for(job: Job, start_ms: int) -> int:
    """The ``after`` to preview from so that the first instant is the job's first one at or after ``start_ms``."""
    schedule = job.spec.schedule
    if isinstance(schedule, Every) and schedule.every_ms > 0:
        # an interval counts from the job's anchor: start from the last instant on that grid before start_ms
        steps = max(0, (start_ms - 1 - job.anchor_ms) // schedule.every_ms)
        return job.anchor_ms + steps * schedule.every_ms
    return start_ms - 1


def next_instants(job: Job, preview: Preview, now_ms: int, count: int = NEXT_COUNT) -> NextInstants:
    """The job's next instants in its zone (UTC beside), from its next fire (or from now while paused)."""
    schedule = job.spec.schedule
    zone = (schedule.timezone or "UTC") if isinstance(schedule, Cron) else "UTC"
    if job.status in (JobStatus.COMPLETED, JobStatus.DELETED):
        return NextInstants(zone, [], f"none: the job is {job.status.value}")
    paused = job.status is JobStatus.PAUSED
    if isinstance(schedule, (At, After)):
        if job.next_fire_ms is None:
            return NextInstants(zone, [], "none: this one-off job has fired")
        times = [(job.next_fire_ms, "")]
    elif paused or job.next_fire_ms is not None:
        start = now_ms if paused or job.next_fire_ms is None else job.next_fire_ms
        times = preview(schedule, _after_for(job, start), count, job.spec)
    else:
        times = []
    instants = [Instant(words.in_zone(ms, zone), words.utc(ms), words.relative(ms, now_ms), note) for ms, note in times]
    if paused:
        remark = "the job is PAUSED: these are the instants its schedule gives from now; none fires until it is resumed"
    else:
        remark = "" if instants else "none: the schedule gives no later instant"
    return NextInstants(zone, instants, remark)
