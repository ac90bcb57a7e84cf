"""Domain records of the job state machine.

Plain values only: no grpc, no pysyncobj, no clock. Times are integer
milliseconds since the Unix epoch (UTC); spans are integer milliseconds.

Records are mutated only inside ``JobStateMachine.apply`` (on the Raft tick
thread, under the machine's lock); every other reader sees them through that
lock and must not mutate them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, NamedTuple, Union

# --------------------------------------------------------------- schedules


@dataclass(frozen=True, slots=True)
class At:
    """Fire once at an absolute instant."""

    at_ms: int


@dataclass(frozen=True, slots=True)
class After:
    """Fire once, ``after_ms`` after the job was created."""

    after_ms: int


@dataclass(frozen=True, slots=True)
class Every:
    """Fire every ``every_ms``, anchored at the job's creation (or last schedule change)."""

    every_ms: int


@dataclass(frozen=True, slots=True)
class Cron:
    """A cron expression (5 fields, or 6 with seconds LAST, as croniter reads it) evaluated in an IANA zone."""

    expression: str
    timezone: str = "UTC"


Schedule = Union[At, After, Every, Cron]


# ----------------------------------------------------------------- policies


class ConcurrencyPolicy(str, Enum):
    ALLOW = "ALLOW"
    FORBID = "FORBID"
    REPLACE = "REPLACE"


class MisfirePolicy(str, Enum):
    FIRE_ALL = "FIRE_ALL"
    FIRE_ONCE = "FIRE_ONCE"
    SKIP = "SKIP"


class JobStatus(str, Enum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    DELETED = "DELETED"


class RunStatus(str, Enum):
    PENDING = "PENDING"
    LEASED = "LEASED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    DEAD_LETTER = "DEAD_LETTER"
    SKIPPED = "SKIPPED"
    #: still PENDING ``pending_ttl`` after it became leasable (command format 5)
    EXPIRED = "EXPIRED"


ACTIVE_RUN_STATUSES = frozenset({RunStatus.PENDING, RunStatus.LEASED})
TERMINAL_RUN_STATUSES = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.DEAD_LETTER, RunStatus.SKIPPED, RunStatus.EXPIRED}
)

DEFAULT_LEASE_TTL_MS = 30_000
DEFAULT_CATCHUP_WINDOW_MS = 24 * 3600 * 1000
DEFAULT_HISTORY_LIMIT = 1000
DEFAULT_FAILED_HISTORY_LIMIT = 1000
DEFAULT_HISTORY_TTL_MS = 7 * 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 3
    initial_backoff_ms: int = 1_000
    max_backoff_ms: int = 60_000
    multiplier: float = 2.0
    jitter: float = 0.2


class TimeWindow(NamedTuple):
    """A span of time ``[start_ms, end_ms)`` no instant of a job fires in (``JobSpec.skip_windows``)."""

    start_ms: int
    end_ms: int


#: the events a notification rule may name (``NotifyRule.events``)
NOTIFY_EVENTS = ("FAILED", "DEAD_LETTER", "EXPIRED", "RECOVERED", "SKIPPED", "SUCCEEDED")


#: the built-in job type of notifications, and the queue they are offered on
NOTIFY_TYPE = "notify"
NOTIFY_QUEUE = "raftsched.notify"


class NotifyRule(NamedTuple):
    """Deliver a notification of these ``events`` of a job's runs to ``url`` (signed with the executor's secret
    ``secret_name``, if named)."""

    events: tuple[str, ...]
    url: str
    secret_name: str = ""


