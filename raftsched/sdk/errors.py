"""The SDK's errors: one small family, mapped from the gRPC status a node answered with.

Every error a ``Client``, ``AsyncClient`` or ``Worker`` raises on purpose is a
``RaftschedError`` (itself under the project's one root,
``raftsched.cluster.domain.errors.RaftschedError``). A failed call raises the
subclass of its status code (``NotFound``, ``InvalidArgument``, ...; any
other code: ``RaftschedError`` itself), carrying the node's ``message`` and
the ``code`` (its name, e.g. ``"NOT_FOUND"``; it also compares equal to
``grpc.StatusCode.NOT_FOUND``). A cluster that no node of answers is
``Unavailable`` with the message naming the addresses tried. ``wait_run``
that gives up raises ``Timeout`` (a ``DeadlineExceeded`` and a
``TimeoutError``) naming the run and its last status. A configuration that
cannot be used (no such file, a token that would go in the clear) is
``ConfigurationError``.

Arguments a program got wrong (an unknown ``JobSpec`` field, a naive
``datetime``) are Python's own ``TypeError`` and ``ValueError``, raised
before anything is sent.
"""

from __future__ import annotations

from typing import Any, Iterator

import grpc

from raftsched.cluster.domain.errors import ConfigError
from raftsched.cluster.domain.errors import RaftschedError as _Root
from raftsched.rpc.client.errors import ClusterUnreachable

__all__ = [
    "AlreadyExists",
    "ConfigurationError",
    "DeadlineExceeded",
    "FailedPrecondition",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "RaftschedError",
    "ResourceExhausted",
    "StatusCode",
    "Timeout",
    "Unauthenticated",
    "Unavailable",
    "from_item_status",
    "from_rpc",
]


class StatusCode(str):
    """A status code's name (``"NOT_FOUND"``) that also equals grpc's own ``grpc.StatusCode.NOT_FOUND``."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, grpc.StatusCode):
            return str.__eq__(self, other.name)
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = str.__hash__


class RaftschedError(_Root):
    """A call the cluster refused or could not answer (``code``: the gRPC status name; ``message``: the node's)."""

    #: the status this class stands for (the base: whatever the node said)
    default_code = "UNKNOWN"

    def __init__(self, message: str, code: str | None = None) -> None:
        self.message = message
        self.code = StatusCode(code or self.default_code)
        super().__init__(f"{self.code}: {message}" if message else str(self.code))


class ConfigurationError(RaftschedError, ConfigError, ValueError):
    """Where the cluster is, or how to reach it (TLS, token, output directory), cannot be worked out: the
    message says what to give."""

    default_code = "CONFIGURATION"


class NotFound(RaftschedError):
    """No such job, run, attempt or node (NOT_FOUND)."""

    default_code = "NOT_FOUND"


class InvalidArgument(RaftschedError):
    """The node refused the request as given: a bad cron expression or zone, a value over a limit, ...
    (INVALID_ARGUMENT)."""

    default_code = "INVALID_ARGUMENT"


class AlreadyExists(RaftschedError):
    """An idempotency key reused with another spec, or a node already known (ALREADY_EXISTS)."""

    default_code = "ALREADY_EXISTS"


class FailedPrecondition(RaftschedError):
    """The state does not allow it: a deleted job, a run already finished, a stale lease
    (FAILED_PRECONDITION)."""

    default_code = "FAILED_PRECONDITION"


class PermissionDenied(RaftschedError):
    """The token is known but lacks the role, queue or type (PERMISSION_DENIED)."""

    default_code = "PERMISSION_DENIED"


class Unauthenticated(RaftschedError):
    """No token, or one the cluster does not know (UNAUTHENTICATED)."""

    default_code = "UNAUTHENTICATED"


class ResourceExhausted(RaftschedError):
    """A quota of the cluster was reached, or a majority's disks are full; the message names it
    (RESOURCE_EXHAUSTED)."""

    default_code = "RESOURCE_EXHAUSTED"


class Unavailable(RaftschedError):
    """No leader or quorum even after retries, or no node answers at all (UNAVAILABLE): try again later."""

    default_code = "UNAVAILABLE"


class DeadlineExceeded(RaftschedError):
    """The call (or the wait) took longer than allowed (DEADLINE_EXCEEDED)."""

    default_code = "DEADLINE_EXCEEDED"


class Timeout(DeadlineExceeded, TimeoutError):
    """``wait_run`` gave up: the run did not end in time. ``run_id`` and ``last_status`` say where it was."""

    def __init__(self, message: str, run_id: str = "", last_status: str = "") -> None:
        super().__init__(message)
        self.run_id = run_id
        self.last_status = last_status


_BY_CODE: dict[str, type[RaftschedError]] = {
    cls.default_code: cls
    for cls in (
        NotFound,
        InvalidArgument,
        AlreadyExists,
        FailedPrecondition,
        PermissionDenied,
        Unauthenticated,
        ResourceExhausted,
        Unavailable,
        DeadlineExceeded,
    )
}


def from_rpc(exc: grpc.RpcError) -> RaftschedError:
    """The SDK error for a failed gRPC call (sync or asyncio)."""
    if isinstance(exc, ClusterUnreachable):
        return Unavailable(str(exc))
    code = _call(exc, "code")
    name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
    details = " ".join(str(_call(exc, "details") or "").split())
    cls = _BY_CODE.get(name, RaftschedError)
    return cls(details, name)


def from_item_status(status: Any) -> RaftschedError:
    """The SDK error for one refused item of a batch call (its ``ItemStatus``: a code number and a message)."""
    name = _CODE_NAMES.get(status.code, "UNKNOWN")
    return _BY_CODE.get(name, RaftschedError)(status.message, name)


_CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


def _call(exc: grpc.RpcError, attr: str) -> Any:
    fn = getattr(exc, attr, None)
    return fn() if callable(fn) else None


class translated:
    """``with translated(): ...`` turns a gRPC failure into its SDK error, and a configuration problem
    (``raftsched.cluster.domain.errors.ConfigError``) into ``ConfigurationError``."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, grpc.RpcError):
            raise from_rpc(exc) from None
        if isinstance(exc, ConfigError) and not isinstance(exc, RaftschedError):
            raise ConfigurationError(str(exc)) from exc
        return None


def iter_translated(it: Iterator[Any]) -> Iterator[Any]:
    """``it``, with each failure while iterating translated as ``translated`` does."""
    with translated():
        yield from it
