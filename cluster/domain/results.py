"""Outcomes of applying a command (the errors raised outside apply are in ``raftsched.cluster.domain.errors``).

``apply`` returns one of these for every command on every node, identically:
business refusals are values, not exceptions. ``Rejected`` subclasses carry a
message a person understands (naming the id and what to do); ``raftsched.rpc.server.errors``
maps each to its gRPC status code.
"""

from __future__ import annotations

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
class ResourceExhausted(Rejected):
    """A quota of the cluster ([limits]) is reached; the message names it."""


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
