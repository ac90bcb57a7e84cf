"""The commands a client's calls propose for its jobs and runs: create, update, pause, resume, delete, trigger,
cancel, retry (format 3). Each may carry a ``request_id``: the same id again within 24 h returns the first
answer (``raftsched.cluster.fsm.requests``)."""

from __future__ import annotations

from dataclasses import dataclass

from raftsched.cluster.domain.commands.wire import INT, RID, STR, Field, Kind, command, omitted, optional
from raftsched.cluster.domain.model import JobSpec
from raftsched.cluster.domain.spec_codec import b64, spec_from_plain, spec_to_plain, unb64

SPEC = Kind(spec_to_plain, spec_from_plain)
BYTES = Kind(b64, unb64)
JOB_ID = Field("job_id", "job_id", STR)


@command(
    "create_job",
    (
        JOB_ID, Field("spec", "spec", SPEC), optional("idem", "idempotency_key", STR), optional("fp", "fingerprint", STR),
        RID, omitted("qj", "max_jobs", INT),
    ),
)  # fmt: skip
@dataclass(frozen=True, slots=True)
class CreateJob:
    now_ms: int
    job_id: str
    spec: JobSpec
    idempotency_key: str = ""
    #: ``spec_codec.spec_fingerprint(spec)``, computed once by the proposer instead of on every replica
    fingerprint: str = ""
    #: the proposer's ``[limits] max_jobs``: refused when the state already keeps that many (0: no quota)
    max_jobs: int = 0
    #: the same id again within 24 h returns the first answer (``raftsched.cluster.fsm.requests``)
    request_id: str = ""


@command("update_job", (JOB_ID, Field("spec", "spec", SPEC), RID))
@dataclass(frozen=True, slots=True)
class UpdateJob:
    now_ms: int
    job_id: str
    spec: JobSpec
    request_id: str = ""


@command("pause_job", (JOB_ID, RID, omitted("note", "note", STR, since=5), omitted("until", "until_ms", INT, since=5)))
@dataclass(frozen=True, slots=True)
class PauseJob:
    now_ms: int
    job_id: str
    request_id: str = ""
    #: why (format 5), and when the job resumes itself (0: when resumed)
    note: str = ""
    until_ms: int = 0


@command("resume_job", (JOB_ID, RID))
@dataclass(frozen=True, slots=True)
class ResumeJob:
    now_ms: int
    job_id: str
    request_id: str = ""


@command("delete_job", (JOB_ID, RID))
@dataclass(frozen=True, slots=True)
class DeleteJob:
    now_ms: int
    job_id: str
    request_id: str = ""


@command("trigger_job", (JOB_ID, RID, omitted("qp", "max_pending", INT), omitted("payload", "payload", BYTES, since=5)))
@dataclass(frozen=True, slots=True)
class TriggerJob:
    now_ms: int
    job_id: str
    #: the proposer's ``[limits] max_pending_runs`` (0: no quota)
    max_pending: int = 0
    request_id: str = ""
    #: this run's payload instead of the job's (format 5; empty: the job's)
    payload: bytes = b""


@command(
    "backfill_job",
    (JOB_ID, Field("from", "start_ms", INT), Field("to", "end_ms", INT), omitted("qp", "max_pending", INT)),
    since=5,
)
@dataclass(frozen=True, slots=True)
class BackfillJob:
    """A run for each instant of the job's schedule in ``[start_ms, end_ms)`` the job has passed that has no run
    (``raftsched.cluster.fsm.backfill``)."""

    now_ms: int
    job_id: str
    start_ms: int
    end_ms: int
    #: the proposer's ``[limits] max_pending_runs`` (0: no quota)
    max_pending: int = 0


@command("cancel_run", (Field("run_id", "run_id", STR), RID))
@dataclass(frozen=True, slots=True)
class CancelRun:
    now_ms: int
    run_id: str
    request_id: str = ""


@command(
    "retry_run",
    (Field("run_id", "run_id", STR), optional("by", "requested_by", STR), RID, omitted("qp", "max_pending", INT)),
    since=3,
)
@dataclass(frozen=True, slots=True)
class RetryRun:
    """A DEAD_LETTER, FAILED or CANCELLED run becomes PENDING again with a fresh attempt budget.
    ``requested_by``: who asked (the caller's token name, if known), for the run's explanation."""

    now_ms: int
    run_id: str
    requested_by: str = ""
    #: the proposer's ``[limits] max_pending_runs`` (0: no quota)
    max_pending: int = 0
    request_id: str = ""
