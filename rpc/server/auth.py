"""Who may call what: the role table, the per-RPC decision and the server interceptor that applies them.

With ``[auth] tokens_file`` set, every RPC carries ``authorization: Bearer
<token>`` metadata. ``AuthInterceptor`` wraps each method's behaviour (so it
runs on the worker thread, with the decoded request) and, in this order:

1. finds the token (``TokenTable.find``, constant time): none or unknown is
   ``UNAUTHENTICATED``;
2. binds the executor identity (``bind_executor``): an empty ``executor_id``
   becomes the token's name, the one place where the token decides who an
   executor is; a non-empty one must be the name or ``name/...`` (step 3);
3. decides (``decide``, pure and table-driven): the role for the method, then
   the token's ``queues`` and ``types`` against what the call touches
   (``Access``: read from the request and, for calls naming a job, run or
   lease by id, looked up through ``ScopeLookup`` only when the token is
   restricted); a refusal is ``PERMISSION_DENIED`` naming the token and what
   it lacks.

Health checking (``grpc.health.v1``) and reflection (``grpc.reflection``) need
no token. Reads (the reader role) are not restricted by queue or type. WhoAmI
answers any valid token, whatever its roles: what that token itself is.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol

import grpc

from raftsched.cluster.domain.model import JobSpec
from raftsched.rpc.server.errors import status_of
from raftsched.rpc.server.tokens import Token, TokenTable

log = logging.getLogger("raftsched.auth")

READER_METHODS = frozenset(
    {"GetJob", "ListJobs", "GetRun", "ListRuns", "GetRunOutput", "WatchRuns", "PreviewSchedule", "ExplainRun", "GetClusterStatus"}
)
SUBMITTER_METHODS = frozenset(
    {
        "CreateJob",
        "CreateJobs",
        "UpdateJob",
        "PauseJob",
        "ResumeJob",
        "DeleteJob",
        "TriggerJob",
        "CancelRun",
        "RetryRun",
        "BackfillJob",
    }
)
EXECUTOR_METHODS = frozenset({"AcquireLease", "RenewLease", "CompleteRun", "CompleteRuns"})
#: methods any valid token may call, whatever its roles: what the token itself is
ANY_TOKEN_METHODS = frozenset({"WhoAmI"})
#: the roles that may call each kind of method; any other method (AddNode, RemoveNode, one added later) is admin's only
_GRANTED_BY = {"reader": ("reader", "submitter", "admin"), "submitter": ("submitter", "admin"), "executor": ("executor", "admin")}
#: methods that need no token
OPEN_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")

_DEFAULT_QUEUE: str = JobSpec._field_defaults["queue"]
_DEFAULT_TYPE: str = JobSpec._field_defaults["type"]


def method_kind(method: str) -> str:
    """``reader``, ``submitter``, ``executor``, ``admin``, or ``any`` (any valid token): whose rules a method (its
    short name) follows."""
    if method in ANY_TOKEN_METHODS:
        return "any"
    if method in READER_METHODS:
        return "reader"
    if method in SUBMITTER_METHODS:
        return "submitter"
    if method in EXECUTOR_METHODS:
        return "executor"
    return "admin"


@dataclass(frozen=True)
class Access:
    """What one call touches, as far as a token's restrictions go."""

    queues: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    executor_ids: tuple[str, ...] = ()

    def __add__(self, other: "Access") -> "Access":
        return Access(self.queues + other.queues, self.types + other.types, self.executor_ids + other.executor_ids)


def may_act_as(token_name: str, executor_id: str) -> bool:
    """An executor token acts as its own name or ``name/<anything>``."""
    return executor_id == token_name or executor_id.startswith(token_name + "/")


