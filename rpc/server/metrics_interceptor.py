"""Counts and times every gRPC call by method and status code (``raftsched_grpc_requests_total``,
``raftsched_grpc_request_seconds``) through an injected ``observe(method, code, seconds)``.

Put it first in the server's interceptors, before ``AuthInterceptor``: it
then wraps the whole call, the token check included, so a call refused with
UNAUTHENTICATED or PERMISSION_DENIED is counted with that code. ``method``
is the full name without the leading slash (``raftsched.v1.JobService/GetJob``),
``code`` a ``grpc.StatusCode`` name. A streaming call is observed when its
stream ends (its time is the stream's life). Non-blocking handlers (the
health service's ``Watch``, which holds no thread) pass through uncounted;
an unknown method is answered UNIMPLEMENTED by gRPC itself, uncounted, so the
labels stay bounded by the methods served.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import grpc

#: ``observe(method, code, seconds)``; called on the worker thread: keep it short
RequestObserver = Callable[[str, str, float], None]


def _code(context: grpc.ServicerContext, default: str) -> str:
    code = context.code() if hasattr(context, "code") else None
    return code.name if isinstance(code, grpc.StatusCode) else default


class MetricsInterceptor(grpc.ServerInterceptor):
    def __init__(self, observe: RequestObserver) -> None:
        self._observe = observe

    def intercept_service(self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(details)
        if handler is None:
            return None
        method = str(details.method).lstrip("/")
        return _measured(handler, method, self._observe)


def _measured(handler: Any, method: str, observe: RequestObserver) -> Any:
    def unary(behaviour: Callable[[Any, grpc.ServicerContext], Any]) -> Callable[..., Any]:
        def call(request: Any, context: grpc.ServicerContext) -> Any:
            started, code = time.perf_counter(), "UNKNOWN"
            try:
                response = behaviour(request, context)
                code = _code(context, "OK")
                return response
            except BaseException:
                code = _code(context, "UNKNOWN")
                raise
            finally:
                observe(method, code, time.perf_counter() - started)

        return call

    def streaming(behaviour: Callable[[Any, grpc.ServicerContext], Any]) -> Callable[..., Any]:
        def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            started, code = time.perf_counter(), "UNKNOWN"
            try:
                yield from behaviour(request, context)
                code = _code(context, "OK")
            except GeneratorExit:  # the client went away
                code = "CANCELLED"
                raise
            except BaseException:
                code = _code(context, "UNKNOWN")
                raise
            finally:
                observe(method, code, time.perf_counter() - started)

        return call

    behaviour = handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
    if getattr(behaviour, "experimental_non_blocking", False):
        return handler
    codecs = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(unary(handler.unary_unary), **codecs)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(streaming(handler.unary_stream), **codecs)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(unary(handler.stream_unary), **codecs)
    return grpc.stream_stream_rpc_method_handler(streaming(handler.stream_stream), **codecs)
