"""LeaseService use cases: acquire (long poll), renew, complete — in domain terms.

Every grant, renewal and completion is one committed command, proposed from
whichever node the executor talks to (pysyncobj forwards it to the leader),
so the check-and-set happens in ``apply`` on the leader's log order. The long
poll waits on this node's applied state: it wakes on every apply and proposes
a grant as soon as a run of the asked queues and of a type the executor
serves is leasable (a run of another type never wakes it). Renewals and
completions carry the caller's executor id; the state machine refuses them
from anyone but the lease's holder.

Before anything is proposed, every field is checked against its limit
(``raftsched.cluster.domain.limits``), a completion's ``log_uri`` against the node's own
output store (``OutputLocation``), and each named lease against what this
node already knows for certain (``final_refusal``): a lease that cannot be
held is refused here, and only one that may still be held reaches the log.
"""

from __future__ import annotations

import logging
import random
import threading
from dataclasses import dataclass
from typing import Callable

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.errors import RejectedError, ValidationError
from raftsched.cluster.domain.leases import MAX_RUNS_PER_GRANT, TOKENS_PER_ENTRY, Grant, Renewal, lease_id_for
from raftsched.cluster.domain.model import Run
from raftsched.cluster.domain.output import EMPTY_OUTPUT_URI, OutputKey
from raftsched.cluster.domain.output_location import OutputLocation
from raftsched.cluster.domain.results import FailedPrecondition
from raftsched.cluster.domain.unsafe_text import check_text
from raftsched.cluster.domain.validation import validate_queue, validate_type_name
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.clock import Clock
from raftsched.cluster.node.replica import Replica
from raftsched.cluster.node.slots import Slots

log = logging.getLogger(__name__)

MAX_WAIT_MS = lim.MAX_WAIT_MS
#: queues and job types one AcquireLease may name (a grant reads one index per queue and type)
MAX_QUEUES = lim.MAX_ACQUIRE_QUEUES
MAX_TYPES = lim.MAX_ACQUIRE_TYPES
MAX_RENEW_BATCH = lim.MAX_RENEW_BATCH
MAX_ERROR_CHARS = lim.MAX_ERROR_CHARS
#: completions in one CompleteRuns call
MAX_COMPLETE_BATCH = lim.MAX_COMPLETE_BATCH
DEFAULT_MAX_RESULT_BYTES = lim.DEFAULT_MAX_RESULT_BYTES
DEFAULT_MAX_LONG_POLLS = 512
#: the log URIs of an attempt that kept no log: its own whoever sends them
_NO_LOG = frozenset({"", EMPTY_OUTPUT_URI})


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
    #: the executor's verdict on a failure: no retry can help (FAILED at once), or wait this long before the next
    non_retryable: bool = False
    retry_after_ms: int = 0


def _require_executor(executor_id: str) -> None:
    if not executor_id or len(executor_id) > lim.MAX_ID_CHARS:
        raise ValidationError(
            f"executor_id is required (1-{lim.MAX_ID_CHARS} characters, got {len(executor_id)}): name the executor, e.g. host:pid"
        )
    check_text("executor_id", executor_id)


def _check_lease_id(lease_id: str) -> None:
    if not lease_id:
        raise ValidationError("a lease_id is empty: name the lease as AcquireLease returned it")
    lim.check_chars("lease_id", lease_id, lim.MAX_LEASE_ID_CHARS)


def final_refusal(m: JobStateMachine, lease_id: str, token: int) -> str:
    """Why no command could ever find lease ``lease_id`` held with ``token`` — or "" when one might.

    Safe on any node's applied state, without a barrier: lease ``L<t>`` is granted only by the entry
    at index ``t // TOKENS_PER_ENTRY`` with token ``t``. A pair that does not match can never be held;
    once this node has applied that entry (entries apply whole, under the lock, and only committed
    ones), a lease that is not held now never will be again. A lease granted by an entry this node
    has not applied yet (a follower behind the leader) is never refused here.
    """
    if lease_id != lease_id_for(token):
        return f"fencing token {token} is stale or wrong for lease {lim.shown(lease_id, 40)}: that pair was never granted"
    if token // TOKENS_PER_ENTRY > m.applied_index:
        return ""
    if lease_id not in m.leases:  # held: its run's token is the one its id was made from, ``token`` (checked above)
        return f"lease {lease_id} is not held: it expired, was completed, cancelled or superseded, or never existed"
    return ""


