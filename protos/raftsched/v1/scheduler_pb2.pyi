import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATUS_UNSPECIFIED: _ClassVar[JobStatus]
    JOB_STATUS_ACTIVE: _ClassVar[JobStatus]
    JOB_STATUS_PAUSED: _ClassVar[JobStatus]
    JOB_STATUS_COMPLETED: _ClassVar[JobStatus]
    JOB_STATUS_DELETED: _ClassVar[JobStatus]

class RunStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATUS_UNSPECIFIED: _ClassVar[RunStatus]
    RUN_STATUS_PENDING: _ClassVar[RunStatus]
    RUN_STATUS_LEASED: _ClassVar[RunStatus]
    RUN_STATUS_SUCCEEDED: _ClassVar[RunStatus]
    RUN_STATUS_FAILED: _ClassVar[RunStatus]
    RUN_STATUS_CANCELLED: _ClassVar[RunStatus]
    RUN_STATUS_DEAD_LETTER: _ClassVar[RunStatus]
    RUN_STATUS_SKIPPED: _ClassVar[RunStatus]
    RUN_STATUS_EXPIRED: _ClassVar[RunStatus]

class ConcurrencyPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONCURRENCY_POLICY_UNSPECIFIED: _ClassVar[ConcurrencyPolicy]
    CONCURRENCY_POLICY_ALLOW: _ClassVar[ConcurrencyPolicy]
    CONCURRENCY_POLICY_FORBID: _ClassVar[ConcurrencyPolicy]
    CONCURRENCY_POLICY_REPLACE: _ClassVar[ConcurrencyPolicy]

class MisfirePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MISFIRE_POLICY_UNSPECIFIED: _ClassVar[MisfirePolicy]
    MISFIRE_POLICY_FIRE_ALL: _ClassVar[MisfirePolicy]
    MISFIRE_POLICY_FIRE_ONCE: _ClassVar[MisfirePolicy]
    MISFIRE_POLICY_SKIP: _ClassVar[MisfirePolicy]

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[Outcome]
    OUTCOME_SUCCEEDED: _ClassVar[Outcome]
    OUTCOME_FAILED: _ClassVar[Outcome]

class AttemptOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ATTEMPT_OUTCOME_UNSPECIFIED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_SUCCEEDED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_FAILED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_LEASE_EXPIRED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_CANCELLED: _ClassVar[AttemptOutcome]

class MemberRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMBER_ROLE_UNSPECIFIED: _ClassVar[MemberRole]
    MEMBER_ROLE_LEADER: _ClassVar[MemberRole]
    MEMBER_ROLE_FOLLOWER: _ClassVar[MemberRole]
    MEMBER_ROLE_CANDIDATE: _ClassVar[MemberRole]
    MEMBER_ROLE_UNKNOWN: _ClassVar[MemberRole]
JOB_STATUS_UNSPECIFIED: JobStatus
JOB_STATUS_ACTIVE: JobStatus
JOB_STATUS_PAUSED: JobStatus
JOB_STATUS_COMPLETED: JobStatus
JOB_STATUS_DELETED: JobStatus
RUN_STATUS_UNSPECIFIED: RunStatus
RUN_STATUS_PENDING: RunStatus
RUN_STATUS_LEASED: RunStatus
RUN_STATUS_SUCCEEDED: RunStatus
RUN_STATUS_FAILED: RunStatus
RUN_STATUS_CANCELLED: RunStatus
RUN_STATUS_DEAD_LETTER: RunStatus
RUN_STATUS_SKIPPED: RunStatus
RUN_STATUS_EXPIRED: RunStatus
CONCURRENCY_POLICY_UNSPECIFIED: ConcurrencyPolicy
CONCURRENCY_POLICY_ALLOW: ConcurrencyPolicy
CONCURRENCY_POLICY_FORBID: ConcurrencyPolicy
CONCURRENCY_POLICY_REPLACE: ConcurrencyPolicy
MISFIRE_POLICY_UNSPECIFIED: MisfirePolicy
MISFIRE_POLICY_FIRE_ALL: MisfirePolicy
MISFIRE_POLICY_FIRE_ONCE: MisfirePolicy
MISFIRE_POLICY_SKIP: MisfirePolicy
OUTCOME_UNSPECIFIED: Outcome
OUTCOME_SUCCEEDED: Outcome
OUTCOME_FAILED: Outcome
ATTEMPT_OUTCOME_UNSPECIFIED: AttemptOutcome
ATTEMPT_OUTCOME_SUCCEEDED: AttemptOutcome
ATTEMPT_OUTCOME_FAILED: AttemptOutcome
ATTEMPT_OUTCOME_LEASE_EXPIRED: AttemptOutcome
ATTEMPT_OUTCOME_CANCELLED: AttemptOutcome
MEMBER_ROLE_UNSPECIFIED: MemberRole
MEMBER_ROLE_LEADER: MemberRole
MEMBER_ROLE_FOLLOWER: MemberRole
MEMBER_ROLE_CANDIDATE: MemberRole
MEMBER_ROLE_UNKNOWN: MemberRole

