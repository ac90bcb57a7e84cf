"""The executor's contracts: what a handler gets, what it needs from the cluster and from an output store.

* ``Task`` — one leased run as a handler sees it; ``TaskContext`` — its log,
  cancellation, deadline and heartbeat. A handler is ``fn(task, ctx)``:
  returning means success (the value becomes the run's result), raising
  means failure (``HandlerError``'s text becomes the run's error; one marked
  ``non_retryable`` fails the run at once, one with ``retry_after_s`` asks
  that the next attempt wait at least that long).
  ``ctx.heartbeat(details)`` asks the executor to renew the lease now, with
  ``details`` (at most ``MAX_HEARTBEAT_DETAILS`` bytes) to keep on the
  attempt; ``task.last_heartbeat`` holds the latest earlier attempt's.
* ``LeaseApi`` — the cluster (``raftsched.rpc.client.GrpcLeaseApi``, or a fake):
  acquire (long poll, for the job types the executor serves), renew,
  complete (one or many ``Finished`` runs), each naming the executor.
  A completion or renewal the cluster refuses raises/returns ``LeaseLost``.
  A renewal may carry heartbeat details per lease (``details``).
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
from typing import BinaryIO, Callable, Protocol, runtime_checkable

from raftsched.cluster.domain import limits as lim
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
    #: the heartbeat details of this run's latest earlier attempt that sent any (b"": none)
    last_heartbeat: bytes = b""


#: the most heartbeat details one renewal may carry for a lease (``LeaseRef.details``)
MAX_HEARTBEAT_DETAILS = lim.MAX_HEARTBEAT_DETAILS_BYTES


@dataclass(frozen=True)
class Finished:
    """One run's outcome on its way to ``CompleteRun``."""

    task: Task
    succeeded: bool
    result: bytes = b""
    error: str = ""
    log_uri: str = ""
    #: a failure that no retry can help: the run is FAILED at once
    non_retryable: bool = False
    #: a failure whose next attempt must not be leased before this many ms after the completion (0: the
    #: retry policy's backoff alone)
    retry_after_ms: int = 0


def _no_renewal() -> None:
    """What ``TaskContext.renew_now`` does until an executor sets it: nothing."""


@dataclass
class TaskContext:
    log: BoundedLog = field(default_factory=BoundedLog)
    cancelled: threading.Event = field(default_factory=threading.Event)
    deadline: float | None = None
    reason: str = ""
    #: asks the executor to renew this lease now (set by the executor; ``heartbeat`` calls it)
    renew_now: Callable[[], None] = _no_renewal
    _details: bytes | None = field(default=None, repr=False)
    _details_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def heartbeat(self, details: bytes = b"") -> None:
        """Ask for a renewal of the lease now; ``details`` (when not empty) go with it, to be kept on the
        attempt (the latest given wins, sent once). ``ValueError`` over ``MAX_HEARTBEAT_DETAILS`` bytes."""
        if len(details) > MAX_HEARTBEAT_DETAILS:
            raise ValueError(
                f"heartbeat details are {len(details)} bytes; at most {MAX_HEARTBEAT_DETAILS} are kept: "
                "send a smaller summary (a page number, an offset), not the data itself"
            )
        if details:
            with self._details_lock:
                self._details = bytes(details)
        self.renew_now()

    def pending_details(self) -> bytes | None:
        """The details given to ``heartbeat`` and not yet sent (None: none)."""
        with self._details_lock:
            return self._details

    def details_sent(self, details: bytes) -> None:
        """A renewal carried ``details``: forget them, unless newer ones came meanwhile."""
        with self._details_lock:
            if self._details == details:
                self._details = None


class LeaseLost(RaftschedError):
    """The cluster refused a completion or renewal: the lease expired or was superseded."""


class HandlerError(RaftschedError):
    """A handler's failure with a message meant for the run's error field.

    ``non_retryable``: no retry can help, the run is FAILED at once. ``retry_after_s``: the next attempt
    is not leased before this long after the completion (the retry policy's backoff still applies when
    it is longer)."""

    def __init__(self, message: str = "", *, non_retryable: bool = False, retry_after_s: float = 0.0) -> None:
        super().__init__(message)
        if retry_after_s < 0:
            raise ValueError(f"retry_after_s must not be negative, got {retry_after_s}")
        self.non_retryable = non_retryable
        self.retry_after_s = retry_after_s


class Handler(Protocol):
    def __call__(self, task: Task, ctx: TaskContext) -> object: ...


class LeaseApi(Protocol):
    def acquire(self, queues: list[str], max_runs: int, wait_ms: int, types: list[str] | None = None) -> list[Task]:
        """Long-poll for up to ``max_runs`` runs of ``queues`` whose job type is one of ``types`` (None: any)."""
        ...

    def renew(
        self, leases: list[tuple[str, int]], within_s: float | None = None, details: dict[str, bytes] | None = None
    ) -> list[Renewal]:
        """Renew ``(lease_id, fencing_token)`` pairs; raise if no answer came within ``within_s`` (None: the
        client's own deadline), trying every node meanwhile. ``details``: heartbeat details to keep on the
        attempts of some of the leases, by lease id (the executor passes it only when it has some)."""
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
