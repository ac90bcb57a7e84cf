"""The executor: lease runs, run them, renew, complete. Its contracts are in ``cluster.executor.ports``."""

from cluster.executor.bounded_log import LogSettings
from cluster.executor.ports import Finished, HandlerError, LeaseLost, Task, TaskContext
from cluster.executor.worker import Executor

__all__ = ["Executor", "Finished", "HandlerError", "LeaseLost", "LogSettings", "Task", "TaskContext"]