def _check_details(details: dict[str, bytes], named: set[str]) -> dict[str, bytes]:
    """The heartbeat details worth keeping (non-empty), each and all within their limits, each for a lease the
    call renews."""
    kept = {lease_id: d for lease_id, d in details.items() if d}
    total = 0
    for lease_id, d in kept.items():
        if lease_id not in named:
            raise ValidationError(f"heartbeat details for lease {lease_id[:40]!r}, which the call does not renew")
        lim.check_bytes(f"details of lease {lease_id}", d, lim.MAX_HEARTBEAT_DETAILS_BYTES, "keep a smaller checkpoint")
        total += len(d)
    if total > lim.MAX_RENEW_DETAILS_BYTES:
        raise ValidationError(
            f"heartbeat details of {total} bytes in one RenewLease; at most {lim.MAX_RENEW_DETAILS_BYTES} in one "
            "call: renew in several calls"
        )
    return kept


def _check_acquire(queues: list[str], max_runs: int, wait_ms: int, types: list[str] | tuple[str, ...]) -> None:
    if not queues:
        raise ValidationError("queues is empty: name at least one queue to take runs from, e.g. 'default'")
    lim.check_count("queues", queues, MAX_QUEUES, "name fewer queues per call")
    for q in queues:
        validate_queue(q)
    lim.check_count("types", types, MAX_TYPES, "name fewer job types per call")
    for t in types:
        validate_type_name(t)
    if not 1 <= max_runs <= MAX_RUNS_PER_GRANT:
        raise ValidationError(f"max_runs {max_runs} is out of range: ask for 1 to {MAX_RUNS_PER_GRANT} runs")
    if not 0 <= wait_ms <= MAX_WAIT_MS:
        raise ValidationError(f"wait {wait_ms} ms is out of range: 0 to {MAX_WAIT_MS} ms")


