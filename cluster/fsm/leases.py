"""Lease handlers: grant, renew, complete, expire, grace — modelled on etcd's lessor, with absolute deadlines.

* A grant is a committed command; its fencing tokens are numbered by the
  entry that grants them (``raftsched.cluster.domain.leases``), at most
  ``MAX_RUNS_PER_GRANT`` per entry (``Tx.tokens_used`` counts them across
  the entry's commands).
* ``lease_expires_ms`` is absolute and replicated. Only the leader watches the
  deadlines (``queries.expired_leases`` reads an index ordered by deadline)
  and it *proposes* their expiry; nothing expires locally.
* A new leader proposes ``GraceLeases`` once: every live lease gets at least
  ``grace`` from then (about one election timeout), never its full TTL again.
* A grant names the job types its executor serves (``AcquireLeases.types``):
  only runs of those types are granted, read from a (queue, type) index so a
  long queue of other types costs nothing; the others stay PENDING for an
  executor that serves them. No types (entries from before they existed)
  means any type, selected exactly as those entries always were.
* A completion or renewal with an unknown, expired, superseded or wrongly
  fenced lease is refused (FAILED_PRECONDITION): a zombie changes nothing.
  So is one from any executor but the lease's holder (``_holder_check``).
  A lease is expired when an ``ExpireLeases`` entry says so, not when a
  clock passes its deadline: until then its holder is still the only one,
  and a renewal that reaches a new leader before its grace is not refused.
* A failed or expired attempt is retried after an exponential backoff with
  jitter (the jitter's random draw travels in the command: apply stays
  deterministic); after ``max_attempts`` the run is DEAD_LETTER. The
  executor may say otherwise (command format 4): a failure that is not
  retryable ends the run FAILED at once, and a ``retry_after`` takes the
  backoff's place. A renewal may carry heartbeat details, kept on the
  attempt (``run_history.heartbeat``) and handed to the next attempt.
* From command format 4, a completion's ``log_uri`` must end in the
  attempt's own place (``.../<job>/<run>/attempt-<n>-token-<t>.log``):
  the node checked it against its store before proposing; apply checks
  what every node can, so no entry names another run's log.
"""

from __future__ import annotations

from heapq import merge
from itertools import islice
from typing import Iterator

from sortedcontainers import SortedList

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.leases import MAX_RUNS_PER_GRANT, TOKENS_PER_ENTRY, Grant, Renewal, backoff_ms, lease_id_for
from raftsched.cluster.domain.model import MAX_PRIORITY, AttemptOutcome, JobStatus, RetryPolicy, Run, RunStatus
from raftsched.cluster.domain.output import OutputKey
from raftsched.cluster.domain.output_location import names_attempt
from raftsched.cluster.domain.results import FailedPrecondition, InvalidArgument, Ok, Result
from raftsched.cluster.domain.run_history import HISTORY_FORMAT, begin_attempt, end_attempt, heartbeat
from raftsched.cluster.domain.words import iso, span
from raftsched.cluster.fsm import runs
from raftsched.cluster.fsm.memory import QueueKeys, drop
from raftsched.cluster.fsm.tx import Tx

# ------------------------------------------------------------ checks


def _lease_check(tx: Tx, lease_id: str, token: int) -> Run | FailedPrecondition:
    run_id = tx.mem.leases.get(lease_id)
    run = None if run_id is None else tx.run(run_id)
    if run is None:
        return FailedPrecondition(
            f"lease {lease_id} is not held: it expired, was completed, cancelled or superseded, or never existed"
        )
    if run.fencing_token != token:
        return FailedPrecondition(
            f"stale fencing token {token} for lease {lease_id} of run {run.run_id} (current token {run.fencing_token})"
        )
    # past its deadline but not yet expired by a committed ExpireLeases: still the one holder (as etcd)
    return run


def _holder_check(tx: Tx, lease_id: str, token: int, executor_id: str | None) -> Run | FailedPrecondition:
    """``_lease_check``, and only the lease's holder may renew or complete it (the one place this is decided;
    ``executor_id`` None — completions in log entries from before they named their executor — skips it, so
    those entries replay as they applied)."""
    run = _lease_check(tx, lease_id, token)
    if isinstance(run, FailedPrecondition) or executor_id is None or executor_id == run.executor_id:
        return run
    caller = repr(executor_id) if executor_id else "'' (the request names no executor_id)"
    return FailedPrecondition(
        f"lease {lease_id} is held by executor {run.executor_id!r}, not {caller}: "
        "only the executor that holds a lease may renew or complete it"
    )


