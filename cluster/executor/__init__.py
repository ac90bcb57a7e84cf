"""The executor: lease runs, run them, renew, complete. Its contracts are in ``cluster.executor.ports``."""

from cluster.executor.bounded_log import LogSettings
from cluster.executor.containment import Containment, RunAs
from cluster.executor.handlers import GUARDED_TYPES, BuiltinSettings
from cluster.executor.http_guard import AddressPolicy
from cluster.executor.ports import Finished, HandlerError, LeaseLost, Task, TaskContext
from cluster.executor.shell import ShellSettings
from cluster.executor.worker import Executor

__all__ = [
    "GUARDED_TYPES",
    "AddressPolicy",
    "BuiltinSettings",
    "Containment",
    "Executor",
    "Finished",
    "HandlerError",
    "LeaseLost",
    "LogSettings",
    "RunAs",
    "ShellSettings",
    "Task",
    "TaskContext",
]