class JobSpec(NamedTuple):
    """What to run and when. Validated by ``raftsched.cluster.domain.validation`` before it is proposed.

    A NamedTuple rather than a frozen dataclass: immutable all the same, and
    ~15x cheaper to build, which is what a restart of a million jobs does.
    """

    name: str
    schedule: Schedule
    queue: str = "default"
    type: str = "shell"
    payload: bytes = b""
    retry: RetryPolicy = RetryPolicy()
    lease_ttl_ms: int = DEFAULT_LEASE_TTL_MS
    timeout_ms: int = 0
    concurrency: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    misfire: MisfirePolicy = MisfirePolicy.FIRE_ALL
    catchup_window_ms: int = DEFAULT_CATCHUP_WINDOW_MS
    #: finished runs kept per job (oldest dropped first) and for how long
    history_limit: int = DEFAULT_HISTORY_LIMIT
    history_ttl_ms: int = DEFAULT_HISTORY_TTL_MS
    #: FAILED and DEAD_LETTER runs kept per job apart from the others (from the cluster's command format 3 on:
    #: ``raftsched.cluster.fsm.retention``), so that a burst of successes does not prune them
    failed_history_limit: int = DEFAULT_FAILED_HISTORY_LIMIT
    # From here on: the schedule's bounds and exceptions, and what a job does beyond firing (command format 5:
    # ``SCHEDULES_FORMAT``). Each is stored only when it is not its default, so that a spec without them keeps
    # the bytes, and the fingerprint, it always had.
    #: no instant before ``start_ms`` or after ``end_ms`` (0: unbounded)
    start_ms: int = 0
    end_ms: int = 0
    #: each instant's run is leasable a deterministic offset in [0, jitter_ms) after it
    jitter_ms: int = 0
    #: no instant on these dates (``YYYY-MM-DD`` in the schedule's zone), nor inside these windows: skipped
    skip_dates: tuple[str, ...] = ()
    skip_windows: tuple[TimeWindow, ...] = ()
    #: with a ``Cron`` schedule: more expressions; the job fires at the union of their instants
    extra_crons: tuple[Cron, ...] = ()
    #: the job completes after this many scheduled runs (0: no limit)
    max_runs: int = 0
    #: the job pauses itself after this many consecutive runs ended FAILED, DEAD_LETTER or EXPIRED (0: never)
    pause_after_failures: int = 0
    #: CreateJob also makes one run at once
    trigger_on_create: bool = False
    #: (key, value) pairs, sorted by key; a job's runs carry its labels
    labels: tuple[tuple[str, str], ...] = ()
    #: a run still PENDING this long after it became leasable ends EXPIRED (0: it waits)
    pending_ttl_ms: int = 0
    #: within a queue, runs of higher priorities are leased first (0-9)
    priority: int = 0
    #: at most ``concurrency_limit`` runs LEASED at once across every job with this key
    concurrency_key: str = ""
    concurrency_limit: int = 0
    notify: tuple[NotifyRule, ...] = ()


#: the highest ``JobSpec.priority``
MAX_PRIORITY = 9

#: the command format that brought ``JobSpec``'s schedule bounds and exceptions, labels and a job's summary
SCHEDULES_FORMAT = 5

#: the command format from which the state keeps the record of each new run of a job with a priority in the order
#: grants take runs (``raftsched.cluster.fsm.store.Table.RANKED``)
RANKED_FORMAT = 6

#: the command format from which every new run (of priority 0 too) is kept in grant order, as ``RANKED_FORMAT``
#: keeps those of a job with a priority: runs that come due together are written, leased, completed and dropped
#: side by side, not each on the page of its job's other runs
GRANT_ORDER_FORMAT = 7


class AttemptOutcome(str, Enum):
    """How one attempt of a run ended ("" while it runs)."""

    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    LEASE_EXPIRED = "LEASE_EXPIRED"
    CANCELLED = "CANCELLED"


class Attempt(NamedTuple):
    """One lease of a run and how it ended (``outcome`` "" while it runs). Stored as a plain tuple."""

    attempt: int
    executor_id: str
    lease_id: str
    fencing_token: int
    leased_at_ms: int
    finished_at_ms: int = 0
    outcome: str = ""
    error: str = ""
    log_uri: str = ""
    #: how many steps the run had recorded when this attempt was leased (its place among them: ``ExplainRun``
    #: shows its grant, and a success, from the attempt instead of storing them as steps)
    steps_before: int = 0
    #: the executor's latest heartbeat details for this attempt and when they came (a run keeps only its latest
    #: details: an earlier attempt's go when a later one sends some). Stored only once given: older attempts are
    #: ten values long.
    heartbeat_details: bytes = b""
    heartbeat_at_ms: int = 0


