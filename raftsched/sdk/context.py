"""``Context``: what a task knows of the run it works on, and how it talks back while it runs.

A worker passes one to each task call (``def task(payload, ctx)``):

* ``run_id``, ``job_id``, ``attempt`` (1-based), ``fencing_token``,
  ``lease_id``, ``type``, ``scheduled_time``;
* ``deadline``: when the job's ``timeout`` ends this attempt (an aware
  ``datetime``; ``None`` without a timeout), ``time_left()`` in seconds. An
  ``async`` task is cancelled at its deadline; a plain one should look;
* ``cancelled``: a ``threading.Event`` set when the run is cancelled, its
  lease lost or the worker stops past its grace (``cancel_reason`` says which):
  stop soon, its outcome will not count;
* ``log``: a writable text stream into the run's log (``print(..., file=ctx.log)``),
  stored with the attempt and readable with ``raftsched run logs``;
* ``heartbeat(details)``: renew the lease now, and keep ``details`` (JSON,
  at most 64 KiB) on the attempt; ``last_heartbeat``: the details the latest
  earlier attempt of this run kept, decoded (``None``: none), so that a retry
  can resume where that one was.
"""

from __future__ import annotations

import datetime as dt
import io
import threading
from typing import Any

from raftsched.cluster.executor.ports import MAX_HEARTBEAT_DETAILS, Task, TaskContext
from raftsched.sdk import codec
from raftsched.sdk.durations import to_datetime


class RunLog(io.TextIOBase):
    """A text stream into the run's log (UTF-8)."""

    def __init__(self, ctx: TaskContext) -> None:
        super().__init__()
        self._ctx = ctx

    def writable(self) -> bool:
        """Always: the log takes text."""
        return True

    def write(self, text: str) -> int:
        """Append ``text`` to the run's log; its length."""
        if not isinstance(text, str):
            raise TypeError(f"ctx.log takes text, not {type(text).__name__}")
        self._ctx.log.write(text)
        return len(text)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """What the text is stored as: UTF-8."""
        return "utf-8"


class Context:
    """The run a task works on (see the module)."""

    def __init__(self, task: Task, ctx: TaskContext) -> None:
        self._task = task
        self._ctx = ctx
        self.run_id: str = task.run_id
        self.job_id: str = task.job_id
        self.attempt: int = task.attempt
        self.fencing_token: int = task.fencing_token
        self.lease_id: str = task.lease_id
        #: the job type (the task's name)
        self.type: str = task.type
        self.scheduled_time: dt.datetime = to_datetime(task.scheduled_ms)
        left = ctx.time_left()
        self.deadline: dt.datetime | None = (
            None if left is None else dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=left)
        )
        self.cancelled: threading.Event = ctx.cancelled
        self.log: RunLog = RunLog(ctx)
        self.last_heartbeat: Any = codec.decode(task.last_heartbeat)

    @property
    def cancel_reason(self) -> str:
        """Why ``cancelled`` was set ("" while it is not)."""
        return self._ctx.reason if self.cancelled.is_set() else ""

    def time_left(self) -> float | None:
        """Seconds until ``deadline`` (negative once past); None without a timeout."""
        return self._ctx.time_left()

    def heartbeat(self, details: Any = None) -> None:
        """Renew the lease now and, with ``details`` (anything JSON holds, at most 64 KiB encoded), keep them on
        the attempt: a retry of this run finds them in ``last_heartbeat``. Cheap to call often: renewals are
        paced, and only the latest details are sent. ``ValueError`` for details over 64 KiB."""
        data = b"" if details is None else codec.to_json(details, "heartbeat details")
        if len(data) > MAX_HEARTBEAT_DETAILS:
            raise ValueError(
                f"heartbeat details are {len(data)} bytes as JSON; at most {MAX_HEARTBEAT_DETAILS} are kept: "
                "send a smaller summary (a page number, an offset), not the data itself"
            )
        self._ctx.heartbeat(data)

    def __repr__(self) -> str:
        return f"Context(run_id={self.run_id!r}, attempt={self.attempt}, type={self.type!r})"
