"""An executor without a cluster: a lease API that records completions, and a held lease with a log.

For tests that drive ``Executor._finish`` (store the attempt's output, then
complete it) directly, with any output store.
"""

from __future__ import annotations

from raftsched.cluster.executor.ports import Finished, Task, TaskContext
from raftsched.cluster.executor.worker import Executor, _Held
from raftsched.storage import OutputKey, OutputStore

#: the task every ``held`` lease is for, and the output key its attempt stores under
TASK = Task("L1", 42, "R1", "J1", 2, "shell", b"", 0, 0, 0)
TASK_KEY = OutputKey(TASK.job_id, TASK.run_id, TASK.attempt, TASK.fencing_token)


class FakeApi:
    """A lease API with nothing to lease; ``completions`` holds (succeeded, result, error, log_uri) per call."""

    def __init__(self) -> None:
        self.completions: list[tuple[bool, bytes, str, str]] = []

    def acquire(self, queues: list[str], max_runs: int, wait_ms: int, types: list[str] | None = None) -> list[Task]:
        return []

    def renew(self, leases: list[tuple[str, int]], within_s: float | None = None) -> list:
        return []

    def complete(self, finished: Finished) -> None:
        self.completions.append((finished.succeeded, finished.result, finished.error, finished.log_uri))


def held(text: bytes = b"hello\n") -> _Held:
    """A lease on ``TASK`` whose handler wrote ``text`` to its log."""
    ctx = TaskContext()
    ctx.log.write(text)
    return _Held(TASK, ctx, 30.0)


def executor(store: OutputStore, retry_s: float = 30.0) -> tuple[Executor, FakeApi]:
    """An executor writing to ``store`` that retries a failing store for ``retry_s`` seconds."""
    api = FakeApi()
    ex = Executor(api, ["q"], output=store, output_retry_s=retry_s)  # type: ignore[arg-type]
    return ex, api