def _set_deadline(tx: Tx, run: Run, expires_ms: int) -> None:
    deadlines = tx.mem.lease_deadlines
    drop(deadlines, (run.lease_expires_ms, run.lease_id))
    run.lease_expires_ms = expires_ms
    deadlines.add((expires_ms, run.lease_id))


def _attempt_failed(tx: Tx, run: Run, error: str, draw: float, non_retryable: bool = False, retry_after_ms: int = 0) -> None:
    """After a failed or expired attempt: CANCELLED if asked, FAILED if the executor said no retry can help,
    retry after backoff (or after the executor's ``retry_after_ms``), or DEAD_LETTER."""
    runs.release(tx, run)
    run.error = error
    if run.cancel_requested:
        runs.finish(tx, run, RunStatus.CANCELLED, error or "cancelled by request")
        return
    job = tx.job(run.job_id)
    retry = job.spec.retry if job is not None else RetryPolicy(max_attempts=1)
    used = run.attempt - run.budget_base  # a manual retry (RetryRun) starts a fresh budget
    if non_retryable:
        runs.finish(tx, run, RunStatus.FAILED, f"attempt {used} of {retry.max_attempts} failed and is not retryable: {error}")
        return
    if used >= retry.max_attempts or job is None or job.status is JobStatus.DELETED:
        runs.finish(tx, run, RunStatus.DEAD_LETTER, f"attempt {used} of {retry.max_attempts} failed: {error}")
        return
    runs.unindex_live(tx, run, job.spec)  # stays active: only its live indexes change, to PENDING's
    runs.set_status(tx, run, RunStatus.PENDING)
    wait = retry_after_ms if retry_after_ms > 0 else backoff_ms(retry, used, draw)
    run.not_before_ms = tx.mem.now_ms + wait
    run.lease_expires_ms = 0
    runs.index_live(tx, run, job.spec)
    why = f"a wait of {span(wait)}, as the executor asked" if retry_after_ms > 0 else f"a backoff of {span(wait)}"
    runs.step(
        tx, run, "retry_scheduled",
        f"attempt {used + 1} of {retry.max_attempts} after {why} (not before {iso(run.not_before_ms)})",
    )  # fmt: skip
    tx.events.append(("retry_scheduled", run))


# ------------------------------------------------------------ grants


def _any_type_candidates(tx: Tx, cmd: c.AcquireLeases) -> list[tuple[int, str]]:
    """Leasable keys of ``cmd.queues`` whatever their type (the selection of every entry from before types
    existed: kept exactly, so that replaying those entries gives the same state)."""
    candidates: list[tuple[int, str]] = []
    for queue in dict.fromkeys(cmd.queues):
        pending = tx.mem.queue_keys(queue)
        if not pending:
            continue
        for key in pending.irange(maximum=(tx.mem.now_ms + 1, ""), inclusive=(True, False)):
            candidates.append(key)
            if len(candidates) >= cmd.max_runs * len(cmd.queues):
                break
    candidates.sort()
    return candidates


def _typed_candidates(tx: Tx, cmd: c.AcquireLeases, budget: int) -> list[tuple[int, str]]:
    """The ``budget`` oldest leasable keys of ``cmd.queues`` whose job's type is one of ``cmd.types``: a lazy merge
    of the (queue, type) indexes — never a scan of other types' runs (read whole before any grant changes the
    indexes)."""
    heads = []
    for queue in dict.fromkeys(cmd.queues):
        for job_type in dict.fromkeys(cmd.types):
            pending = tx.mem.pending_by_type.get((queue, job_type))
            if pending:
                heads.append(pending.irange(maximum=(tx.mem.now_ms + 1, ""), inclusive=(True, False)))
    return list(islice(merge(*heads), budget))


#: how many leasable runs one grant looks at past those it grants, when priorities or concurrency keys are in play
#: (runs held back by their concurrency key are passed over): bounded work in apply
SCAN_PAST = 10_000


def _leasable(pending: SortedList | QueueKeys, now_ms: int) -> Iterator[tuple[int, str]]:
    return pending.irange(maximum=(now_ms + 1, ""), inclusive=(True, False))


