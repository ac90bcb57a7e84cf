"""LeaseService use cases: acquire (long poll), renew, complete — in domain terms.

Every grant, renewal and completion is one committed command, proposed from
whichever node the executor talks to (pysyncobj forwards it to the leader),
so the check-and-set happens in ``apply`` on the leader's log order. The long
poll waits on this node's applied state: it wakes on every apply and proposes
a grant as soon as a run of the asked queues and of a type the executor
serves is leasable (a run of another type never wakes it). Renewals and
completions carry the caller's executor id; the state machine refuses them
from anyone but the lease's holder.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Callable

from cluster.domain import commands as c
from cluster.domain.errors import RejectedError, ValidationError
from cluster.domain.lease_rules import MAX_RUNS_PER_GRANT, Grant, Renewal
from cluster.domain.model import Run
from cluster.domain.results import FailedPrecondition
from cluster.domain.validation import validate_queue, validate_type_name
from cluster.node.clock import Clock
from cluster.node.replicated_state import ReplicatedState

MAX_WAIT_MS = 60_000
#: queues and job types one AcquireLease may name (a grant reads one index per queue and type)
MAX_QUEUES = 64
MAX_TYPES = 64
MAX_RENEW_BATCH = 10_000
MAX_ERROR_CHARS = 16_384
#: completions in one CompleteRuns call
MAX_COMPLETE_BATCH = 1000
DEFAULT_MAX_RESULT_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Completion:
    """One attempt's outcome as an executor reports it (``CompleteRun``)."""

    lease_id: str
    fencing_token: int
    succeeded: bool
    result: bytes = b""
    error: str = ""
    log_uri: str = ""
    #: who reports it; only the lease's holder may (an empty id is nobody's and is refused)
    executor_id: str = ""


def _require_executor(executor_id: str) -> None:
    if not executor_id or len(executor_id) > 256:
        raise ValidationError("executor_id is required (1-256 characters): name the executor, e.g. host:pid")


def _check_acquire(queues: list[str], max_runs: int, wait_ms: int, types: list[str] | tuple[str, ...]) -> None:
    if not queues:
        raise ValidationError("queues is empty: name at least one queue to take runs from, e.g. 'default'")
    if len(queues) > MAX_QUEUES:
        raise ValidationError(f"{len(queues)} queues in one request; the limit is {MAX_QUEUES}")
    for q in queues:
        validate_queue(q)
    if len(types) > MAX_TYPES:
        raise ValidationError(f"{len(types)} job types in one request; the limit is {MAX_TYPES}")
    for t in types:
        validate_type_name(t)
    if not 1 <= max_runs <= MAX_RUNS_PER_GRANT:
        raise ValidationError(f"max_runs {max_runs} is out of range: ask for 1 to {MAX_RUNS_PER_GRANT} runs")
    if not 0 <= wait_ms <= MAX_WAIT_MS:
        raise ValidationError(f"wait {wait_ms} ms is out of range: 0 to {MAX_WAIT_MS} ms")


class LeaseService:
    def __init__(self, store: ReplicatedState, clock: Clock, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> None:
        self._store = store
        self._clock = clock
        self._max_result = max_result_bytes
        self._changed = threading.Condition()
        store.on_applied.append(self._wake)

    def _wake(self, events: list) -> None:
        """On the tick thread: wake long polls only when a run became PENDING (fired or retried)."""
        if any(kind in ("fired", "retry_scheduled") for kind, _ in events):
            with self._changed:
                self._changed.notify_all()

    def acquire(
        self,
        executor_id: str,
        queues: list[str],
        max_runs: int,
        wait_ms: int,
        alive: Callable[[], bool] = lambda: True,
        types: list[str] | tuple[str, ...] = (),
    ) -> list[Grant]:
        """Grant up to ``max_runs`` runs of the job ``types`` the executor serves (empty: any type, as
        executors from before types existed ask), waiting up to ``wait_ms`` for one to come due.

        ``alive`` tells whether the caller is still there: a long poll whose
        executor died must not take runs (they would sit leased to nobody for a TTL).
        """
        _require_executor(executor_id)
        _check_acquire(queues, max_runs, wait_ms, types)
        served = tuple(dict.fromkeys(types))
        deadline = self._clock.monotonic() + wait_ms / 1000.0
        while alive():
            now = self._clock.now_ms()
            # of the runs this executor may take: a run of a type it does not serve must not wake it
            next_ms = self._store.read(lambda m: m.next_leasable_ms(queues, served), barrier=False)
            if next_ms is not None and next_ms <= now:
                grants = self._grant(executor_id, queues, max_runs, now, served)
                if grants:
                    return grants
            left = deadline - self._clock.monotonic()
            if left <= 0:
                return []
            nap = left if next_ms is None else min(left, max(0.001, (next_ms - now) / 1000.0))
            with self._changed:
                self._changed.wait(min(nap, 1.0))
        return []

    def _grant(self, executor_id: str, queues: list[str], max_runs: int, now: int, types: tuple[str, ...]) -> list[Grant]:
        grants: list[Grant] = self._store.execute(c.AcquireLeases(now, executor_id, tuple(queues), max_runs, types))
        return grants

    def renew(self, executor_id: str, leases: list[tuple[str, int]]) -> list[Renewal]:
        _require_executor(executor_id)
        if not leases:
            raise ValidationError("no leases to renew: list at least one (lease_id, fencing_token)")
        if len(leases) > MAX_RENEW_BATCH:
            raise ValidationError(f"{len(leases)} leases in one renewal; the limit is {MAX_RENEW_BATCH}")
        for lease_id, _ in leases:
            if not lease_id:
                raise ValidationError("a lease_id is empty")
        renewals: list[Renewal] = self._store.execute(c.RenewLeases(self._clock.now_ms(), executor_id, tuple(leases)))
        if not any(r.ok for r in renewals):
            raise RejectedError(FailedPrecondition("; ".join(r.error for r in renewals[:5])))
        return renewals

    def _complete_command(self, done: Completion) -> c.CompleteRun:
        if not done.lease_id:
            raise ValidationError("lease_id is required")
        if len(done.result) > self._max_result:
            raise ValidationError(
                f"result is {len(done.result)} bytes, over the limit of {self._max_result}; store large results in the run log"
            )
        error = done.error
        if len(error) > MAX_ERROR_CHARS:
            error = error[: MAX_ERROR_CHARS - 20] + " ... (truncated)"
        now = self._clock.now_ms()
        return c.CompleteRun(
            now,
            done.lease_id,
            done.fencing_token,
            done.succeeded,
            done.result,
            error,
            done.log_uri,
            random.random(),
            done.executor_id,
        )

    def complete(self, done: Completion) -> Run:
        run: Run = self._store.execute(self._complete_command(done))
        return run

    def complete_many(self, items: list[Completion | Exception]) -> list[Run | Exception]:
        """Several completions in one go (one or a few Raft entries); each gets its run or its own
        error, exactly as ``complete`` would answer it alone."""
        if not items:
            raise ValidationError("no completions: send at least one")
        if len(items) > MAX_COMPLETE_BATCH:
            raise ValidationError(f"{len(items)} completions in one call; the limit is {MAX_COMPLETE_BATCH}")
        return self._store.execute_each(items, self._complete_command)