class Step(NamedTuple):
    """One thing the state machine did to a run, as it applied a command (``ExplainRun``)."""

    at_ms: int
    kind: str
    detail: str
    node_id: str = ""


class JobInfo(NamedTuple):
    """What apply keeps about a job beside its record (command format 5): the summary of its runs, and why and
    until when it is paused. Stored apart from the job, so that a run's end does not write the job's spec again."""

    #: runs that ended SUCCEEDED; FAILED, DEAD_LETTER or EXPIRED; instants skipped
    success_count: int = 0
    failure_count: int = 0
    skipped_count: int = 0
    #: failures since the last success (``pause_after_failures`` counts these)
    consecutive_failures: int = 0
    last_success_ms: int = 0
    last_failure_ms: int = 0
    last_error: str = ""
    #: runs its schedule fired (``max_runs`` counts these; manual runs do not count)
    scheduled_runs: int = 0
    #: why it is paused, and when it resumes itself (0: when resumed)
    pause_note: str = ""
    paused_until_ms: int = 0


NO_INFO = JobInfo()


class Job:
    """A job as the state machine holds it."""

    __slots__ = (
        "job_id",
        "spec",
        "status",
        "anchor_ms",
        "cursor_ms",
        "next_fire_ms",
        "created_ms",
        "updated_ms",
        "idempotency_key",
        "fire_count",
        "info",
    )

    def __init__(
        self,
        job_id: str,
        spec: JobSpec,
        status: JobStatus,
        anchor_ms: int,
        cursor_ms: int,
        next_fire_ms: int | None,
        created_ms: int,
        updated_ms: int,
        idempotency_key: str = "",
        fire_count: int = 0,
    ) -> None:
        self.job_id = job_id
        self.spec = spec
        self.status = status
        #: the instant ``every`` schedules count from, and ``after`` adds to
        self.anchor_ms = anchor_ms
        #: every scheduled instant <= cursor has been fired or skipped: the
        #: exactly-once key. It only grows.
        self.cursor_ms = cursor_ms
        self.next_fire_ms = next_fire_ms
        self.created_ms = created_ms
        self.updated_ms = updated_ms
        self.idempotency_key = idempotency_key
        self.fire_count = fire_count
        #: its ``JobInfo`` where a reader or handler read it (not part of the job's record: ``raftsched.cluster.fsm.job_info``)
        self.info = NO_INFO

    def __copy__(self) -> Job:
        return _copy_job(self)

    def __repr__(self) -> str:
        return f"Job({self.job_id!r}, {self.status.value}, next={self.next_fire_ms})"


class Run:
    """One firing of a job for one scheduled instant (or a manual trigger)."""

    __slots__ = (
        "run_id",
        "job_id",
        "queue",
        "scheduled_ms",
        "fired_ms",
        "attempt",
        "status",
        "executor_id",
        "lease_id",
        "fencing_token",
        "lease_expires_ms",
        "started_ms",
        "finished_ms",
        "result",
        "error",
        "log_uri",
        "manual",
        "skipped_count",
        "skipped_until_ms",
        "cancel_requested",
        "not_before_ms",
        "attempts_raw",
        "attempts_dropped",
        "steps_raw",
        "steps_dropped",
        "budget_base",
        "extra",
    )

    def __init__(
        self,
        run_id: str,
        job_id: str,
        queue: str,
        scheduled_ms: int,
        fired_ms: int,
        status: RunStatus = RunStatus.PENDING,
        attempt: int = 0,
        manual: bool = False,
    ) -> None:
        self.run_id = run_id
        self.job_id = job_id
        self.queue = queue
        self.scheduled_ms = scheduled_ms
        self.fired_ms = fired_ms
        self.attempt = attempt
        self.status = status
        self.executor_id = ""
        self.lease_id = ""
        self.fencing_token = 0
        self.lease_expires_ms = 0
        self.started_ms = 0
        self.finished_ms = 0
        self.result = b""
        self.error = ""
        self.log_uri = ""
        self.manual = manual
        #: for a SKIPPED record: how many instants it stands for, up to which one
        self.skipped_count = 0
        self.skipped_until_ms = 0
        self.cancel_requested = False
        #: a run is never leased before this instant (its scheduled time, or a retry's backoff)
        self.not_before_ms = scheduled_ms
        #: every attempt kept (oldest dropped beyond the cap, counted), and what was done to the run, in order
        #: (``raftsched.cluster.domain.run_history``; recorded from the cluster's command format 3 on)
        #: kept as the plain tuples they are stored as (cheap to read and write on every change of the run);
        #: ``attempts`` and ``steps`` are their named views
        self.attempts_raw: tuple[tuple[Any, ...], ...] = ()
        self.attempts_dropped = 0
        self.steps_raw: tuple[tuple[Any, ...], ...] = ()
        self.steps_dropped = 0
        #: the attempt number the current attempt budget counts from (a manual retry's fresh budget)
        self.budget_base = 0
        #: what only some runs have (command format 5), as sorted (key, value) pairs: ``RunExtra``'s keys
        self.extra: tuple[tuple[str, Any], ...] = ()

    @property
    def attempts(self) -> tuple[Attempt, ...]:
        return tuple(Attempt(*a) for a in self.attempts_raw)

    def __copy__(self) -> Run:
        return _copy_run(self)

    def __repr__(self) -> str:
        return f"Run({self.run_id!r}, {self.status.value}, at={self.scheduled_ms})"