class LeaseService:
    def __init__(
        self,
        replica: Replica,
        clock: Clock,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        outputs: OutputLocation | None = None,
        max_long_polls: int = DEFAULT_MAX_LONG_POLLS,
    ) -> None:
        self._replica = replica
        self._clock = clock
        self._max_result = max_result_bytes
        #: the node's own output store; None (tests only) accepts any log_uri
        self._outputs = outputs
        self.long_polls = Slots(max_long_polls, "max_long_polls", "AcquireLease long polls")
        self._said_verdicts_off = False
        self._changed = threading.Condition()
        replica.on_applied.append(self._wake)

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
        if wait_ms == 0:
            return self._poll(executor_id, queues, max_runs, 0, alive, served)
        release = self.long_polls.take()
        try:
            return self._poll(executor_id, queues, max_runs, wait_ms, alive, served)
        finally:
            release()

    def _poll(
        self, executor_id: str, queues: list[str], max_runs: int, wait_ms: int, alive: Callable[[], bool], served: tuple[str, ...]
    ) -> list[Grant]:
        deadline = self._clock.monotonic() + wait_ms / 1000.0
        while alive():
            # of the runs this executor may take: a run of a type it does not serve must not wake it
            next_ms = self._replica.read(lambda m: m.next_leasable_ms(queues, served), barrier=False)
            # the time after the read: it waits for the entry being applied (a large one takes tens of ms), and
            # a nap reckoned from before it would oversleep the run's instant by that much
            now = self._clock.now_ms()
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
        grants: list[Grant] = self._replica.execute(c.AcquireLeases(now, executor_id, tuple(queues), max_runs, types))
        return grants

    def _refusals(self, leases: list[tuple[str, int]]) -> list[str]:
        """``final_refusal`` of each lease, on this node's applied state (no barrier: see there)."""
        return self._replica.read(lambda m: [final_refusal(m, lease_id, token) for lease_id, token in leases], barrier=False)

    def renew(self, executor_id: str, leases: list[tuple[str, int]], details: dict[str, bytes] | None = None) -> list[Renewal]:
        """Renew ``leases`` (lease_id, fencing_token); ``details``: heartbeat details by lease id, kept on the
        attempt (dropped, with a log line, while the cluster is on a command format before they existed)."""
        _require_executor(executor_id)
        if not leases:
            raise ValidationError("no leases to renew: list at least one (lease_id, fencing_token)")
        lim.check_count("leases", leases, MAX_RENEW_BATCH, "renew in several calls")
        for lease_id, _ in leases:
            _check_lease_id(lease_id)
        kept = _check_details(details or {}, {lease_id for lease_id, _ in leases})
        if kept and not self._verdicts_on():
            kept = {}
        refused = self._refusals(leases)
        live = tuple(ref for ref, why in zip(leases, refused) if not why)
        carried = tuple((lease_id, kept[lease_id]) for lease_id, _ in live if lease_id in kept)
        now = self._clock.now_ms()
        answers = iter(self._replica.execute(c.RenewLeases(now, executor_id, live, carried)) if live else [])
        renewals = [
            Renewal(lease_id, False, 0, False, why) if why else next(answers) for (lease_id, _), why in zip(leases, refused)
        ]
        if not any(r.ok for r in renewals):
            raise RejectedError(FailedPrecondition("; ".join(r.error for r in renewals[:5])))
        return renewals

    def _complete_command(self, done: Completion) -> c.CompleteRun:
        _check_lease_id(done.lease_id)
        lim.check_chars("executor_id", done.executor_id, lim.MAX_ID_CHARS)
        check_text("executor_id", done.executor_id)
        lim.check_bytes("result", done.result, self._max_result, "store large results in the run log")
        if self._outputs is not None:
            self._outputs.check(done.log_uri)
        else:
            lim.check_chars("log_uri", done.log_uri, lim.MAX_LOG_URI_CHARS)
        if done.retry_after_ms < 0 or done.retry_after_ms > lim.MAX_SPAN_MS:
            raise ValidationError(f"retry_after must be between 0 and 100 years, not {done.retry_after_ms} ms")
        verdict = not done.succeeded and (done.non_retryable or done.retry_after_ms > 0)
        on = verdict and self._verdicts_on()
        now = self._clock.now_ms()
        return c.CompleteRun(
            now,
            done.lease_id,
            done.fencing_token,
            done.succeeded,
            done.result,
            lim.cut_error(done.error),
            done.log_uri,
            random.random(),
            done.executor_id,
            on and done.non_retryable,
            done.retry_after_ms if on and not done.non_retryable else 0,
        )

    def _verdicts_on(self) -> bool:
        """Whether the cluster takes executors' verdicts and heartbeat details (command format 4): until every
        member understands them, they are dropped (said once) and the job's retry policy decides."""
        if self._replica.read(lambda m: m.cluster_format, barrier=False) >= c.VERDICT_FORMAT:
            return True
        if not self._said_verdicts_off:
            self._said_verdicts_off = True
            log.warning(
                "an executor sent a verdict (not retryable, retry after) or heartbeat details, but the cluster still "
                "uses command format %s: they are dropped until every member runs a raftsched that understands "
                "format %s", self._replica.read(lambda m: m.cluster_format, barrier=False), c.VERDICT_FORMAT,
            )  # fmt: skip
        return False

    def _refuse_dead_leases(self, commands: list[c.CompleteRun | Exception]) -> list[c.CompleteRun | Exception]:
        """Each command, or the ``RejectedError`` of a lease it names that can no longer be held, or the
        ``ValidationError`` of a ``log_uri`` that is not its own attempt's output."""
        todo = [cmd for cmd in commands if isinstance(cmd, c.CompleteRun)]
        # the attempt's place is read only for a completion that names a log: "" and EMPTY_OUTPUT_URI are every
        # attempt's own, and reading its run for nothing cost a no-op run's completion a record read and decode
        leases = [(cmd.lease_id, cmd.fencing_token, cmd.log_uri not in _NO_LOG) for cmd in todo]

        def read(m: JobStateMachine) -> list[tuple[str, OutputKey | None]]:
            return [
                (final_refusal(m, lease_id, token), m.lease_output(lease_id, token) if named else None)
                for lease_id, token, named in leases
            ]

        found = iter(self._replica.read(read, barrier=False))
        out: list[c.CompleteRun | Exception] = []
        for cmd in commands:
            if not isinstance(cmd, c.CompleteRun):
                out.append(cmd)
                continue
            why, key = next(found)
            if why:
                out.append(RejectedError(FailedPrecondition(why)))
                continue
            try:
                if self._outputs is not None and key is not None:
                    self._outputs.check_attempt(cmd.log_uri, key)
            except ValidationError as exc:
                out.append(exc)
                continue
            out.append(cmd)
        return out

    def complete(self, done: Completion) -> Run:
        (cmd,) = self._refuse_dead_leases([self._complete_command(done)])
        if isinstance(cmd, Exception):
            raise cmd
        run: Run = self._replica.execute(cmd)
        return run

    def complete_many(self, items: list[Completion | Exception]) -> list[Run | Exception]:
        """Several completions in one go (one or a few Raft entries); each gets its run or its own
        error, exactly as ``complete`` would answer it alone."""
        if not items:
            raise ValidationError("no completions: send at least one")
        lim.check_count("runs", items, MAX_COMPLETE_BATCH, "split the batch")
        commands: list[c.CompleteRun | Exception] = []
        for item in items:
            try:
                commands.append(item if isinstance(item, Exception) else self._complete_command(item))
            except ValidationError as exc:
                commands.append(exc)
        checked = self._refuse_dead_leases(commands)
        ready = [cmd for cmd in checked if isinstance(cmd, c.CompleteRun)]
        answers = iter(self._replica.execute_each(ready, lambda cmd: cmd) if ready else [])
        return [next(answers) if isinstance(cmd, c.CompleteRun) else cmd for cmd in checked]
