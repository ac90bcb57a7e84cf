"""A registered task: the user's function, and the executor handler that calls it.

``TaskDef(type, fn)`` reads ``fn``'s signature once: it takes
``(payload, ctx)``, ``(payload)`` or nothing, and the payload's annotation
(the first parameter's) says what to decode it into
(``raftsched.sdk.decode``). ``handler(loop)`` is the executor's
``fn(task, ctx)``:

1. the payload is decoded; one that does not fit fails the run at once
   (``NonRetryable``, naming the field);
2. the function is called — an ``async def`` one on the worker's event loop
   (``raftsched.sdk.event_loop``), a plain one on the executor's thread;
3. its return value becomes the run's result: bytes and text as they are,
   anything else as JSON, ``None`` as no result (``raftsched.sdk.codec``).

What it raises fails the attempt: ``NonRetryable`` and ``RetryAfter`` as they
say, anything else as a retryable failure with its traceback in the run's log.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable

from raftsched.cluster.executor.ports import Task, TaskContext
from raftsched.sdk import codec
from raftsched.sdk.context import Context
from raftsched.sdk.decode import PayloadError, decode_payload
from raftsched.sdk.event_loop import LoopThread
from raftsched.sdk.outcomes import NonRetryable

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class TaskDef:
    """One task type and its function (see the module)."""

    def __init__(self, type: str, fn: Callable[..., Any]) -> None:
        if not isinstance(type, str) or not type:
            raise ValueError(f"a task needs a name (its job type), got {type!r}")
        if not callable(fn):
            raise TypeError(f"task {type!r}: {fn!r} is not callable")
        self.type = type
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))
        params = [p for p in inspect.signature(fn).parameters.values() if p.kind in _POSITIONAL]
        required = [p for p in params if p.default is inspect.Parameter.empty]
        if len(required) > 2:
            names = ", ".join(p.name for p in required)
            raise TypeError(f"task {type!r}: {fn.__qualname__}({names}) takes too many arguments: use (payload, ctx)")
        self.arity = min(len(params), 2)
        self._first = params[0].name if params else ""
        self._hint: Any = None

    @property
    def payload_hint(self) -> Any:
        """What the payload is decoded into: the first parameter's annotation (resolved when first needed)."""
        if self._hint is None:
            if not self._first:
                self._hint = inspect.Parameter.empty
            else:
                try:
                    self._hint = typing.get_type_hints(self.fn).get(self._first, inspect.Parameter.empty)
                except Exception:  # noqa: BLE001 - an annotation its module cannot resolve: take it as written
                    raw = inspect.signature(self.fn).parameters[self._first].annotation
                    self._hint = inspect.Parameter.empty if isinstance(raw, str) else raw
        return self._hint

    def handler(self, loop: LoopThread | None) -> Callable[[Task, TaskContext], bytes]:
        """The executor's handler for this task (``loop``: where ``async def`` tasks run)."""

        def handle(task: Task, ctx: TaskContext) -> bytes:
            context = Context(task, ctx)
            try:
                payload = decode_payload(task.payload, self.payload_hint) if self.arity else None
            except PayloadError as exc:
                raise NonRetryable(str(exc)) from None
            args = (payload, context)[: self.arity]
            if self.is_async:
                if loop is None:
                    raise RuntimeError(f"task {self.type!r} is async but the worker has no event loop")
                value = loop.run(self.fn(*args), ctx.cancelled, ctx.deadline, lambda: ctx.reason)
            else:
                value = self.fn(*args)
            try:
                return codec.encode(value, f"the result of task {self.type!r}")
            except TypeError as exc:
                raise NonRetryable(str(exc)) from None

        handle.__name__ = handle.__qualname__ = f"task_{self.type}"
        return handle
