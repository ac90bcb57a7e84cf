"""raftsched: cron as a service on Raft — exactly-once firing, leased execution.

This module is the public Python API; every other module under ``raftsched`` is private and may change:

* ``Client`` and ``AsyncClient`` — every call of the cluster, with keyword arguments and plain objects;
* ``Worker`` — serve job types with Python functions (``@worker.task``), declare schedules in code,
  ``NonRetryable`` and ``RetryAfter`` to say how a run failed, ``Context`` for what a task knows;
* the objects the cluster answers with (``Job``, ``Run``, ``Attempt``, ``Explanation``, ...);
* the errors (``RaftschedError`` and its family: ``NotFound``, ``InvalidArgument``, ``Unavailable``, ...).

The names are loaded when first used, so ``import raftsched`` stays cheap for the command line. The
subpackages ``raftsched.cluster``, ``raftsched.raft``, ``raftsched.rpc``, ``raftsched.storage`` and
``raftsched.protos`` are the implementation (in the repository: the folders of the same names), and
``raftsched.sdk`` the SDK's.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raftsched.sdk import (
        AlreadyExists,
        AsyncClient,
        Attempt,
        Backfill,
        Client,
        ClusterStatus,
        ConfigurationError,
        Context,
        DeadlineExceeded,
        Explanation,
        ExplanationStep,
        FailedPrecondition,
        InvalidArgument,
        Job,
        JobSpec,
        Member,
        NonRetryable,
        NotFound,
        PermissionDenied,
        RaftschedError,
        ResourceExhausted,
        RetryAfter,
        RetryPolicy,
        Run,
        RunEvent,
        RunOutput,
        Schedule,
        ScheduledInstant,
        Timeout,
        Unauthenticated,
        Unavailable,
        Worker,
    )

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
    "__version__",
]


def __getattr__(name: str) -> Any:
    """The public names, imported from ``raftsched.sdk`` when first asked for; ``__version__`` read from the
    installed package's metadata when first asked for (importlib.metadata is slow to import, and a
    command does not need it to start)."""
    if name == "__version__":
        from importlib import metadata

        try:
            version: str = metadata.version("raftsched")
        except metadata.PackageNotFoundError:  # a checkout that was never installed
            version = "0+unknown"
        globals()[name] = version
        return version
    if name in __all__:
        value = getattr(importlib.import_module("raftsched.sdk"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'raftsched' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