def _ranked_candidates(tx: Tx, cmd: c.AcquireLeases) -> Iterator[tuple[int, str]]:
    """Leasable keys of ``cmd.queues`` (of ``cmd.types``, if any), higher priorities first, oldest first within
    one: a lazy merge of each priority's indexes (command format 5's grant)."""
    mem, now = tx.mem, tx.mem.now_ms
    queues = list(dict.fromkeys(cmd.queues))
    types = list(dict.fromkeys(cmd.types))
    for p in range(MAX_PRIORITY, 0, -1):
        if types:
            found = [mem.prio_by_type.get((q, t, p)) for q in queues for t in types]
        else:
            found = [mem.prio_pending.get((q, p)) for q in queues]
        heads = [_leasable(f, now) for f in found if f]
        if heads:
            yield from merge(*heads)
    if types:
        base = [mem.pending_by_type.get((q, t)) for q in queues for t in types]
    else:
        base = [mem.queue_keys(q) for q in queues]
    yield from merge(*[_leasable(f, now) for f in base if f])


def _candidates(tx: Tx, cmd: c.AcquireLeases, budget: int) -> list[tuple[int, str]]:
    mem = tx.mem
    if not (mem.prio_pending or mem.keyed_pending):  # the grant of every entry before priorities and keys
        return _typed_candidates(tx, cmd, budget) if cmd.types else _any_type_candidates(tx, cmd)[:budget]
    out: list[tuple[int, str]] = []
    keyed = mem.keyed_pending
    held: dict[str, int] = {}  # concurrency key -> leased now and granted here
    for key in islice(_ranked_candidates(tx, cmd), budget + SCAN_PAST):
        limited = keyed.get(key[1]) if keyed else None
        if limited is not None:
            ckey, limit = limited
            n = held.get(ckey, mem.conc_leased.get(ckey, 0))
            if n >= limit:
                continue  # held back: its key is at its limit; it stays PENDING
            held[ckey] = n + 1
        out.append(key)
        if len(out) >= budget:
            break
    return out


def acquire(tx: Tx, cmd: c.AcquireLeases) -> Result:
    now, index = tx.mem.now_ms, tx.index
    if tx.token_entry != index:
        tx.token_entry, tx.tokens_used = index, 0
    # the proposer keeps a batch's grants within one entry's tokens; this only guards the range
    budget = max(0, min(cmd.max_runs, MAX_RUNS_PER_GRANT - tx.tokens_used))
    candidates = _candidates(tx, cmd, budget)
    grants: list[Grant] = []
    history = tx.mem.cluster_format >= HISTORY_FORMAT
    for k, (_, run_id) in enumerate(candidates, start=tx.tokens_used + 1):
        run = runs.indexed_run(tx, run_id)
        spec = tx.spec(run.job_id)
        assert spec is not None, run
        runs.unindex_live(tx, run, spec)  # stays active: PENDING's live indexes, then LEASED's
        token = index * TOKENS_PER_ENTRY + k
        runs.set_status(tx, run, RunStatus.LEASED)
        run.attempt += 1
        run.executor_id = cmd.executor_id
        run.lease_id = lease_id_for(token)
        run.fencing_token = token
        run.lease_expires_ms = now + spec.lease_ttl_ms
        run.started_ms = now
        runs.index_live(tx, run, spec)
        if history:
            begin_attempt(run, now)  # the attempt is the grant's step (``raftsched.cluster.node.explain``)
        tx.events.append(("leased", run))
        grants.append(Grant(run, spec))
    tx.tokens_used += len(grants)
    return Ok(grants)


# ------------------------------------------------------------ renewals, completions, expiries


def renew(tx: Tx, cmd: c.RenewLeases) -> Result:
    out: list[Renewal] = []
    details = dict(cmd.details) if cmd.details else None
    for lease_id, token in cmd.leases:
        run = _holder_check(tx, lease_id, token, cmd.executor_id)
        if isinstance(run, FailedPrecondition):
            out.append(Renewal(lease_id, False, 0, False, run.message))
            continue
        spec = tx.spec(run.job_id)
        assert spec is not None, run
        _set_deadline(tx, run, max(run.lease_expires_ms, tx.mem.now_ms + spec.lease_ttl_ms))
        if details is not None and details.get(lease_id):
            heartbeat(run, tx.mem.now_ms, details[lease_id])
        tx.events.append(("lease_renewed", run))  # the leader's own clock of renewals (raftsched.cluster.node.lease_watch)
        out.append(Renewal(lease_id, True, run.lease_expires_ms, run.cancel_requested, ""))
    return Ok(out)


