"""Lease rules of the job state machine: grant, renew, complete, expire, grace.

Modelled on etcd's lessor, with absolute deadlines instead of its TTLs:

* A grant is a committed command; the fencing token of the k-th lease granted
  by the entry at Raft index i is ``i * TOKENS_PER_ENTRY + k`` (k counts over
  every command of a group-committed entry): it grows with every grant in the
  cluster, so a run re-leased after expiry always carries a larger token than
  any earlier lease of it.
* ``lease_expires_ms`` is absolute and replicated. Only the leader watches the
  deadlines (``expired_leases`` reads an index ordered by deadline) and it
  *proposes* their expiry; nothing expires locally.
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
  deterministic); after ``max_attempts`` the run is DEAD_LETTER.
"""

from __future__ import annotations

from dataclasses import dataclass
from heapq import merge
from itertools import islice

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import AttemptOutcome, JobSpec, JobStatus, RetryPolicy, Run, RunStatus
from raftsched.cluster.domain.output import OutputKey
from raftsched.cluster.domain.results import FailedPrecondition, Ok, Result
from raftsched.cluster.domain.run_history import HISTORY_FORMAT, begin_attempt, end_attempt
from raftsched.cluster.domain.state_base import StateBase
from raftsched.cluster.domain.words import iso, span

TOKENS_PER_ENTRY = 1000
MAX_RUNS_PER_GRANT = TOKENS_PER_ENTRY - 1


@dataclass(frozen=True, slots=True)
class Grant:
    run: Run
    spec: JobSpec


@dataclass(frozen=True, slots=True)
class Renewal:
    lease_id: str
    ok: bool
    expires_ms: int
    cancel_requested: bool
    error: str


def backoff_ms(retry: RetryPolicy, attempt: int, draw: float) -> int:
    """The wait before attempt ``attempt + 1``; ``draw`` in [0, 1) spreads it by +-jitter."""
    base = min(float(retry.max_backoff_ms), retry.initial_backoff_ms * retry.multiplier ** max(0, attempt - 1))
    spread = 1.0 + retry.jitter * (2.0 * min(max(draw, 0.0), 1.0) - 1.0)
    return max(0, int(base * spread))


def lease_id_for(token: int) -> str:
    return f"L{token}"


def token_of(lease_id: str) -> int:
    """The fencing token a lease id was made from (``lease_id_for``)."""
    return int(lease_id[1:])


