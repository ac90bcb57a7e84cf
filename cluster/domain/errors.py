"""raftsched's one error hierarchy (outside the Raft adapter, which has its own: ``raftsched.raft.errors``).

Every exception raftsched raises on purpose derives from ``RaftschedError``;
``raftsched.rpc.server.errors`` maps each kind to one gRPC status code. Messages name
the id or value at fault and say what to do next. Business refusals inside
the state machine are *values* (``raftsched.cluster.domain.results.Rejected``), raised
to callers that want an exception as ``RejectedError``.
"""

from __future__ import annotations

from raftsched.cluster.domain.results import Rejected


class RaftschedError(Exception):
    """Base of every error raftsched raises on purpose."""


class NewerState(RaftschedError, ValueError):
    """A state (or snapshot) of a cluster on a command format this code does not understand: the node stops
    (``exit_code``, as for a newer entry in its log) instead of running on it."""

    stops_replica = True
    exit_code = 76


class ValidationError(RaftschedError):
    """Bad input: INVALID_ARGUMENT."""


class Unavailable(RaftschedError):
    """No leader, no quorum, or the outcome is unknown: UNAVAILABLE (retry)."""


class Overloaded(RaftschedError):
    """A consumer fell too far behind or a limit of the node was hit: RESOURCE_EXHAUSTED."""


class OutOfRange(RaftschedError):
    """A position the node no longer holds (a watch resume point older than its history): OUT_OF_RANGE."""


class ConfigError(RaftschedError):
    """A configuration (file, flags, data dir) that cannot be used: the message says what to fix."""


class RejectedError(RaftschedError):
    """A ``Rejected`` outcome of the state machine, raised to a caller that wants an exception."""

    def __init__(self, rejected: Rejected) -> None:
        super().__init__(rejected.message)
        self.rejected = rejected
