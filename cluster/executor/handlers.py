"""The built-in job types an executor runs, and which of them are on.

* ``noop`` — succeeds at once (tests, benchmarks). Always on.
* ``shell`` — ``raftsched.cluster.executor.shell``; off unless allowed.
* ``http`` — ``raftsched.cluster.executor.http_handler``; off unless allowed.
* ``notify`` — ``raftsched.cluster.executor.notify_handler`` (notifications, on the queue
  ``raftsched.notify``, which an executor allowing it also serves); off unless allowed.

``builtin_handlers(allow, settings)`` is the table an executor starts from:
``noop`` plus the built-ins named in ``allow`` (``--allow-type``). Handlers
a user registers are always on beside them. Each handler is ``fn(task, ctx)``
(see ``raftsched.cluster.executor.ports``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from raftsched.cluster.executor.bounded_log import BoundedLog
from raftsched.cluster.executor.http_guard import AddressPolicy
from raftsched.cluster.executor.http_handler import HttpHandler
from raftsched.cluster.executor.notify_handler import NotifyHandler
from raftsched.cluster.executor.ports import Task, TaskContext
from raftsched.cluster.executor.shell import ShellHandler, ShellSettings

__all__ = ["GUARDED_TYPES", "BoundedLog", "BuiltinSettings", "HandlerFn", "builtin_handlers", "noop_handler"]

HandlerFn = Callable[[Task, TaskContext], object]
#: the built-in types that are off unless an executor allows them by name
GUARDED_TYPES = ("shell", "http", "notify")


def noop_handler(task: Task, ctx: TaskContext) -> bytes:
    """Does nothing and succeeds (benchmarks, tests)."""
    return b""


@dataclass(frozen=True)
class BuiltinSettings:
    """How the built-in types run: ``shell``'s environment and kill grace, ``http``'s refused addresses."""

    shell: ShellSettings = field(default_factory=ShellSettings)
    http: AddressPolicy = field(default_factory=AddressPolicy)
    #: ``notify``'s signing secrets, by name (``--notify-secrets``)
    notify_secrets: Mapping[str, str] = field(default_factory=dict)


def builtin_handlers(allow: Iterable[str] = (), settings: BuiltinSettings = BuiltinSettings()) -> dict[str, HandlerFn]:
    """``noop`` and the built-in types named in ``allow``. ValueError for a name that is not a built-in type."""
    allowed = set(allow)
    unknown = sorted(allowed - set(GUARDED_TYPES) - {"noop"})
    if unknown:
        raise ValueError(
            f"--allow-type {', '.join(unknown)}: only the built-in types {', '.join(GUARDED_TYPES)} need allowing "
            "(noop and types registered with --handler are always on)"
        )
    handlers: dict[str, HandlerFn] = {"noop": noop_handler}
    if "shell" in allowed:
        handlers["shell"] = ShellHandler(settings.shell)
    if "http" in allowed:
        handlers["http"] = HttpHandler(settings.http)
    if "notify" in allowed:
        handlers["notify"] = NotifyHandler(settings.http, settings.notify_secrets)
    return handlers
