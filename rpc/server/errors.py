"""One table from domain errors to gRPC status codes, and the servicer guard that applies it."""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, TypeVar

import grpc

from raftsched.cluster.domain.errors import OutOfRange, Overloaded, RejectedError, Unavailable, ValidationError
from raftsched.cluster.domain.results import (
    AlreadyExists,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    Rejected,
    ResourceExhausted,
)
from raftsched.cluster.node.config import ConfigError

log = logging.getLogger("raftsched.rpc")

_REJECTED_CODES: dict[type[Rejected], grpc.StatusCode] = {
    InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Internal: grpc.StatusCode.INTERNAL,
}


def status_of(exc: BaseException) -> tuple[grpc.StatusCode, str] | None:
    """The gRPC status for a domain error, or None if it is not one (a bug)."""
    if isinstance(exc, RejectedError):
        return _REJECTED_CODES.get(type(exc.rejected), grpc.StatusCode.FAILED_PRECONDITION), exc.rejected.message
    if isinstance(exc, (ValidationError, ConfigError)):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    if isinstance(exc, Unavailable):
        return grpc.StatusCode.UNAVAILABLE, str(exc)
    if isinstance(exc, Overloaded):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc)
    if isinstance(exc, OutOfRange):
        return grpc.StatusCode.OUT_OF_RANGE, str(exc)
    return None


def item_status(exc: Exception | None, where: str) -> tuple[int, str]:
    """(code number, message) of one item of a batch call; (0, "") for success."""
    if exc is None:
        return 0, ""
    mapped = status_of(exc)
    if mapped is None:
        log.error("%s: an item failed: %r", where, exc)
        mapped = (grpc.StatusCode.INTERNAL, f"internal error in {where}: {exc!r}; see the node log")
    return int(mapped[0].value[0]), mapped[1]


def convert_each(requests: Any, convert: Callable[[Any], Any]) -> list[Any]:
    """Batch calls: each request converted, or the ``ValidationError`` its conversion raised."""
    out: list[Any] = []
    for req in requests:
        try:
            out.append(convert(req))
        except ValidationError as exc:
            out.append(exc)
    return out


def fill_results(results: Any, answers: list[Any], fill: Callable[[Any, Any], Any], where: str) -> None:
    """Batch calls: one ``results`` entry per answer, its status set, and ``fill(value, entry)``
    for a success. A batch none of whose items could be proposed fails as a whole with
    UNAVAILABLE, so clients retry it like any other call."""
    if answers and all(isinstance(a, Unavailable) for a in answers):
        raise answers[0]
    for answer in answers:
        entry = results.add()
        if isinstance(answer, Exception):
            entry.status.code, entry.status.message = item_status(answer, where)
        else:
            fill(answer, entry)


F = TypeVar("F", bound=Callable[..., Any])


def guarded(fn: F) -> F:
    """Turn domain errors raised by a servicer method into their status codes."""

    @functools.wraps(fn)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return fn(self, request, context)
        except Exception as exc:  # noqa: BLE001 - every error leaves with a status
            mapped = status_of(exc)
            if mapped is None:
                log.exception("%s failed", fn.__name__)
                mapped = (grpc.StatusCode.INTERNAL, f"internal error in {fn.__name__}: {exc!r}; see the node log")
            context.abort(mapped[0], mapped[1])

    return wrapper  # type: ignore[return-value]


def guarded_stream(fn: F) -> F:
    """``guarded`` for server-streaming methods (generators)."""

    @functools.wraps(fn)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            yield from fn(self, request, context)
        except Exception as exc:  # noqa: BLE001
            mapped = status_of(exc)
            if mapped is None:
                log.exception("%s failed", fn.__name__)
                mapped = (grpc.StatusCode.INTERNAL, f"internal error in {fn.__name__}: {exc!r}; see the node log")
            context.abort(mapped[0], mapped[1])

    return wrapper  # type: ignore[return-value]