def complete(tx: Tx, cmd: c.CompleteRun) -> Result:
    run = _holder_check(tx, cmd.lease_id, cmd.fencing_token, cmd.executor_id)
    if isinstance(run, FailedPrecondition):
        return run
    if tx.mem.cluster_format >= c.VERDICT_FORMAT:
        key = OutputKey(run.job_id, run.run_id, run.attempt, run.fencing_token)
        if not names_attempt(cmd.log_uri, key):
            return InvalidArgument(
                f"log_uri {cmd.log_uri[:300]!r} is not the output of attempt {run.attempt} of run {run.run_id}: "
                f"it must end in '/{key.relpath()}.log'"
            )
    now = tx.mem.now_ms
    run.result, run.log_uri = cmd.result, cmd.log_uri
    if cmd.succeeded and not run.cancel_requested:
        run.error = cmd.error  # empty, or why the output is missing (the run itself succeeded)
        end_attempt(run, now, AttemptOutcome.SUCCEEDED, cmd.error, cmd.log_uri)
        runs.finish(tx, run, RunStatus.SUCCEEDED)
    else:
        error = cmd.error or ("cancelled by request" if run.cancel_requested else "failed")
        outcome = AttemptOutcome.CANCELLED if run.cancel_requested else AttemptOutcome.FAILED
        end_attempt(run, now, outcome, error, cmd.log_uri)
        kind = "attempt_cancelled" if run.cancel_requested else "failed"
        runs.step(tx, run, kind, f"attempt {run.attempt} on executor {run.executor_id!r} ended: {error}")
        _attempt_failed(tx, run, error, cmd.draw, cmd.non_retryable, cmd.retry_after_ms)
    return Ok(run)


def expire(tx: Tx, cmd: c.ExpireLeases) -> Result:
    expired = 0
    now = tx.mem.now_ms
    for lease_id, token, draw in cmd.leases:
        run_id = tx.mem.leases.get(lease_id)
        if run_id is None:
            continue
        run = runs.indexed_run(tx, run_id)
        if run.fencing_token != token or run.lease_expires_ms >= now:
            continue  # renewed since the leader looked, or re-leased: not expired
        expired += 1
        tx.events.append(("lease_expired", run))  # for the metrics; WatchRuns does not show it
        error = f"lease expired: executor {run.executor_id!r} stopped renewing it"
        end_attempt(run, now, AttemptOutcome.LEASE_EXPIRED, error)
        runs.step(
            tx, run, "lease_expired",
            f"attempt {run.attempt}'s lease {lease_id} expired at {iso(run.lease_expires_ms)}: executor "
            f"{run.executor_id!r} stopped renewing it",
        )  # fmt: skip
        _attempt_failed(tx, run, error, draw)
    return Ok(expired)


def expire_pending(tx: Tx, cmd: c.ExpirePending) -> Result:
    """PENDING runs past their job's ``pending_ttl`` end EXPIRED (a run leased, cancelled or retried since the leader
    looked is left as it is)."""
    expired = 0
    now = tx.mem.now_ms
    for run_id in cmd.run_ids:
        deadline = tx.mem.pending_ttl.get(run_id)
        if deadline is None or deadline > now:
            continue
        run = tx.run(run_id)
        if run is None or run.status is not RunStatus.PENDING:
            continue
        expired += 1
        runs.finish(
            tx, run, RunStatus.EXPIRED,
            f"still PENDING at {iso(deadline)}, its job's pending_ttl after it became leasable at "
            f"{iso(run.not_before_ms)}: no executor leased it in time",
        )  # fmt: skip
    return Ok(expired)


def grace(tx: Tx, cmd: c.GraceLeases) -> Result:
    floor = tx.mem.now_ms + cmd.grace_ms
    extended = 0
    for run_id in list(tx.mem.leases.values()):
        run = runs.indexed_run(tx, run_id)
        if run.lease_expires_ms < floor:
            _set_deadline(tx, run, floor)
            extended += 1
    return Ok(extended)