class CronSchedule(_message.Message):
    __slots__ = ("expression", "timezone")
    EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    expression: str
    timezone: str
    def __init__(self, expression: _Optional[str] = ..., timezone: _Optional[str] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("max_attempts", "initial_backoff", "max_backoff", "multiplier", "jitter")
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    INITIAL_BACKOFF_FIELD_NUMBER: _ClassVar[int]
    MAX_BACKOFF_FIELD_NUMBER: _ClassVar[int]
    MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    max_attempts: int
    initial_backoff: _duration_pb2.Duration
    max_backoff: _duration_pb2.Duration
    multiplier: float
    jitter: float
    def __init__(self, max_attempts: _Optional[int] = ..., initial_backoff: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_backoff: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., multiplier: _Optional[float] = ..., jitter: _Optional[float] = ...) -> None: ...

class JobSpec(_message.Message):
    __slots__ = ("name", "queue", "type", "payload", "at", "after", "every", "cron", "retry", "lease_ttl", "timeout", "concurrency", "misfire", "catchup_window", "history_limit", "history_ttl", "failed_history_limit", "start_time", "end_time", "jitter", "skip_dates", "skip_windows", "extra_crons", "max_runs", "pause_after_failures", "trigger_on_create", "labels", "pending_ttl", "priority", "concurrency_key", "concurrency_limit", "notify")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    EVERY_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_FIELD_NUMBER: _ClassVar[int]
    CATCHUP_WINDOW_FIELD_NUMBER: _ClassVar[int]
    HISTORY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_TTL_FIELD_NUMBER: _ClassVar[int]
    FAILED_HISTORY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    SKIP_DATES_FIELD_NUMBER: _ClassVar[int]
    SKIP_WINDOWS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_CRONS_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNS_FIELD_NUMBER: _ClassVar[int]
    PAUSE_AFTER_FAILURES_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_ON_CREATE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    PENDING_TTL_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_FIELD_NUMBER: _ClassVar[int]
    name: str
    queue: str
    type: str
    payload: bytes
    at: _timestamp_pb2.Timestamp
    after: _duration_pb2.Duration
    every: _duration_pb2.Duration
    cron: CronSchedule
    retry: RetryPolicy
    lease_ttl: _duration_pb2.Duration
    timeout: _duration_pb2.Duration
    concurrency: ConcurrencyPolicy
    misfire: MisfirePolicy
    catchup_window: _duration_pb2.Duration
    history_limit: int
    history_ttl: _duration_pb2.Duration
    failed_history_limit: int
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    jitter: _duration_pb2.Duration
    skip_dates: _containers.RepeatedScalarFieldContainer[str]
    skip_windows: _containers.RepeatedCompositeFieldContainer[TimeWindow]
    extra_crons: _containers.RepeatedCompositeFieldContainer[CronSchedule]
    max_runs: int
    pause_after_failures: int
    trigger_on_create: bool
    labels: _containers.ScalarMap[str, str]
    pending_ttl: _duration_pb2.Duration
    priority: int
    concurrency_key: str
    concurrency_limit: int
    notify: _containers.RepeatedCompositeFieldContainer[NotifyRule]
    def __init__(self, name: _Optional[str] = ..., queue: _Optional[str] = ..., type: _Optional[str] = ..., payload: _Optional[bytes] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., every: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., cron: _Optional[_Union[CronSchedule, _Mapping]] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., concurrency: _Optional[_Union[ConcurrencyPolicy, str]] = ..., misfire: _Optional[_Union[MisfirePolicy, str]] = ..., catchup_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., history_limit: _Optional[int] = ..., history_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., failed_history_limit: _Optional[int] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., jitter: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., skip_dates: _Optional[_Iterable[str]] = ..., skip_windows: _Optional[_Iterable[_Union[TimeWindow, _Mapping]]] = ..., extra_crons: _Optional[_Iterable[_Union[CronSchedule, _Mapping]]] = ..., max_runs: _Optional[int] = ..., pause_after_failures: _Optional[int] = ..., trigger_on_create: _Optional[bool] = ..., labels: _Optional[_Mapping[str, str]] = ..., pending_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., priority: _Optional[int] = ..., concurrency_key: _Optional[str] = ..., concurrency_limit: _Optional[int] = ..., notify: _Optional[_Iterable[_Union[NotifyRule, _Mapping]]] = ...) -> None: ...

class TimeWindow(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: _timestamp_pb2.Timestamp
    end: _timestamp_pb2.Timestamp
    def __init__(self, start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class NotifyRule(_message.Message):
    __slots__ = ("events", "url", "secret_name")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    SECRET_NAME_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedScalarFieldContainer[str]
    url: str
    secret_name: str
    def __init__(self, events: _Optional[_Iterable[str]] = ..., url: _Optional[str] = ..., secret_name: _Optional[str] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("job_id", "spec", "status", "next_fire_time", "created_at", "updated_at", "idempotency_key", "fire_count", "upcoming", "pause_note", "paused_until", "success_count", "failure_count", "skipped_count", "consecutive_failures", "last_success_time", "last_failure_time", "last_error")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    FIRE_COUNT_FIELD_NUMBER: _ClassVar[int]
    UPCOMING_FIELD_NUMBER: _ClassVar[int]
    PAUSE_NOTE_FIELD_NUMBER: _ClassVar[int]
    PAUSED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_COUNT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_COUNT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_COUNT_FIELD_NUMBER: _ClassVar[int]
    CONSECUTIVE_FAILURES_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILURE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    spec: JobSpec
    status: JobStatus
    next_fire_time: _timestamp_pb2.Timestamp
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    idempotency_key: str
    fire_count: int
    upcoming: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    pause_note: str
    paused_until: _timestamp_pb2.Timestamp
    success_count: int
    failure_count: int
    skipped_count: int
    consecutive_failures: int
    last_success_time: _timestamp_pb2.Timestamp
    last_failure_time: _timestamp_pb2.Timestamp
    last_error: str
    def __init__(self, job_id: _Optional[str] = ..., spec: _Optional[_Union[JobSpec, _Mapping]] = ..., status: _Optional[_Union[JobStatus, str]] = ..., next_fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., fire_count: _Optional[int] = ..., upcoming: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ..., pause_note: _Optional[str] = ..., paused_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., success_count: _Optional[int] = ..., failure_count: _Optional[int] = ..., skipped_count: _Optional[int] = ..., consecutive_failures: _Optional[int] = ..., last_success_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_failure_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("run_id", "job_id", "scheduled_time", "fired_at", "attempt", "status", "executor_id", "lease_id", "fencing_token", "lease_expires_at", "started_at", "finished_at", "result", "error", "log_uri", "queue", "manual", "skipped_count", "skipped_until", "cancel_requested", "not_before", "attempts", "attempts_dropped", "labels", "backfill", "payload")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_TIME_FIELD_NUMBER: _ClassVar[int]
    FIRED_AT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LOG_URI_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    MANUAL_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_COUNT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    job_id: str
    scheduled_time: _timestamp_pb2.Timestamp
    fired_at: _timestamp_pb2.Timestamp
    attempt: int
    status: RunStatus
    executor_id: str
    lease_id: str
    fencing_token: int
    lease_expires_at: _timestamp_pb2.Timestamp
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    result: bytes
    error: str
    log_uri: str
    queue: str
    manual: bool
    skipped_count: int
    skipped_until: _timestamp_pb2.Timestamp
    cancel_requested: bool
    not_before: _timestamp_pb2.Timestamp
    attempts: _containers.RepeatedCompositeFieldContainer[Attempt]
    attempts_dropped: int
    labels: _containers.ScalarMap[str, str]
    backfill: bool
    payload: bytes
    def __init__(self, run_id: _Optional[str] = ..., job_id: _Optional[str] = ..., scheduled_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fired_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., attempt: _Optional[int] = ..., status: _Optional[_Union[RunStatus, str]] = ..., executor_id: _Optional[str] = ..., lease_id: _Optional[str] = ..., fencing_token: _Optional[int] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., result: _Optional[bytes] = ..., error: _Optional[str] = ..., log_uri: _Optional[str] = ..., queue: _Optional[str] = ..., manual: _Optional[bool] = ..., skipped_count: _Optional[int] = ..., skipped_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: _Optional[bool] = ..., not_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., attempts: _Optional[_Iterable[_Union[Attempt, _Mapping]]] = ..., attempts_dropped: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., backfill: _Optional[bool] = ..., payload: _Optional[bytes] = ...) -> None: ...

class Attempt(_message.Message):
    __slots__ = ("attempt", "executor_id", "lease_id", "fencing_token", "leased_at", "finished_at", "outcome", "error", "log_uri", "heartbeat_details", "heartbeat_at")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LOG_URI_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_DETAILS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_AT_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    executor_id: str
    lease_id: str
    fencing_token: int
    leased_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    outcome: AttemptOutcome
    error: str
    log_uri: str
    heartbeat_details: bytes
    heartbeat_at: _timestamp_pb2.Timestamp
    def __init__(self, attempt: _Optional[int] = ..., executor_id: _Optional[str] = ..., lease_id: _Optional[str] = ..., fencing_token: _Optional[int] = ..., leased_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., outcome: _Optional[_Union[AttemptOutcome, str]] = ..., error: _Optional[str] = ..., log_uri: _Optional[str] = ..., heartbeat_details: _Optional[bytes] = ..., heartbeat_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateJobRequest(_message.Message):
    __slots__ = ("spec", "idempotency_key", "request_id")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    spec: JobSpec
    idempotency_key: str
    request_id: str
    def __init__(self, spec: _Optional[_Union[JobSpec, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateJobsRequest(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[CreateJobRequest]
    def __init__(self, jobs: _Optional[_Iterable[_Union[CreateJobRequest, _Mapping]]] = ...) -> None: ...

class ItemStatus(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class CreateJobResult(_message.Message):
    __slots__ = ("job", "status")
    JOB_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    job: Job
    status: ItemStatus
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ..., status: _Optional[_Union[ItemStatus, _Mapping]] = ...) -> None: ...

class CreateJobsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CreateJobResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CreateJobResult, _Mapping]]] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("queue", "status", "name_prefix", "page_size", "page_token", "label_selector")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    queue: str
    status: JobStatus
    name_prefix: str
    page_size: int
    page_token: str
    label_selector: str
    def __init__(self, queue: _Optional[str] = ..., status: _Optional[_Union[JobStatus, str]] = ..., name_prefix: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., label_selector: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateJobRequest(_message.Message):
    __slots__ = ("job_id", "spec", "request_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    spec: JobSpec
    request_id: str
    def __init__(self, job_id: _Optional[str] = ..., spec: _Optional[_Union[JobSpec, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class PauseJobRequest(_message.Message):
    __slots__ = ("job_id", "request_id", "note", "until")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    request_id: str
    note: str
    until: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., request_id: _Optional[str] = ..., note: _Optional[str] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ResumeJobRequest(_message.Message):
    __slots__ = ("job_id", "request_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    request_id: str
    def __init__(self, job_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class DeleteJobRequest(_message.Message):
    __slots__ = ("job_id", "request_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    request_id: str
    def __init__(self, job_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class TriggerJobRequest(_message.Message):
    __slots__ = ("job_id", "request_id", "payload")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    request_id: str
    payload: bytes
    def __init__(self, job_id: _Optional[str] = ..., request_id: _Optional[str] = ..., payload: _Optional[bytes] = ...) -> None: ...

class BackfillJobRequest(_message.Message):
    __slots__ = ("job_id", "start_time", "end_time", "dry_run")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    dry_run: bool
    def __init__(self, job_id: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class BackfillJobResponse(_message.Message):
    __slots__ = ("instants", "runs")
    INSTANTS_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    instants: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    runs: _containers.RepeatedCompositeFieldContainer[Run]
    def __init__(self, instants: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ..., runs: _Optional[_Iterable[_Union[Run, _Mapping]]] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("job_id", "status", "page_size", "page_token", "label_selector")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    status: RunStatus
    page_size: int
    page_token: str
    label_selector: str
    def __init__(self, job_id: _Optional[str] = ..., status: _Optional[_Union[RunStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., label_selector: _Optional[str] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[Run]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[Run, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("run_id", "request_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    request_id: str
    def __init__(self, run_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class RetryRunRequest(_message.Message):
    __slots__ = ("run_id", "request_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    request_id: str
    def __init__(self, run_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ExplainRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class ExplanationStep(_message.Message):
    __slots__ = ("at", "kind", "detail", "node_id")
    AT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    at: _timestamp_pb2.Timestamp
    kind: str
    detail: str
    node_id: str
    def __init__(self, at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., kind: _Optional[str] = ..., detail: _Optional[str] = ..., node_id: _Optional[str] = ...) -> None: ...

class RunExplanation(_message.Message):
    __slots__ = ("run_id", "steps", "steps_dropped", "run")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    STEPS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    steps: _containers.RepeatedCompositeFieldContainer[ExplanationStep]
    steps_dropped: int
    run: Run
    def __init__(self, run_id: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[ExplanationStep, _Mapping]]] = ..., steps_dropped: _Optional[int] = ..., run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class GetRunOutputRequest(_message.Message):
    __slots__ = ("run_id", "attempt", "offset")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    attempt: int
    offset: int
    def __init__(self, run_id: _Optional[str] = ..., attempt: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class RunOutput(_message.Message):
    __slots__ = ("run_id", "attempt", "log", "result", "log_uri", "missing_reason", "live", "next_offset", "size", "fencing_token", "note")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    LOG_URI_FIELD_NUMBER: _ClassVar[int]
    MISSING_REASON_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    attempt: int
    log: bytes
    result: bytes
    log_uri: str
    missing_reason: str
    live: bool
    next_offset: int
    size: int
    fencing_token: int
    note: str
    def __init__(self, run_id: _Optional[str] = ..., attempt: _Optional[int] = ..., log: _Optional[bytes] = ..., result: _Optional[bytes] = ..., log_uri: _Optional[str] = ..., missing_reason: _Optional[str] = ..., live: _Optional[bool] = ..., next_offset: _Optional[int] = ..., size: _Optional[int] = ..., fencing_token: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class WatchRunsRequest(_message.Message):
    __slots__ = ("job_id", "queue", "include_existing", "kinds", "resume_after", "bookmarks")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_EXISTING_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    RESUME_AFTER_FIELD_NUMBER: _ClassVar[int]
    BOOKMARKS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    queue: str
    include_existing: bool
    kinds: _containers.RepeatedScalarFieldContainer[str]
    resume_after: WatchPosition
    bookmarks: bool
    def __init__(self, job_id: _Optional[str] = ..., queue: _Optional[str] = ..., include_existing: _Optional[bool] = ..., kinds: _Optional[_Iterable[str]] = ..., resume_after: _Optional[_Union[WatchPosition, _Mapping]] = ..., bookmarks: _Optional[bool] = ...) -> None: ...

class WatchPosition(_message.Message):
    __slots__ = ("index", "position")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    index: int
    position: int
    def __init__(self, index: _Optional[int] = ..., position: _Optional[int] = ...) -> None: ...

class RunEvent(_message.Message):
    __slots__ = ("run", "observed_at", "kind", "index", "position")
    RUN_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    run: Run
    observed_at: _timestamp_pb2.Timestamp
    kind: str
    index: int
    position: int
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ..., observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., kind: _Optional[str] = ..., index: _Optional[int] = ..., position: _Optional[int] = ...) -> None: ...

class PreviewScheduleRequest(_message.Message):
    __slots__ = ("spec", "after", "count")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    spec: JobSpec
    after: _timestamp_pb2.Timestamp
    count: int
    def __init__(self, spec: _Optional[_Union[JobSpec, _Mapping]] = ..., after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., count: _Optional[int] = ...) -> None: ...

class PreviewScheduleResponse(_message.Message):
    __slots__ = ("times", "notes")
    TIMES_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    times: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    notes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, times: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ..., notes: _Optional[_Iterable[str]] = ...) -> None: ...

class AcquireLeaseRequest(_message.Message):
    __slots__ = ("executor_id", "queues", "max_runs", "wait", "types")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    queues: _containers.RepeatedScalarFieldContainer[str]
    max_runs: int
    wait: _duration_pb2.Duration
    types: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, executor_id: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ..., max_runs: _Optional[int] = ..., wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., types: _Optional[_Iterable[str]] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("lease_id", "fencing_token", "expires_at", "run", "type", "payload", "timeout", "last_heartbeat_details", "last_heartbeat_at")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_DETAILS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_AT_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    fencing_token: int
    expires_at: _timestamp_pb2.Timestamp
    run: Run
    type: str
    payload: bytes
    timeout: _duration_pb2.Duration
    last_heartbeat_details: bytes
    last_heartbeat_at: _timestamp_pb2.Timestamp
    def __init__(self, lease_id: _Optional[str] = ..., fencing_token: _Optional[int] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., run: _Optional[_Union[Run, _Mapping]] = ..., type: _Optional[str] = ..., payload: _Optional[bytes] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., last_heartbeat_details: _Optional[bytes] = ..., last_heartbeat_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AcquireLeaseResponse(_message.Message):
    __slots__ = ("leases",)
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[Lease]
    def __init__(self, leases: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ...) -> None: ...

class LeaseRef(_message.Message):
    __slots__ = ("lease_id", "fencing_token", "details")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    fencing_token: int
    details: bytes
    def __init__(self, lease_id: _Optional[str] = ..., fencing_token: _Optional[int] = ..., details: _Optional[bytes] = ...) -> None: ...

class RenewLeaseRequest(_message.Message):
    __slots__ = ("executor_id", "leases")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    leases: _containers.RepeatedCompositeFieldContainer[LeaseRef]
    def __init__(self, executor_id: _Optional[str] = ..., leases: _Optional[_Iterable[_Union[LeaseRef, _Mapping]]] = ...) -> None: ...

class LeaseRenewal(_message.Message):
    __slots__ = ("lease_id", "ok", "expires_at", "cancel_requested", "error")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    ok: bool
    expires_at: _timestamp_pb2.Timestamp
    cancel_requested: bool
    error: str
    def __init__(self, lease_id: _Optional[str] = ..., ok: _Optional[bool] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class RenewLeaseResponse(_message.Message):
    __slots__ = ("leases",)
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[LeaseRenewal]
    def __init__(self, leases: _Optional[_Iterable[_Union[LeaseRenewal, _Mapping]]] = ...) -> None: ...

class CompleteRunRequest(_message.Message):
    __slots__ = ("lease_id", "fencing_token", "outcome", "result", "error", "log_uri", "executor_id", "non_retryable", "retry_after")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LOG_URI_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    NON_RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    fencing_token: int
    outcome: Outcome
    result: bytes
    error: str
    log_uri: str
    executor_id: str
    non_retryable: bool
    retry_after: _duration_pb2.Duration
    def __init__(self, lease_id: _Optional[str] = ..., fencing_token: _Optional[int] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., result: _Optional[bytes] = ..., error: _Optional[str] = ..., log_uri: _Optional[str] = ..., executor_id: _Optional[str] = ..., non_retryable: _Optional[bool] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CompleteRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class CompleteRunsRequest(_message.Message):
    __slots__ = ("runs", "status_only")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    STATUS_ONLY_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[CompleteRunRequest]
    status_only: bool
    def __init__(self, runs: _Optional[_Iterable[_Union[CompleteRunRequest, _Mapping]]] = ..., status_only: _Optional[bool] = ...) -> None: ...

class CompleteRunResult(_message.Message):
    __slots__ = ("run", "status")
    RUN_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    run: Run
    status: ItemStatus
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ..., status: _Optional[_Union[ItemStatus, _Mapping]] = ...) -> None: ...

class CompleteRunsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CompleteRunResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CompleteRunResult, _Mapping]]] = ...) -> None: ...

class GetClusterStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WhoAmIResponse(_message.Message):
    __slots__ = ("tokens_required", "name", "roles", "queues", "types")
    TOKENS_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    tokens_required: bool
    name: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    queues: _containers.RepeatedScalarFieldContainer[str]
    types: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tokens_required: _Optional[bool] = ..., name: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., queues: _Optional[_Iterable[str]] = ..., types: _Optional[_Iterable[str]] = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ("id", "raft_address", "grpc_address", "role", "reachable", "version", "http_address", "clock_offset", "clock_ok", "storage_ok", "clock_measured", "unfit_reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    REACHABLE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    HTTP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLOCK_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CLOCK_OK_FIELD_NUMBER: _ClassVar[int]
    STORAGE_OK_FIELD_NUMBER: _ClassVar[int]
    CLOCK_MEASURED_FIELD_NUMBER: _ClassVar[int]
    UNFIT_REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    raft_address: str
    grpc_address: str
    role: MemberRole
    reachable: bool
    version: str
    http_address: str
    clock_offset: _duration_pb2.Duration
    clock_ok: bool
    storage_ok: bool
    clock_measured: bool
    unfit_reason: str
    def __init__(self, id: _Optional[str] = ..., raft_address: _Optional[str] = ..., grpc_address: _Optional[str] = ..., role: _Optional[_Union[MemberRole, str]] = ..., reachable: _Optional[bool] = ..., version: _Optional[str] = ..., http_address: _Optional[str] = ..., clock_offset: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., clock_ok: _Optional[bool] = ..., storage_ok: _Optional[bool] = ..., clock_measured: _Optional[bool] = ..., unfit_reason: _Optional[str] = ...) -> None: ...

class ClusterStatus(_message.Message):
    __slots__ = ("self_id", "leader_id", "members", "term", "commit_index", "applied_index", "last_snapshot_index", "has_quorum", "runs", "jobs", "pending_by_queue", "command_format", "membership_change")
    class PendingByQueueEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    SELF_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_SNAPSHOT_INDEX_FIELD_NUMBER: _ClassVar[int]
    HAS_QUORUM_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    PENDING_BY_QUEUE_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FORMAT_FIELD_NUMBER: _ClassVar[int]
    MEMBERSHIP_CHANGE_FIELD_NUMBER: _ClassVar[int]
    self_id: str
    leader_id: str
    members: _containers.RepeatedCompositeFieldContainer[Member]
    term: int
    commit_index: int
    applied_index: int
    last_snapshot_index: int
    has_quorum: bool
    runs: RunCounts
    jobs: int
    pending_by_queue: _containers.ScalarMap[str, int]
    command_format: int
    membership_change: str
    def __init__(self, self_id: _Optional[str] = ..., leader_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., last_snapshot_index: _Optional[int] = ..., has_quorum: _Optional[bool] = ..., runs: _Optional[_Union[RunCounts, _Mapping]] = ..., jobs: _Optional[int] = ..., pending_by_queue: _Optional[_Mapping[str, int]] = ..., command_format: _Optional[int] = ..., membership_change: _Optional[str] = ...) -> None: ...

class RunCounts(_message.Message):
    __slots__ = ("pending", "leased", "succeeded", "failed", "cancelled", "dead_letter", "skipped", "expired")
    PENDING_FIELD_NUMBER: _ClassVar[int]
    LEASED_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_FIELD_NUMBER: _ClassVar[int]
    pending: int
    leased: int
    succeeded: int
    failed: int
    cancelled: int
    dead_letter: int
    skipped: int
    expired: int
    def __init__(self, pending: _Optional[int] = ..., leased: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ..., cancelled: _Optional[int] = ..., dead_letter: _Optional[int] = ..., skipped: _Optional[int] = ..., expired: _Optional[int] = ...) -> None: ...

class AddNodeRequest(_message.Message):
    __slots__ = ("id", "raft_address", "grpc_address", "http_address")
    ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    HTTP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    id: str
    raft_address: str
    grpc_address: str
    http_address: str
    def __init__(self, id: _Optional[str] = ..., raft_address: _Optional[str] = ..., grpc_address: _Optional[str] = ..., http_address: _Optional[str] = ...) -> None: ...

class RemoveNodeRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class BackupRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BackupChunk(_message.Message):
    __slots__ = ("data", "index", "size")
    DATA_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    index: int
    size: int
    def __init__(self, data: _Optional[bytes] = ..., index: _Optional[int] = ..., size: _Optional[int] = ...) -> None: ...
