"""The Python SDK: ``Client``, ``AsyncClient``, ``Worker``, and what they answer and raise.

One module per job: ``client`` and ``aio_client`` (the calls), ``requests``
(the requests both build), ``spec`` (a JobSpec from keyword arguments),
``durations`` (spans and instants as programs give them), ``codec``
(payloads, results and heartbeat details as bytes), ``objects`` and
``from_pb`` (the answers as plain dataclasses), ``errors`` (the exception
family), ``connection`` (where the cluster is, as the CLI finds it);
``worker``, ``tasks``, ``decode``, ``context``, ``outcomes``,
``event_loop`` and ``schedules`` (serving job types with Python functions),
``worker_command`` (``raftsched worker MODULE:ATTR``). The public names are
re-exported by ``raftsched``.
"""

from raftsched.sdk.aio_client import AsyncClient
from raftsched.sdk.client import Client
from raftsched.sdk.context import Context
from raftsched.sdk.errors import (
    AlreadyExists,
    ConfigurationError,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    RaftschedError,
    ResourceExhausted,
    Timeout,
    Unauthenticated,
    Unavailable,
)
from raftsched.sdk.objects import (
    Attempt,
    Backfill,
    ClusterStatus,
    Explanation,
    ExplanationStep,
    Identity,
    Job,
    JobSpec,
    Member,
    RetryPolicy,
    Run,
    RunEvent,
    RunOutput,
    Schedule,
    ScheduledInstant,
)
from raftsched.sdk.outcomes import NonRetryable, RetryAfter
from raftsched.sdk.worker import Worker

__all__ = [
    "AlreadyExists",
    "AsyncClient",
    "Attempt",
    "Backfill",
    "Client",
    "ClusterStatus",
    "ConfigurationError",
    "Context",
    "DeadlineExceeded",
    "Explanation",
    "ExplanationStep",
    "FailedPrecondition",
    "Identity",
    "InvalidArgument",
    "Job",
    "JobSpec",
    "Member",
    "NonRetryable",
    "NotFound",
    "PermissionDenied",
    "RaftschedError",
    "ResourceExhausted",
    "RetryAfter",
    "RetryPolicy",
    "Run",
    "RunEvent",
    "RunOutput",
    "Schedule",
    "ScheduledInstant",
    "Timeout",
    "Unauthenticated",
    "Unavailable",
    "Worker",
]
