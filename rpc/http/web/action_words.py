"""What the web view's actions say: which ones a job or run offers now, the confirmation's question and
what will happen, and the result of each in a line.

Pure: records in, words out. Which actions a status offers mirrors what the
state machine accepts (``raftsched.cluster.fsm.jobs`` and ``runs``): a job
that is ACTIVE can be paused, a PAUSED one resumed, any job but a DELETED
one triggered; a DEAD_LETTER, FAILED or CANCELLED run of a job that is not
deleted can be retried, a PENDING or LEASED one cancelled (once). The
cluster still decides: an action whose record changed meanwhile is refused
with the cluster's own words.
"""

from __future__ import annotations

from dataclasses import dataclass

from raftsched.cluster.domain.model import Job, JobStatus, Run, RunStatus
from raftsched.cluster.fsm.runs import RETRYABLE

JOB, RUN = "job", "run"


@dataclass(frozen=True)
class Action:
    """One action: its name in the address, the gRPC method whose rules it follows, what it acts on."""

    name: str
    method: str
    on: str
    #: the button's text
    label: str


PAUSE = Action("pause", "PauseJob", JOB, "Pause")
RESUME = Action("resume", "ResumeJob", JOB, "Resume")
TRIGGER = Action("trigger", "TriggerJob", JOB, "Trigger now")
RETRY = Action("retry", "RetryRun", RUN, "Retry")
CANCEL = Action("cancel", "CancelRun", RUN, "Cancel run")
#: per kind of page, its actions by name (in the order of the buttons)
ACTIONS: dict[str, dict[str, Action]] = {
    JOB: {a.name: a for a in (PAUSE, RESUME, TRIGGER)},
    RUN: {a.name: a for a in (RETRY, CANCEL)},
}


def job_actions(job: Job) -> list[Action]:
    """The actions the job's status allows now."""
    offered = []
    if job.status is JobStatus.ACTIVE:
        offered.append(PAUSE)
    if job.status is JobStatus.PAUSED:
        offered.append(RESUME)
    if job.status is not JobStatus.DELETED:
        offered.append(TRIGGER)
    return offered


def run_actions(run: Run, job: Job | None) -> list[Action]:
    """The actions the run's status (and its job's) allows now."""
    offered = []
    if run.status in RETRYABLE and job is not None and job.status is not JobStatus.DELETED:
        offered.append(RETRY)
    if run.status is RunStatus.PENDING or (run.status is RunStatus.LEASED and not run.cancel_requested):
        offered.append(CANCEL)
    return offered


def _job_named(job: Job) -> str:
    return f"job {job.spec.name} ({job.job_id})"


def question(action: Action, job: Job | None, run: Run | None) -> tuple[str, str]:
    """(the question, what will happen) of the confirmation page."""
    if action is PAUSE and job is not None:
        return (
            f"Pause {_job_named(job)}?",
            "It fires no new run until it is resumed. Runs already fired are not affected: PENDING ones are still "
            "leased, LEASED ones go on.",
        )
    if action is RESUME and job is not None:
        return (
            f"Resume {_job_named(job)}?",
            "It fires again from now on. Instants that came due while it was paused are skipped, not made up (each "
            "skip is recorded).",
        )
    if action is TRIGGER and job is not None:
        return (
            f"Trigger {_job_named(job)} now?",
            f"One extra run is made now, PENDING on queue {job.spec.queue}, with the job's payload. The schedule is not changed.",
        )
    assert run is not None, f"{action.name} acts on a run"
    of_job = f" of {_job_named(job)}" if job is not None else ""
    if action is RETRY:
        budget = job.spec.retry.max_attempts if job is not None else 0
        return (
            f"Retry run {run.run_id}{of_job}?",
            f"The run, now {run.status.value}, becomes PENDING again with a fresh budget of {budget} attempt(s), "
            "leasable at once. Its earlier attempts stay in its record.",
        )
    if run.status is RunStatus.LEASED:
        return (
            f"Cancel run {run.run_id}{of_job}?",
            f"The run is LEASED by executor {run.executor_id}: the executor learns of the cancel at its next lease "
            "renewal and stops the run, which then ends CANCELLED.",
        )
    return (
        f"Cancel run {run.run_id}{of_job}?",
        f"The run, now {run.status.value}, ends CANCELLED and is never leased. The job's schedule is not changed.",
    )


def outcome(action: Action, target: Job | Run, name: str) -> str:
    """The flash message of an action the cluster accepted (``target``: what it answered with)."""
    if isinstance(target, Job):
        verb = {PAUSE.name: "Paused", RESUME.name: "Resumed"}.get(action.name, "Changed")
        return f"{verb} job {name} ({target.job_id}): it is {target.status.value}."
    if action is TRIGGER:
        return f"Triggered job {name} ({target.job_id}): run {target.run_id} is {target.status.value}."
    if action is RETRY:
        return f"Retried run {target.run_id}: it is {target.status.value} again, with a fresh attempt budget."
    if target.status is RunStatus.LEASED:
        return f"Cancel requested for run {target.run_id}: its executor stops it at its next lease renewal."
    return f"Run {target.run_id} is {target.status.value}."
