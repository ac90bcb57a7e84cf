"""The executor's contracts: what a handler gets, what it needs from the cluster and from an output store.

* ``Task`` — one leased run as a handler sees it; ``TaskContext`` — its log,
  cancellation and deadline. A handler is ``fn(task, ctx)``: returning means
  success (the value becomes the run's result), raising means failure
  (``HandlerError``'s text becomes the run's error).
* ``LeaseApi`` — the cluster (``raftsched.rpc.client.GrpcLeaseApi``, or a fake):
  acquire (long poll, for the job types the executor serves), renew,
  complete (one or many ``Finished`` runs), each naming the executor.
  A completion or renewal the cluster refuses raises/returns ``LeaseLost``.
* ``OutputStore`` — where each attempt's log and result go (``storage``):
  ``check()`` proves it usable or raises ``OutputStoreError`` saying what to
  fix; ``put(key, log, result)`` stores one attempt (the log streamed from a
  ``LogSource``, never whole in memory when large) and returns the log's URI,
  overwriting the same key; ``uri_for(key)`` is that URI, for messages.
* ``LiveOutputStore`` — a store that also takes a running attempt's log as
  it goes (``raftsched.cluster.domain.live_output``): ``put_part(key, offset, data)``
  stores bytes ``[offset, offset + len(data))`` (the same offset again
  overwrites it), ``held=True`` the note that live output stops there;
  ``delete_parts(key, parts)`` removes them once the whole log is stored.
  Optional: with a store without it, logs show when an attempt ends.
"""

from __future__ import annotations

import io
import threading
import time
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol, runtime_checkable

from raftsched.cluster.domain.errors import RaftschedError
from raftsched.cluster.domain.leases import Renewal
from raftsched.cluster.domain.output import OutputKey
from raftsched.cluster.executor.bounded_log import BoundedLog


@dataclass(frozen=True)
class Task:
    """One leased run, as the executor sees it."""

    lease_id: str
    fencing_token: int
    run_id: str
    job_id: str
    attempt: int
    type: str
    payload: bytes
    timeout_ms: int
    expires_ms: int
    scheduled_ms: int


@dataclass(frozen=True)
class Finished:
    """One run's outcome on its way to ``CompleteRun``."""

    task: Task
    succeeded: bool
    result: bytes = b""
    error: str = ""
    log_uri: str = ""


@dataclass
class TaskContext:
    log: BoundedLog = field(default_factory=BoundedLog)
    cancelled: threading.Event = field(default_factory=threading.Event)
    deadline: float | None = None
    reason: str = ""

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()


class LeaseLost(RaftschedError):
    """The cluster refused a completion or renewal: the lease expired or was superseded."""


class HandlerError(RaftschedError):
    """A handler's failure with a message meant for the run's error field."""


class Handler(Protocol):
    def __call__(self, task: Task, ctx: TaskContext) -> object: ...


class LeaseApi(Protocol):
    def acquire(self, queues: list[str], max_runs: int, wait_ms: int, types: list[str] | None = None) -> list[Task]:
        """Long-poll for up to ``max_runs`` runs of ``queues`` whose job type is one of ``types`` (None: any)."""
        ...

    def renew(self, leases: list[tuple[str, int]], within_s: float | None = None) -> list[Renewal]:
        """Renew ``(lease_id, fencing_token)`` pairs; raise if no answer came within ``within_s`` (None: the
        client's own deadline), trying every node meanwhile."""
        ...

    def complete(self, finished: Finished) -> None:
        """Report one outcome; raise ``LeaseLost`` if the cluster refuses it."""
        ...

    # optional: ``complete_many(finished: list[Finished]) -> list[Exception | None]``, several
    # outcomes in one call (per run None, ``LeaseLost`` or another error); see ``Completer``


@runtime_checkable
class LogSource(Protocol):
    """A finished log that can be read from the start, any number of times."""

    @property
    def size(self) -> int: ...

    def open_reader(self) -> BinaryIO: ...


class BytesLogSource:
    """A ``LogSource`` over bytes already in memory (small logs, tests)."""

    def __init__(self, data: bytes) -> None:
        self._data = bytes(data)

    @property
    def size(self) -> int:
        return len(self._data)

    def open_reader(self) -> BinaryIO:
        return io.BytesIO(self._data)


def as_log_source(log: bytes | LogSource) -> LogSource:
    return BytesLogSource(log) if isinstance(log, (bytes, bytearray, memoryview)) else log


class OutputStore(Protocol):
    def describe(self) -> str:
        """Where output goes, for logs and messages (``file:///...`` or ``s3://bucket/prefix``)."""
        ...

    def check(self) -> None:
        """Raise ``OutputStoreError`` if the store cannot be written."""
        ...

    def uri_for(self, key: OutputKey) -> str:
        """The log URI ``put`` returns for ``key``."""
        ...

    def put(self, key: OutputKey, log: bytes | LogSource, result: bytes) -> str:
        """Store one attempt's log and result; return the log's URI. Raises ``OutputStoreError``."""
        ...


@runtime_checkable
class LiveOutputStore(Protocol):
    def put_part(self, key: OutputKey, offset: int, data: bytes, held: bool = False) -> None:
        """Store live bytes of ``key``'s log from ``offset`` (or, ``held``, the note that live output stops
        there). Raises ``OutputStoreError``."""
        ...

    def delete_parts(self, key: OutputKey, parts: list[tuple[int, bool]]) -> None:
        """Remove these ``(offset, held)`` parts of ``key`` (missing ones are fine). Raises ``OutputStoreError``."""
        ...