class LeaseRules(StateBase):
    """Mixed into ``JobStateMachine``: the lease commands and queries."""

    # ------------------------------------------------------------ helpers

    def _indexed_run(self, run_id: str) -> Run:
        """A run an index names (it exists: the indexes follow the records)."""
        run = self.uow.run(run_id)
        if run is None:
            raise LookupError(f"run {run_id} is indexed but not stored")
        return run

    def _lease_check(self, lease_id: str, token: int) -> Run | FailedPrecondition:
        run_id = self.leases.get(lease_id)
        run = None if run_id is None else self.uow.run(run_id)
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

    def _holder_check(self, lease_id: str, token: int, executor_id: str | None) -> Run | FailedPrecondition:
        """``_lease_check``, and only the lease's holder may renew or complete it (the one place this is
        decided; ``executor_id`` None — completions in log entries from before they named their
        executor — skips it, so those entries replay as they applied)."""
        run = self._lease_check(lease_id, token)
        if isinstance(run, FailedPrecondition) or executor_id is None or executor_id == run.executor_id:
            return run
        caller = repr(executor_id) if executor_id else "'' (the request names no executor_id)"
        return FailedPrecondition(
            f"lease {lease_id} is held by executor {run.executor_id!r}, not {caller}: "
            "only the executor that holds a lease may renew or complete it"
        )

    def _set_deadline(self, run: Run, expires_ms: int) -> None:
        self.lease_deadlines.discard((run.lease_expires_ms, run.lease_id))
        run.lease_expires_ms = expires_ms
        self.lease_deadlines.add((expires_ms, run.lease_id))

    def _release(self, run: Run) -> None:
        """Forget the run's lease (the run record keeps its id and token for history)."""
        self.leases.pop(run.lease_id, None)
        self.lease_deadlines.discard((run.lease_expires_ms, run.lease_id))

    def _attempt_failed(self, run: Run, error: str, draw: float) -> None:
        """After a failed or expired attempt: CANCELLED if asked, retry after backoff, or DEAD_LETTER."""
        self._release(run)
        run.error = error
        if run.cancel_requested:
            self._finish(run, RunStatus.CANCELLED, error or "cancelled by request")
            return
        job = self.uow.job(run.job_id)
        retry = job.spec.retry if job is not None else RetryPolicy(max_attempts=1)
        used = run.attempt - run.budget_base  # a manual retry (RetryRun) starts a fresh budget
        if used >= retry.max_attempts or job is None or job.status is JobStatus.DELETED:
            self._finish(run, RunStatus.DEAD_LETTER, f"attempt {used} of {retry.max_attempts} failed: {error}")
            return
        self._unindex_live(run)  # stays active: only its live indexes change, to PENDING's
        self._set_status(run, RunStatus.PENDING)
        wait = backoff_ms(retry, used, draw)
        run.not_before_ms = self.now_ms + wait
        run.lease_expires_ms = 0
        self._index_live(run)
        self._step(
            run, "retry_scheduled",
            f"attempt {used + 1} of {retry.max_attempts} after a backoff of {span(wait)} (not before {iso(run.not_before_ms)})",
        )  # fmt: skip
        self.events.append(("retry_scheduled", run))

    # ------------------------------------------------------------ commands

    def _any_type_candidates(self, cmd: c.AcquireLeases) -> list[tuple[int, str]]:
        """Leasable keys of ``cmd.queues`` whatever their type (the selection of every entry from before
        types existed: kept exactly, so that replaying those entries gives the same state)."""
        candidates: list[tuple[int, str]] = []
        for queue in dict.fromkeys(cmd.queues):
            pending = self.pending.get(queue)
            if not pending:
                continue
            for key in pending.irange(maximum=(self.now_ms + 1, ""), inclusive=(True, False)):
                candidates.append(key)
                if len(candidates) >= cmd.max_runs * len(cmd.queues):
                    break
        candidates.sort()
        return candidates

    def _typed_candidates(self, cmd: c.AcquireLeases, budget: int) -> list[tuple[int, str]]:
        """The ``budget`` oldest leasable keys of ``cmd.queues`` whose job's type is one of ``cmd.types``:
        a lazy merge of the (queue, type) indexes — never a scan of other types' runs (read whole before
        any grant changes the indexes)."""
        heads = []
        for queue in dict.fromkeys(cmd.queues):
            for job_type in dict.fromkeys(cmd.types):
                pending = self.pending_by_type.get((queue, job_type))
                if pending:
                    heads.append(pending.irange(maximum=(self.now_ms + 1, ""), inclusive=(True, False)))
        return list(islice(merge(*heads), budget))

    @c.handles(c.AcquireLeases)
    def _acquire(self, cmd: c.AcquireLeases, index: int) -> Result:
        now = self.now_ms
        if self._token_entry != index:
            self._token_entry, self._tokens_used = index, 0
        # the proposer keeps a batch's grants within one entry's tokens; this only guards the range
        budget = max(0, min(cmd.max_runs, MAX_RUNS_PER_GRANT - self._tokens_used))
        candidates = self._typed_candidates(cmd, budget) if cmd.types else self._any_type_candidates(cmd)
        grants: list[Grant] = []
        for k, (_, run_id) in enumerate(candidates[:budget], start=self._tokens_used + 1):
            run = self._indexed_run(run_id)
            spec = self.uow.spec(run.job_id)
            assert spec is not None, run
            self._unindex_live(run)  # stays active: PENDING's live indexes, then LEASED's
            token = index * TOKENS_PER_ENTRY + k
            self._set_status(run, RunStatus.LEASED)
            run.attempt += 1
            run.executor_id = cmd.executor_id
            run.lease_id = lease_id_for(token)
            run.fencing_token = token
            run.lease_expires_ms = now + spec.lease_ttl_ms
            run.started_ms = now
            self._index_live(run)
            if self.cluster_format >= HISTORY_FORMAT:
                begin_attempt(run, now)  # the attempt is the grant's step (``raftsched.cluster.node.explain``)
            self.events.append(("leased", run))
            grants.append(Grant(run, spec))
        self._tokens_used += len(grants)
        return Ok(grants)

    @c.handles(c.RenewLeases)
    def _renew(self, cmd: c.RenewLeases, index: int) -> Result:
        out: list[Renewal] = []
        for lease_id, token in cmd.leases:
            run = self._holder_check(lease_id, token, cmd.executor_id)
            if isinstance(run, FailedPrecondition):
                out.append(Renewal(lease_id, False, 0, False, run.message))
                continue
            spec = self.uow.spec(run.job_id)
            assert spec is not None, run
            ttl = spec.lease_ttl_ms
            self._set_deadline(run, max(run.lease_expires_ms, self.now_ms + ttl))
            self.events.append(("lease_renewed", run))  # the leader's own clock of renewals (raftsched.cluster.node.lease_watch)
            out.append(Renewal(lease_id, True, run.lease_expires_ms, run.cancel_requested, ""))
        return Ok(out)

    @c.handles(c.CompleteRun)
    def _complete(self, cmd: c.CompleteRun, index: int) -> Result:
        run = self._holder_check(cmd.lease_id, cmd.fencing_token, cmd.executor_id)
        if isinstance(run, FailedPrecondition):
            return run
        run.result, run.log_uri = cmd.result, cmd.log_uri
        if cmd.succeeded and not run.cancel_requested:
            run.error = cmd.error  # empty, or why the output is missing (the run itself succeeded)
            end_attempt(run, self.now_ms, AttemptOutcome.SUCCEEDED, cmd.error, cmd.log_uri)
            self._finish(run, RunStatus.SUCCEEDED)
        else:
            error = cmd.error or ("cancelled by request" if run.cancel_requested else "failed")
            outcome = AttemptOutcome.CANCELLED if run.cancel_requested else AttemptOutcome.FAILED
            end_attempt(run, self.now_ms, outcome, error, cmd.log_uri)
            kind = "attempt_cancelled" if run.cancel_requested else "failed"
            self._step(run, kind, f"attempt {run.attempt} on executor {run.executor_id!r} ended: {error}")
            self._attempt_failed(run, error, cmd.draw)
        return Ok(run)

    @c.handles(c.ExpireLeases)
    def _expire(self, cmd: c.ExpireLeases, index: int) -> Result:
        expired = 0
        for lease_id, token, draw in cmd.leases:
            run_id = self.leases.get(lease_id)
            if run_id is None:
                continue
            run = self._indexed_run(run_id)
            if run.fencing_token != token or run.lease_expires_ms >= self.now_ms:
                continue  # renewed since the leader looked, or re-leased: not expired
            expired += 1
            self.events.append(("lease_expired", run))  # for the metrics; WatchRuns does not show it
            error = f"lease expired: executor {run.executor_id!r} stopped renewing it"
            end_attempt(run, self.now_ms, AttemptOutcome.LEASE_EXPIRED, error)
            self._step(
                run, "lease_expired",
                f"attempt {run.attempt}'s lease {lease_id} expired at {iso(run.lease_expires_ms)}: executor "
                f"{run.executor_id!r} stopped renewing it",
            )  # fmt: skip
            self._attempt_failed(run, error, draw)
        return Ok(expired)

    @c.handles(c.GraceLeases)
    def _grace(self, cmd: c.GraceLeases, index: int) -> Result:
        floor = self.now_ms + cmd.grace_ms
        extended = 0
        for run_id in list(self.leases.values()):
            run = self._indexed_run(run_id)
            if run.lease_expires_ms < floor:
                self._set_deadline(run, floor)
                extended += 1
        return Ok(extended)

    # ------------------------------------------------------------ queries

    def expired_leases(self, now_ms: int, limit: int) -> list[tuple[str, int]]:
        """(lease_id, fencing token) of live leases whose deadline is before ``now_ms``: the token is the one
        in the lease's id (``lease_id_for``), so nothing but the in-memory index is read."""
        out: list[tuple[str, int]] = []
        for _, lease_id in self.lease_deadlines.irange(maximum=(now_ms, ""), inclusive=(True, False)):
            out.append((lease_id, token_of(lease_id)))
            if len(out) >= limit:
                break
        return out

    def lease_output(self, lease_id: str, token: int) -> OutputKey | None:
        """Where the output of the attempt that holds ``lease_id`` belongs (None when no live lease has that id and
        token)."""
        run_id = self.leases.get(lease_id)
        if run_id is None:
            return None
        run = self._indexed_run(run_id)
        if run.fencing_token != token:
            return None
        return OutputKey(run.job_id, run.run_id, run.attempt, run.fencing_token)

    def lease_ttls(self, lease_ids: list[str]) -> dict[str, int]:
        """The TTL (ms) of each live lease among ``lease_ids``, from its job's spec (leases no longer live are left
        out)."""
        out: dict[str, int] = {}
        for lease_id in lease_ids:
            run_id = self.leases.get(lease_id)
            if run_id is None:
                continue
            spec = self.uow.spec(self._indexed_run(run_id).job_id)
            if spec is not None:
                out[lease_id] = spec.lease_ttl_ms
        return out

    def next_lease_deadline(self) -> int | None:
        return self.lease_deadlines[0][0] if self.lease_deadlines else None

    def next_leasable_ms(self, queues: list[str], types: tuple[str, ...] | list[str] = ()) -> int | None:
        """The earliest instant a PENDING run of these queues (and of these job types; empty: any) may be
        leased, or None if there is none."""
        if types:
            typed = self.pending_by_type
            heads = [typed[(q, t)][0][0] for q in queues for t in types if typed.get((q, t))]
        else:
            heads = [self.pending[q][0][0] for q in queues if self.pending.get(q)]
        return min(heads) if heads else None
