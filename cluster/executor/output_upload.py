"""Storing one attempt's log and result in the output store, patiently: the completion never waits forever.

``store_output`` writes through the store and returns ``(log_uri, "")``, or
``("", "output missing: <why>")`` when it gave up. A failing store is
retried with exponential backoff and jitter for up to ``retry_s`` (the
executor renews the lease meanwhile); it gives up at once for a failure that
retrying cannot fix (``retryable`` false), or when ``give_up()`` says so (the
lease was lost, the executor stops: one last try, no more waiting). An
attempt with no log and no result stores nothing (``EMPTY_OUTPUT_URI``).
"""

from __future__ import annotations

import logging
import random
import time
from typing import Callable

from raftsched.cluster.domain.output import EMPTY_OUTPUT_URI, OutputKey
from raftsched.cluster.executor.bounded_log import BoundedLog
from raftsched.cluster.executor.ports import OutputStore, Task

log = logging.getLogger("raftsched.executor")

OUTPUT_BACKOFF_S = 0.5
OUTPUT_MAX_BACKOFF_S = 15.0


def output_key(task: Task) -> OutputKey:
    """Where an attempt's output goes: its job, run, attempt and fencing token."""
    return OutputKey(task.job_id, task.run_id, task.attempt, task.fencing_token)


def store_output(
    store: OutputStore,
    task: Task,
    run_log: BoundedLog,
    result: bytes,
    retry_s: float,
    give_up: Callable[[], bool],
    pause: Callable[[float], bool],
) -> tuple[str, str]:
    """Store ``task``'s log and result (see the module); ``pause(s)`` waits and returns True to stop waiting."""
    if not result and run_log.size == 0:
        return EMPTY_OUTPUT_URI, ""  # nothing to keep: no file, no object, no request
    key = output_key(task)
    started = time.monotonic()
    deadline, delay, tries = started + retry_s, OUTPUT_BACKOFF_S, 0
    while True:
        tries += 1
        try:
            return store.put(key, run_log, result), ""
        except Exception as exc:  # noqa: BLE001 - a store failure must never cost the completion
            retryable = getattr(exc, "retryable", True)
            left = deadline - time.monotonic()
            if not retryable or left <= 0 or give_up():
                why = "" if retryable else ", not retryable"
                took = time.monotonic() - started
                missing = (
                    f"output missing: storing the log at {store.uri_for(key)} failed ({tries} tries in {took:.1f} s{why}): {exc}"
                )
                log.error("run %s: %s", task.run_id, missing)
                return "", missing
            wait = min(left, delay * (0.5 + random.random()))
            log.warning("run %s: storing output failed (%s); try %d again in %.1f s", task.run_id, exc, tries + 1, wait)
            if pause(wait):
                continue  # stopping: one last try, then give up without waiting
            delay = min(delay * 2, OUTPUT_MAX_BACKOFF_S)
