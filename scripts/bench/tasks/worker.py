"""The entry point of a client process, and the registry of task kinds it can run.

``worker_main`` is the target of every process in ``bench.harness.pool``
(spawned, so it imports this module afresh): it answers ``ready``, then runs
one task dict at a time from its queue until a ``None`` arrives, and puts
``(index, result)`` on the shared results queue.
"""

from __future__ import annotations

import signal
import traceback
from collections.abc import Callable
from typing import Any

from bench.tasks import create, etcd, lease
from bench.tasks.context import Ctx, Progress

TASKS: dict[str, Callable[[Ctx], dict[str, Any]]] = {
    "create_closed": create.create_closed,
    "create_batched": create.create_batched,
    "create_paced": create.create_paced,
    "create_at": create.create_at,
    "delete": create.delete,
    "etcd_grant": etcd.etcd_grant,
    "lease_acquire": lease.lease_acquire,
    "lease_complete": lease.lease_complete,
}


def run_task(index: int, threads: int, task: dict[str, Any], progress_slots: Any) -> dict[str, Any]:
    """One task: its result with the errors counted, or ``{"fatal": traceback}``."""
    progress_slots[index] = 0
    progress = Progress(progress_slots, index)
    ctx = Ctx(index, threads, task, progress)
    try:
        out = TASKS[task["kind"]](ctx)
        out["errors"] = ctx.errors.as_dict()
    except BaseException as exc:  # noqa: BLE001 - reported back to the main process
        out = {"fatal": "".join(traceback.format_exception(exc))}
    finally:
        progress.close()
        ctx.close()
    return out


def worker_main(index: int, threads: int, tasks: Any, results: Any, progress_slots: Any) -> None:
    """Entry point of a client process: run tasks until a None arrives."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us by pid
    results.put((index, {"ready": True}))
    while True:
        task = tasks.get()
        if task is None:
            return
        results.put((index, run_task(index, threads, task, progress_slots)))