def decide(token: Token, method: str, access: Access) -> str | None:
    """None when ``token`` may call ``method`` touching ``access``; else why not (for PERMISSION_DENIED)."""
    if "admin" in token.roles:
        return None
    kind = method_kind(method)
    if kind == "any":
        return None
    who = f"token {token.name!r} (roles: {', '.join(sorted(token.roles))})"
    if not token.roles.intersection(_GRANTED_BY.get(kind, ("admin",))):
        needs = "the admin role" if kind == "admin" else f"the {kind} role"
        return f"{who} may not call {method}: it needs {needs}"
    if kind == "reader":
        return None
    if kind == "executor":
        for executor_id in access.executor_ids:
            if not may_act_as(token.name, executor_id):
                return f"{who} may not act as executor {executor_id!r}: use {token.name!r} or {token.name + '/<suffix>'!r}"
    outside = _outside(token.queues, access.queues)
    if outside:
        return f"{who} may not use queue {outside!r} in {method}: it is limited to queues {', '.join(sorted(token.queues))}"
    if kind == "submitter":
        outside = _outside(token.types, access.types)
        if outside:
            return f"{who} may not use job type {outside!r} in {method}: it is limited to types {', '.join(sorted(token.types))}"
    return None


def _outside(allowed: frozenset[str], used: Iterable[str]) -> str | None:
    if not allowed:
        return None
    return next((u for u in used if u not in allowed), None)


def is_restricted(token: Token, method: str) -> bool:
    """Whether deciding needs the queues and types of what the call names by id (a lookup)."""
    if "admin" in token.roles:
        return False
    kind = method_kind(method)
    return (kind == "submitter" and bool(token.queues or token.types)) or (kind == "executor" and bool(token.queues))


# ----------------------------------------------------------- what a request touches


class ScopeLookup(Protocol):
    """Reads the node's state for the decision (implemented by ``raftsched.cluster.node.scope_lookup``)."""

    def job(self, job_id: str) -> tuple[str, str] | None:
        """(queue, type) of a job, None if unknown."""

    def run(self, run_id: str) -> tuple[str, str] | None:
        """(queue, type of its job) of a run, None if unknown."""

    def lease_queues(self, lease_ids: list[str]) -> list[str]:
        """The queues of the runs that these leases hold now (unknown leases left out)."""


def _spec_access(spec: Any) -> Access:
    return Access(queues=(spec.queue or _DEFAULT_QUEUE,), types=(spec.type or _DEFAULT_TYPE,))


def _scope(scope: tuple[str, str] | None) -> Access:
    return Access() if scope is None else Access(queues=(scope[0],), types=(scope[1],))


def _executor_ids(requests: Iterable[Any]) -> Access:
    return Access(executor_ids=tuple(r.executor_id for r in requests if _has_executor_id(r)))


def _has_executor_id(request: Any) -> bool:
    return "executor_id" in request.DESCRIPTOR.fields_by_name


#: per method: what its request itself says it touches (no lookup)
_FROM_REQUEST: dict[str, Callable[[Any], Access]] = {
    "CreateJob": lambda r: _spec_access(r.spec),
    "CreateJobs": lambda r: sum((_spec_access(j.spec) for j in r.jobs), Access()),
    "UpdateJob": lambda r: _spec_access(r.spec),
    "AcquireLease": lambda r: Access(queues=tuple(r.queues)) + _executor_ids([r]),
    "RenewLease": lambda r: _executor_ids([r]),
    "CompleteRun": lambda r: _executor_ids([r]),
    "CompleteRuns": lambda r: _executor_ids(r.runs),
}

#: per method: what the job, run or leases it names by id touch (read from the state)
_FROM_STATE: dict[str, Callable[[Any, ScopeLookup], Access]] = {
    "UpdateJob": lambda r, s: _scope(s.job(r.job_id)),
    "PauseJob": lambda r, s: _scope(s.job(r.job_id)),
    "ResumeJob": lambda r, s: _scope(s.job(r.job_id)),
    "DeleteJob": lambda r, s: _scope(s.job(r.job_id)),
    "TriggerJob": lambda r, s: _scope(s.job(r.job_id)),
    "BackfillJob": lambda r, s: _scope(s.job(r.job_id)),
    "CancelRun": lambda r, s: _scope(s.run(r.run_id)),
    "RetryRun": lambda r, s: _scope(s.run(r.run_id)),
    "RenewLease": lambda r, s: Access(queues=tuple(s.lease_queues([ref.lease_id for ref in r.leases]))),
    "CompleteRun": lambda r, s: Access(queues=tuple(s.lease_queues([r.lease_id]))),
    "CompleteRuns": lambda r, s: Access(queues=tuple(s.lease_queues([item.lease_id for item in r.runs]))),
}


