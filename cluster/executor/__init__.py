"""The executor: lease runs, run them, renew, complete. Its contracts are in ``raftsched.cluster.executor.ports``."""

from raftsched.cluster.executor.bounded_log import LogSettings
from raftsched.cluster.executor.containment import Containment, RunAs
from raftsched.cluster.executor.handlers import GUARDED_TYPES, BuiltinSettings
from raftsched.cluster.executor.http_guard import AddressPolicy
from raftsched.cluster.executor.ports import Finished, HandlerError, LeaseLost, Task, TaskContext
from raftsched.cluster.executor.shell import ShellSettings
from raftsched.cluster.executor.worker import Executor

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
