"""Outcomes of applying a command, and the domain error hierarchy.

``apply`` returns one of these for every command on every node, identically:
business refusals are values, not exceptions. ``Rejected`` subclasses carry a
message a person understands (naming the id and what to do); ``rpc.server.errors``
maps each to its gRPC status code.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Ok:
    value: Any = None


@dataclass(frozen=True, slots=True)
class Rejected:
    message: str


@dataclass(frozen=True, slots=True)
class InvalidArgument(Rejected):
    pass


@dataclass(frozen=True, slots=True)
class NotFound(Rejected):
    pass


@dataclass(frozen=True, slots=True)
class AlreadyExists(Rejected):
    pass


@dataclass(frozen=True, slots=True)
class FailedPrecondition(Rejected):
    pass


@dataclass(frozen=True, slots=True)
class Internal(Rejected):
    """A bug: the command raised inside apply. Reported, never retried forever."""


@dataclass(frozen=True, slots=True)
class FireReport:
    """What one Fire command did: runs created, instants skipped, stale items ignored."""

    created: list[str] = field(default_factory=list)
    skipped: int = 0
    stale: int = 0


Result = Ok | Rejected


class SchedError(Exception):
    """Base of raftsched's errors outside the state machine (validation, availability)."""


class ValidationError(SchedError):
    """Bad input: maps to INVALID_ARGUMENT."""


class Unavailable(SchedError):
    """No leader, no quorum, or the outcome is unknown: maps to UNAVAILABLE (retry)."""


class Overloaded(SchedError):
    """A consumer fell too far behind or a limit of the node was hit: maps to RESOURCE_EXHAUSTED."""


class RejectedError(SchedError):
    """A ``Rejected`` outcome raised to a caller that wants an exception."""

    def __init__(self, rejected: Rejected) -> None:
        super().__init__(rejected.message)
        self.rejected = rejected


def value_or_error(answer: Result | Exception) -> Any:
    """For batch calls: a copy of an ``Ok`` value, else the error to report for that item.
    Call under the store lock (the value may be live state)."""
    if isinstance(answer, Exception):
        return answer
    if isinstance(answer, Rejected):
        return RejectedError(answer)
    return copy.copy(answer.value)
