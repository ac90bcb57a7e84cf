"""What the cluster answers, as plain frozen dataclasses: never protobuf messages.

Instants are aware UTC ``datetime``s (``None``: not set), spans
``timedelta``s, statuses and kinds their names as text (``"SUCCEEDED"``,
``"ACTIVE"``, ``"CRON"``...). A run's ``result`` and an attempt's
``heartbeat`` are decoded as ``raftsched.sdk.codec.decode`` says (JSON where
they are JSON); the bytes as sent stay beside them (``result_bytes``).
``raftsched.sdk.from_pb`` makes them from the protobuf answers.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Mapping

from raftsched.sdk import codec

#: the statuses a run never leaves
TERMINAL_RUN_STATUSES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "DEAD_LETTER", "SKIPPED", "EXPIRED"})


@dataclass(frozen=True)
class Schedule:
    """When a job fires: ``kind`` is ``"every"``, ``"cron"``, ``"at"`` or ``"after"``; the field of that name
    holds it (``cron`` the expression, ``tz`` its IANA zone)."""

    kind: str
    every: dt.timedelta | None = None
    cron: str | None = None
    tz: str | None = None
    at: dt.datetime | None = None
    after: dt.timedelta | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed run is retried: up to ``max_attempts`` attempts, waiting ``initial_backoff`` times
    ``multiplier`` per attempt (at most ``max_backoff``), give or take ``jitter`` (a fraction)."""

    max_attempts: int
    initial_backoff: dt.timedelta
    max_backoff: dt.timedelta
    multiplier: float
    jitter: float


@dataclass(frozen=True)
class JobSpec:
    """What a job runs and when, as the cluster holds it (its defaults filled in by the cluster)."""

    name: str
    queue: str
    type: str
    payload_bytes: bytes
    schedule: Schedule
    retry: RetryPolicy | None = None
    lease_ttl: dt.timedelta | None = None
    timeout: dt.timedelta | None = None
    concurrency: str = ""
    misfire: str = ""
    catchup_window: dt.timedelta | None = None
    history_limit: int = 0
    history_ttl: dt.timedelta | None = None
    failed_history_limit: int = 0
    #: fields of the cluster's JobSpec this SDK has no attribute for, by name, as JSON values
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def payload(self) -> Any:
        """The payload decoded: JSON where it is JSON, else text, else bytes."""
        return codec.decode(self.payload_bytes)


@dataclass(frozen=True)
class Job:
    """A job: ``id``, its ``spec``, its ``status`` (``ACTIVE``, ``PAUSED``, ``COMPLETED``, ``DELETED``)."""

    id: str
    spec: JobSpec
    status: str
    next_fire_time: dt.datetime | None
    created_at: dt.datetime | None
    updated_at: dt.datetime | None
    idempotency_key: str = ""
    fire_count: int = 0
    #: its next instants (at most 5, the first being ``next_fire_time``); empty when it will not fire again or
    #: is paused
    upcoming: tuple[dt.datetime, ...] = ()
    #: why it is paused and when it resumes itself ("" and None when it is not paused)
    pause_note: str = ""
    paused_until: dt.datetime | None = None
    #: its runs' summary, kept as they end: runs SUCCEEDED; FAILED or DEAD_LETTER; instants skipped; failures
    #: since the last success; when the last success and failure ended; the last failure's error
    success_count: int = 0
    failure_count: int = 0
    skipped_count: int = 0
    consecutive_failures: int = 0
    last_success_time: dt.datetime | None = None
    last_failure_time: dt.datetime | None = None
    last_error: str = ""

    @property
    def labels(self) -> Mapping[str, str]:
        """Its labels (``labels=`` of ``create_job``)."""
        return dict(self.spec.extra.get("labels", {}))

    @property
    def name(self) -> str:
        """The job's name (its spec's)."""
        return self.spec.name

    @property
    def queue(self) -> str:
        """The queue its runs are offered on."""
        return self.spec.queue

    @property
    def type(self) -> str:
        """The job type: the task (or built-in) that runs it."""
        return self.spec.type

    @property
    def payload(self) -> Any:
        """The payload decoded: JSON where it is JSON, else text, else bytes."""
        return self.spec.payload


@dataclass(frozen=True)
class Attempt:
    """One attempt of a run: its lease, and how it ended (``outcome``: ``SUCCEEDED``, ``FAILED``,
    ``LEASE_EXPIRED``, ``CANCELLED``; ``None`` while it runs)."""

    attempt: int
    executor_id: str
    lease_id: str
    fencing_token: int
    leased_at: dt.datetime | None
    finished_at: dt.datetime | None
    outcome: str | None
    error: str = ""
    log_uri: str = ""
    #: the last heartbeat details its task sent (decoded), or None
    heartbeat: Any = None
    heartbeat_at: dt.datetime | None = None


