"""gRPC failures as people read them: one line, the status and what to do.

``describe(exc)`` turns any ``grpc.RpcError`` into one line (``CODE: details``
plus a hint for the failures TLS and tokens cause), never the multi-line
repr of ``_InactiveRpcError``. ``unreachable(exc)`` tells a failure to reach
a node at all (connection refused, timed out, dropped) from an answer the
node gave. ``ClusterUnreachable`` is what a ``Client`` raises when no node of
the cluster answers; it is a ``grpc.RpcError`` (code UNAVAILABLE), so code
that handles those keeps working. ``RpcFailure`` carries an RpcError's one
line through code that must not import grpc (the executor).
"""

from __future__ import annotations

import re
from typing import Sequence

import grpc

#: what gRPC itself (not a node) says when it could not reach a node or lost it mid-call
_TRANSPORT = re.compile(
    r"failed to connect|connection refused|socket closed|connection reset|broken pipe|stream removed|"
    r"connections to all backends failing|dns resolution failed|cancelling all calls|end of tcp stream|"
    r"connection attempt timed out|keepalive watchdog timeout|goaway",
    re.IGNORECASE,
)
_TLS = re.compile(r"ssl|tls|handshake|certificate", re.IGNORECASE)


def unreachable(exc: grpc.RpcError) -> bool:
    """True when the call never got an answer from a node (as opposed to an error the node sent)."""
    code, details = _code(exc), _details(exc)
    if code == grpc.StatusCode.UNAVAILABLE:
        return bool(_TRANSPORT.search(details)) or not details
    if code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL):
        return bool(_TRANSPORT.search(details))
    return False


def describe(exc: BaseException) -> str:
    """One line for any error, with a hint for a gRPC status that has a usual cause."""
    if not isinstance(exc, grpc.RpcError):
        return " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, ClusterUnreachable):
        return str(exc)
    code, details = _code(exc), " ".join(_details(exc).split())
    text = f"{code.name if code else 'ERROR'}: {details or '(no details)'}"
    return text + _hint(code, details)


def _hint(code: grpc.StatusCode | None, details: str) -> str:
    if "tcp handshaker" in details.lower():  # gRPC's words for a TCP connection that was never answered: not TLS
        return " (no answer from the node: is it down, or a firewall in the way? give --cluster the addresses of live nodes)"
    if code == grpc.StatusCode.UNAVAILABLE and _TLS.search(details):
        return (
            " (a TLS problem: check --ca-file (the CA that signed the nodes' certificates) and, if the nodes "
            "require client certificates, --cert-file/--key-file)"
        )
    if code == grpc.StatusCode.UNAVAILABLE and _plaintext_to_tls(details):
        return " (if the nodes serve TLS, give --ca-file)"
    return ""


def _plaintext_to_tls(details: str) -> bool:
    """How a plaintext connection to a TLS port fails: the node closes it before anything is said."""
    lower = details.lower()
    return "socket closed" in lower and "failed to connect" in lower


def _code(exc: grpc.RpcError) -> grpc.StatusCode | None:
    code = getattr(exc, "code", None)
    return code() if callable(code) else None


def _details(exc: grpc.RpcError) -> str:
    details = getattr(exc, "details", None)
    return (details() if callable(details) else "") or ""


class ClusterUnreachable(grpc.RpcError):
    """No node of the cluster answered: none is running there, or none can be reached."""

    def __init__(self, addresses: Sequence[str], last: grpc.RpcError | None = None, where: str = "") -> None:
        self.addresses = list(addresses)
        self.last = last
        detail = _details(last) if last is not None else ""
        text = f"no node of the cluster answers at {', '.join(self.addresses)}: is it running?"
        if where:
            text += f" (addresses from {where})"
        if _TLS.search(detail):
            text += _hint(grpc.StatusCode.UNAVAILABLE, detail) + f"; gRPC said: {' '.join(detail.split())}"
        elif _plaintext_to_tls(detail):
            text += _hint(grpc.StatusCode.UNAVAILABLE, detail)
        super().__init__(text)

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return str(self)


class RpcFailure(RuntimeError):
    """A failed call, as one readable line (``describe``), with its status code's name."""

    def __init__(self, exc: grpc.RpcError) -> None:
        super().__init__(describe(exc))
        code = _code(exc)
        self.code_name = code.name if code else "UNKNOWN"