def _slot_copier(cls: type) -> Callable[[Any], Any]:
    """A copier for instances of ``cls``, a class of slots only: a new instance holding each slot's value, made by
    straight-line code built from ``__slots__`` (so no slot is ever left out). ``copy.copy`` without it goes
    through ``__reduce_ex__`` and a dict of the slots, about eight times as long (6.3 us a run against 0.7), and
    readers copy a run or a job out of the state for every answer that carries one (a leader: two a run)."""
    lines = [f"    new.{name} = self.{name}" for name in getattr(cls, "__slots__")]
    source = "def copier(self):\n    new = _new(_cls)\n" + "\n".join(lines) + "\n    return new\n"
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    exec(source, scope)  # noqa: S102 - code built from the class's own slot names, nothing else
    copier: Callable[[Any], Any] = scope["copier"]
    return copier


_copy_job = _slot_copier(Job)
_copy_run = _slot_copier(Run)


class RunExtra:
    """The keys of ``Run.extra``: what only some runs carry."""

    #: bytes: this run's payload instead of its job's (``TriggerJob.payload``, a notification's body)
    PAYLOAD = "payload"
    #: True: made by ``BackfillJob``
    BACKFILL = "backfill"
    #: str: the type it runs as instead of its job's (a notification: ``notify``)
    TYPE = "type"
    #: str: the queue it was made for is its own (kept with ``queue``); the event a notification is of
    EVENT = "event"


def run_extra(run: Run, key: str, default: Any = None) -> Any:
    for k, v in run.extra:
        if k == key:
            return v
    return default


def with_extra(run: Run, key: str, value: Any) -> None:
    run.extra = tuple(sorted({**dict(run.extra), key: value}.items()))


def run_id_for(job_id: str, scheduled_ms: int) -> str:
    """The run id of a scheduled instant: the same on every node, for every leader."""
    return f"{job_id}@{scheduled_ms}"


def manual_run_id(job_id: str, index: int, pos: int = 0) -> str:
    """The run id of a manual trigger committed as command ``pos`` of the Raft entry at ``index``."""
    return f"{job_id}@manual-{index}" if pos == 0 else f"{job_id}@manual-{index}.{pos}"


# ----------------------------------------------------------------- membership


class Member(NamedTuple):
    """A cluster member as the replicated state knows it: its id and the addresses it advertises."""

    node_id: str
    raft: str
    grpc: str
    http: str = ""


class MemberChange(NamedTuple):
    """The membership change in flight: ``action`` ("add" or "remove") of ``member``, begun at entry ``begun_at``."""

    action: str
    member: Member
    begun_at: int

    def describe(self) -> str:
        verb = "adding" if self.action == "add" else "removing"
        return f"{verb} {self.member.node_id} (raft {self.member.raft}), begun at entry {self.begun_at}"