@dataclass(frozen=True)
class Run:
    """One firing of a job. ``status``: ``PENDING``, ``LEASED``, ``SUCCEEDED``, ``FAILED``, ``CANCELLED``,
    ``DEAD_LETTER``, ``SKIPPED``. ``result``: what the task returned, decoded."""

    id: str
    job_id: str
    status: str
    attempt: int
    scheduled_time: dt.datetime | None
    fired_at: dt.datetime | None = None
    queue: str = ""
    executor_id: str = ""
    lease_id: str = ""
    fencing_token: int = 0
    lease_expires_at: dt.datetime | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    result_bytes: bytes = b""
    error: str = ""
    log_uri: str = ""
    manual: bool = False
    cancel_requested: bool = False
    not_before: dt.datetime | None = None
    skipped_count: int = 0
    skipped_until: dt.datetime | None = None
    attempts: tuple[Attempt, ...] = ()
    attempts_dropped: int = 0
    #: its job's labels
    labels: Mapping[str, str] = field(default_factory=dict)
    #: made by ``backfill_job``
    backfill: bool = False

    @property
    def result(self) -> Any:
        """The task's result: JSON decoded where it is JSON, else text, else bytes; None when there is none."""
        return codec.decode(self.result_bytes)

    @property
    def terminal(self) -> bool:
        """Whether the run has ended (no more attempts will be made unless someone retries it)."""
        return self.status in TERMINAL_RUN_STATUSES


@dataclass(frozen=True)
class ExplanationStep:
    """One thing that happened to a run: ``kind`` (``fired``, ``leased``, ``retry_scheduled``, ...) and
    ``detail`` in words."""

    at: dt.datetime | None
    kind: str
    detail: str
    node_id: str = ""


@dataclass(frozen=True)
class Explanation:
    """Why a run exists and what happened to it, step by step (``ExplainRun``)."""

    run_id: str
    steps: tuple[ExplanationStep, ...]
    run: Run
    steps_dropped: int = 0


@dataclass(frozen=True)
class RunOutput:
    """An attempt's log and result (``GetRunOutput``); ``missing_reason`` says why a log is absent."""

    run_id: str
    attempt: int
    log: bytes
    result_bytes: bytes = b""
    log_uri: str = ""
    missing_reason: str = ""
    live: bool = False
    next_offset: int = 0
    size: int = 0
    fencing_token: int = 0
    note: str = ""

    @property
    def text(self) -> str:
        """The log as text (undecodable bytes replaced)."""
        return self.log.decode("utf-8", "replace")

    @property
    def result(self) -> Any:
        """The attempt's result, decoded as ``Run.result`` is."""
        return codec.decode(self.result_bytes)


@dataclass(frozen=True)
class RunEvent:
    """One change of a run (``watch_runs``): ``kind`` is ``existing``, ``fired``, ``leased``,
    ``retry_scheduled``, ``cancel_requested``, ``finished``, ``skipped`` or ``pruned``."""

    kind: str
    run: Run
    observed_at: dt.datetime | None = None


@dataclass(frozen=True)
class Member:
    """A member of the cluster as the answering node sees it (``role``: ``LEADER``, ``FOLLOWER``, ...)."""

    id: str
    raft_address: str
    grpc_address: str
    role: str
    reachable: bool
    version: str = ""
    http_address: str = ""
    clock_offset: dt.timedelta | None = None
    clock_ok: bool = True
    storage_ok: bool = True
    clock_measured: bool = False
    unfit_reason: str = ""


@dataclass(frozen=True)
class ClusterStatus:
    """The cluster as the answering node sees it (``GetClusterStatus``)."""

    self_id: str
    leader_id: str
    members: tuple[Member, ...]
    term: int
    commit_index: int
    applied_index: int
    last_snapshot_index: int = 0
    has_quorum: bool = False
    runs: Mapping[str, int] = field(default_factory=dict)
    jobs: int = 0
    pending_by_queue: Mapping[str, int] = field(default_factory=dict)
    command_format: int = 0
    membership_change: str = ""


@dataclass(frozen=True)
class Identity:
    """Whose token the client calls with, as the cluster names it (``WhoAmI``). ``tokens_required`` False: the
    cluster takes calls without a token (and the rest is empty). An executor token acts as executor ``name`` or
    ``name/...``; ``queues`` and ``types`` empty: any."""

    tokens_required: bool
    name: str = ""
    roles: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()
    types: tuple[str, ...] = ()


@dataclass(frozen=True)
class Backfill:
    """What ``backfill_job`` did (or, with ``dry_run``, would do): the instants, and the runs made for them."""

    instants: tuple[dt.datetime, ...]
    runs: tuple[Run, ...] = ()


@dataclass(frozen=True)
class ScheduledInstant:
    """An instant a schedule would fire at (``preview_schedule``), with a note of what DST did to it."""

    time: dt.datetime
    note: str = ""
