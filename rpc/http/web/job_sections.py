"""What the jobs and job pages show, built from domain records: table rows, a job's next instants.

Pure but for the ``preview`` it is handed (``JobService.preview``: the
schedule evaluation PreviewSchedule answers with, DST notes included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable
from urllib.parse import quote

from raftsched.cluster.domain.model import After, At, Cron, Every, Job, JobStatus, Run, Schedule
from raftsched.rpc.http.web import words

#: ``preview(schedule, after_ms, count)`` -> [(instant ms, DST note)]
Preview = Callable[[Schedule, "int | None", int], list[tuple[int, str]]]
NEXT_COUNT = 5
NOTE_CHARS = 80


def job_href(job_id: str) -> str:
    return "/jobs/" + quote(job_id, safe="")


def run_href(run_id: str) -> str:
    return "/runs/" + quote(run_id, safe="")


def schedule_short(schedule: Schedule) -> str:
    """``every 2s``, ``cron '30 2 * * *' Europe/Berlin``, ``at ...``, ``after 5m``: a table cell."""
    if isinstance(schedule, At):
        return f"at {words.utc(schedule.at_ms)}"
    if isinstance(schedule, After):
        return f"after {words.span(schedule.after_ms)}"
    if isinstance(schedule, Every):
        return f"every {words.span(schedule.every_ms)}"
    if isinstance(schedule, Cron):
        return f"cron '{schedule.expression}' {schedule.timezone or 'UTC'}"
    return words.NONE


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


def job_row(job: Job) -> JobRow:
    return JobRow(
        job_href(job.job_id),
        job.job_id,
        job.spec.name,
        job.status.value,
        job.spec.queue,
        job.spec.type,
        schedule_short(job.spec.schedule),
        words.utc(job.next_fire_ms),
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
    """The error (shortened), or what a run is doing."""
    if run.error:
        text = " ".join(run.error.split())
        return text if len(text) <= NOTE_CHARS else text[: NOTE_CHARS - 3] + "..."
    if run.manual:
        return "triggered by hand"
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
        times = preview(schedule, _after_for(job, start), count)
    else:
        times = []
    instants = [Instant(words.in_zone(ms, zone), words.utc(ms), words.relative(ms, now_ms), note) for ms, note in times]
    if paused:
        remark = "the job is PAUSED: these are the instants its schedule gives from now; none fires until it is resumed"
    else:
        remark = "" if instants else "none: the schedule gives no later instant"
    return NextInstants(zone, instants, remark)