def access_of(method: str, request: Any, lookup: ScopeLookup | None) -> Access:
    """What a call touches; with ``lookup``, also what the ids it names touch."""
    access = _FROM_REQUEST.get(method, lambda r: Access())(request)
    if lookup is not None and method in _FROM_STATE:
        access += _FROM_STATE[method](request, lookup)
    return access


def bind_executor(method: str, request: Any, token: Token) -> None:
    """With tokens on, an executor call that names no ``executor_id`` acts as the token's name."""
    if method not in EXECUTOR_METHODS:
        return
    for item in request.runs if method == "CompleteRuns" else [request]:
        if _has_executor_id(item) and not item.executor_id:
            item.executor_id = token.name


def bearer_token(metadata: Iterable[Any]) -> str:
    """The token of an ``authorization: Bearer <token>`` metadata entry ("" if none)."""
    for entry in metadata:
        if entry.key == "authorization":
            scheme, _, token = str(entry.value).partition(" ")
            if scheme.lower() == "bearer":
                return token.strip()
    return ""


# ------------------------------------------------------------------ interceptor

Refusal = tuple[grpc.StatusCode, str]

_caller = threading.local()


def caller_name() -> str:
    """The name of the token the current RPC (on this worker thread) was authorized with; "" without [auth]."""
    return str(getattr(_caller, "name", ""))


def caller_token() -> Token | None:
    """The token the current RPC (on this worker thread) was authorized with; None without [auth]."""
    token: Token | None = getattr(_caller, "token", None)
    return token


class AuthInterceptor(grpc.ServerInterceptor):
    """Applies the module's rules to every RPC but health checking and reflection."""

    def __init__(self, tokens: TokenTable, lookup: ScopeLookup) -> None:
        self._tokens = tokens
        self._lookup = lookup

    def check(self, method: str, request: Any, metadata: Iterable[Any]) -> Refusal | None:
        """None to let the call through; else the status to refuse it with."""
        presented = bearer_token(metadata)
        if not presented:
            return grpc.StatusCode.UNAUTHENTICATED, (
                "no token: send metadata 'authorization: Bearer <token>' (raftsched --token-file FILE, or RAFTSCHED_TOKEN_FILE)"
            )
        token = self._tokens.find(presented)
        _caller.name = token.name if token is not None else ""
        _caller.token = token
        if token is None:
            return (
                grpc.StatusCode.UNAUTHENTICATED,
                "unknown token: it is not in this node's [auth] tokens_file; check --token-file",
            )
        if request is None:  # a client-streaming call: the role alone decides
            why = decide(token, method, Access())
        else:
            bind_executor(method, request, token)
            try:
                why = decide(token, method, access_of(method, request, self._lookup if is_restricted(token, method) else None))
            except Exception as exc:  # noqa: BLE001 - a failed lookup (no leader...) answers with its own status
                mapped = status_of(exc)
                if mapped is None:
                    log.exception("authorizing %s failed", method)
                    return grpc.StatusCode.INTERNAL, f"internal error authorizing {method}: {exc!r}; see the node log"
                return mapped
        return None if why is None else (grpc.StatusCode.PERMISSION_DENIED, why)

    def intercept_service(self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(details)
        full: str = details.method
        if handler is None or full.startswith(OPEN_PREFIXES):
            return handler
        return _guard(handler, full.rsplit("/", 1)[-1], self.check)


def _guard(handler: Any, method: str, check: Callable[[str, Any, Iterable[Any]], Refusal | None]) -> Any:
    """``handler`` with ``check`` run before its behaviour, on the worker thread."""

    def guard(request: Any, context: grpc.ServicerContext) -> None:
        refusal = check(method, request, context.invocation_metadata())
        if refusal is not None:
            log.debug("%s from %s refused: %s", method, context.peer(), refusal[1])
            context.abort(*refusal)

    def wrap(behaviour: Callable[[Any, grpc.ServicerContext], Any], streaming_request: bool) -> Callable[..., Any]:
        def guarded(request: Any, context: grpc.ServicerContext) -> Any:
            guard(None if streaming_request else request, context)
            return behaviour(request, context)

        return guarded

    codecs = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(wrap(handler.unary_unary, False), **codecs)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(wrap(handler.unary_stream, False), **codecs)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(wrap(handler.stream_unary, True), **codecs)
    return grpc.stream_stream_rpc_method_handler(wrap(handler.stream_stream, True), **codecs)
