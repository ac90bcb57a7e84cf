"""The worker of the ``worker_vs_executor`` scenario: a ``raftsched.Worker`` whose one task, for job type
``noop``, does nothing (as the executor's built-in ``noop`` handler). Run as
``raftsched worker bench.noop_worker:worker`` with ``scripts/`` on the import path."""

from __future__ import annotations

from raftsched import Context, Worker

worker = Worker(queues=["default"])


@worker.task("noop")
def noop(payload: bytes, ctx: Context) -> None:
    """Nothing: the run succeeds with no result, as with the executor's ``noop`` handler."""
