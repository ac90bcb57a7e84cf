"""A run's life in the state, as every handler changes it: made, indexed, finished; and the commands on one run.

Shared by the handlers (``jobs``, ``fire``, ``leases``): each change of a
run's status goes through here, so its counts, its rows in the store's
indexes (``JOB_RUNS``, ``ACTIVE``) and the in-memory live indexes
(``memory``: PENDING per queue and per (queue, type), live leases by
deadline) follow it, and its event is reported.

Handlers here: ``CancelRun``, and ``RetryRun`` (command format 3): a
DEAD_LETTER, FAILED or CANCELLED run becomes PENDING again, leasable at
once, with a fresh attempt budget: its attempts so far stay in its history
and its attempt numbers go on (attempt 4 follows attempt 3, so each
attempt's output stays its own), but ``max_attempts`` counts from here
(``Run.budget_base``). It leaves the retention indexes (no longer finished)
and its explanation records the manual retry and who asked. Anything else —
PENDING, LEASED, SUCCEEDED, SKIPPED, or a run of a deleted job — is
``FailedPrecondition`` naming the status.
"""

from __future__ import annotations

from typing import Any

from sortedcontainers import SortedList

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import (
    GRANT_ORDER_FORMAT,
    MAX_PRIORITY,
    NOTIFY_TYPE,
    RANKED_FORMAT,
    SCHEDULES_FORMAT,
    After,
    At,
    Job,
    JobInfo,
    JobSpec,
    JobStatus,
    Run,
    RunExtra,
    RunStatus,
    run_extra,
    run_id_for,
)
from raftsched.cluster.domain.results import FailedPrecondition, NotFound, Ok, ResourceExhausted, Result
from raftsched.cluster.domain.run_history import HISTORY_FORMAT, add_step, skipped_detail
from raftsched.cluster.domain.schedule.firing import Skip
from raftsched.cluster.fsm import due, job_info, keys, notify, retention
from raftsched.cluster.fsm.memory import drop
from raftsched.cluster.fsm.store import Table
from raftsched.cluster.fsm.tx import Tx

RETRYABLE = frozenset({RunStatus.DEAD_LETTER, RunStatus.FAILED, RunStatus.CANCELLED})
#: the schedules with one instant: a job of these has nothing left to fire once its run ended
_ONCE = (At, After)


# ------------------------------------------------------------ reading


def indexed_run(tx: Tx, run_id: str) -> Run:
    """A run an index names (it exists: the indexes follow the records)."""
    run = tx.run(run_id)
    if run is None:
        raise LookupError(f"run {run_id} is indexed but not stored")
    return run


def active_ids(tx: Tx, job_id: str) -> list[str]:
    """Ids of ``job_id``'s PENDING and LEASED runs, by instant (read whole: callers change them)."""
    out: list[str] = []
    after: tuple[int, str] | None = None
    while True:
        page = tx.job_keys(Table.ACTIVE, job_id, after, 1000)
        out.extend(run_id for _, run_id in page)
        if len(page) < 1000:
            return out
        after = page[-1]


def has_active(tx: Tx, job_id: str) -> bool:
    return bool(tx.job_keys(Table.ACTIVE, job_id, None, 1))


def pending_full(tx: Tx, max_pending: int) -> bool:
    return bool(max_pending) and tx.mem.run_counts[RunStatus.PENDING] >= max_pending


def pending_full_message(tx: Tx, max_pending: int) -> str:
    return (
        f"the cluster holds {tx.mem.run_counts[RunStatus.PENDING]} PENDING runs, its limit "
        f"[limits] max_pending_runs = {max_pending}: add executors or raise max_pending_runs"
    )


# ------------------------------------------------------------ statuses


def set_status(tx: Tx, run: Run, status: RunStatus) -> None:
    """Every change of a kept run's status goes through here (``run_counts`` follows it)."""
    counts = tx.mem.run_counts
    counts[run.status] -= 1
    counts[status] += 1
    run.status = status


def set_job_status(tx: Tx, job: Job, status: JobStatus) -> None:
    """Every change of a kept job's status goes through here (``job_counts`` follows it)."""
    counts = tx.mem.job_counts
    counts[job.status] -= 1
    counts[status] += 1
    job.status = status


def step(tx: Tx, run: Run, kind: str, detail: str | tuple[Any, ...], node_id: str = "") -> None:
    """Record a step of the run's explanation (from the cluster's command format 3 on: ``run_history``)."""
    if tx.mem.cluster_format >= HISTORY_FORMAT:
        add_step(run, tx.mem.now_ms, kind, detail, node_id)


# ------------------------------------------------------------ made, activated, finished


def new_run(
    tx: Tx,
    job: Job,
    run_id: str,
    scheduled_ms: int,
    manual: bool = False,
    not_before_ms: int = 0,
    queue: str = "",
    extra: tuple[tuple[str, Any], ...] = (),
) -> Run:
    """A PENDING run of ``job`` for ``scheduled_ms``, under a fresh id, leasable from ``not_before_ms`` (0: from
    its instant), on ``queue`` (its job's unless given), with ``extra`` (``Run.extra``, sorted)."""
    run = Run(run_id, job.job_id, queue or job.spec.queue, scheduled_ms, tx.mem.now_ms, manual=manual)
    if not_before_ms:
        run.not_before_ms = not_before_ms
    if extra:
        run.extra = extra
    tx.add_new_run(run)
    fmt = tx.mem.cluster_format
    if fmt >= RANKED_FORMAT:
        spec = shaping_spec(tx, run, job.spec)
        priority = spec.priority if spec is not None else 0
        if priority or fmt >= GRANT_ORDER_FORMAT:
            tx.place(run_id, ranked_key(run, priority))
    tx.mem.run_counts[RunStatus.PENDING] += 1
    key = keys.job_run_key(run.job_id, scheduled_ms, run_id)  # the same key in both tables: a job's runs by instant
    tx.put(Table.JOB_RUNS, key, b"")
    tx.put(Table.ACTIVE, key, b"")
    index_live(tx, run, job.spec)
    tx.events.append(("fired", run))
    return run


def ranked_key(run: Run, priority: int) -> bytes:
    """Where a new run of a job with a priority (command format 6), or any new run (format 7), is kept: by its
    priority (highest first), then by when it becomes leasable, as grants take runs (``leases``), so that fires,
    grants, completions and retention write records side by side, not each on the page of its job's other runs
    in ``RUNS`` (a run's id begins with its job's). Before format 7 runs of priority 0 stay under their ids."""
    return keys.ranked_key(MAX_PRIORITY - priority, run.not_before_ms, run.run_id)


def activate(tx: Tx, run: Run) -> None:
    """The run becomes PENDING or LEASED: into the active runs, and the live indexes of its status."""
    tx.put(Table.ACTIVE, keys.job_run_key(run.job_id, run.scheduled_ms, run.run_id), b"")
    index_live(tx, run)


def deactivate(tx: Tx, run: Run, job_spec: JobSpec | None = None) -> None:
    """The run stops being PENDING or LEASED (call before its status changes; ``job_spec``: its job's spec, when the
    caller holds it)."""
    tx.delete(Table.ACTIVE, keys.job_run_key(run.job_id, run.scheduled_ms, run.run_id))
    unindex_live(tx, run, job_spec)


def finish(tx: Tx, run: Run, status: RunStatus, error: str = "") -> None:
    """An active run ends in ``status``: out of the active runs, into retention."""
    spec = tx.spec(run.job_id)
    deactivate(tx, run, spec)
    set_status(tx, run, status)
    now = tx.mem.now_ms
    run.finished_ms = now
    if error:
        run.error = error
    if tx.mem.cluster_format >= HISTORY_FORMAT and status is not RunStatus.SUCCEEDED:  # a success: its attempt says it
        add_step(run, now, status.value.lower(), error or f"the run ended {status.value}")
    tx.events.append(("finished", run))
    retention.retain(tx, run, spec)
    if spec is not None and spec.notify and tx.mem.cluster_format >= SCHEDULES_FORMAT:
        failures_before = job_info.read(tx, run.job_id).consecutive_failures
        notify.transition(tx, run, spec, status.value, failures_before)
    info = job_info.ran(tx, run)
    if spec is None:
        return
    if info is not None and 0 < spec.pause_after_failures <= info.consecutive_failures:
        _pause_after_failures(tx, run, info)
    if type(spec.schedule) in _ONCE and not spec.extra_crons:
        tx.spec_spent(run.job_id)  # a one-off whose run ended: nothing reads its spec soon (unless a user acts)


def _pause_after_failures(tx: Tx, run: Run, info: JobInfo) -> None:
    """The job's ``pause_after_failures``-th failure in a row: it pauses itself, with a note saying why."""
    job = tx.job(run.job_id)
    if job is None or job.status is not JobStatus.ACTIVE:
        return
    due.unindex_due(tx, job)
    set_job_status(tx, job, JobStatus.PAUSED)
    job.updated_ms = tx.mem.now_ms
    note = (
        f"paused itself after {info.consecutive_failures} failed runs in a row (pause_after_failures); the last, "
        f"{run.run_id}, ended {run.status.value}"
    )
    job_info.write(tx, job.job_id, info._replace(pause_note=note, paused_until_ms=0), job)
    step(tx, run, "job_paused", note)


def request_cancel(tx: Tx, run: Run, why: str) -> None:
    """A LEASED run is asked to stop: its executor learns it at its next renewal."""
    run.cancel_requested = True
    step(tx, run, "cancel_requested", f"{why}: executor {run.executor_id!r} is told at its next lease renewal")
    tx.events.append(("cancel_requested", run))


def record_skip(tx: Tx, job: Job, skip: Skip) -> None:
    """A SKIPPED run standing for the instants ``skip`` covers (none if its id is taken)."""
    run_id = run_id_for(job.job_id, skip.instant_ms)
    if tx.run(run_id) is not None:
        return
    now = tx.mem.now_ms
    run = Run(run_id, job.job_id, job.spec.queue, skip.instant_ms, now, RunStatus.SKIPPED)
    run.error = skip.reason
    run.skipped_count = skip.count
    run.skipped_until_ms = skip.last_ms
    run.finished_ms = now
    step(tx, run, "skipped", skipped_detail(job.spec, skip))
    tx.add_run(run)
    tx.mem.run_counts[RunStatus.SKIPPED] += 1
    tx.put(Table.JOB_RUNS, keys.job_run_key(run.job_id, run.scheduled_ms, run.run_id), b"")
    tx.events.append(("skipped", run))
    retention.retain(tx, run, job.spec)
    job_info.skipped(tx, job.job_id, skip.count)
    if job.spec.notify and tx.mem.cluster_format >= SCHEDULES_FORMAT:
        notify.transition(tx, run, job.spec, "SKIPPED", 0)


# ------------------------------------------------------------ live indexes (in memory)


def index_live(tx: Tx, run: Run, job_spec: JobSpec | None = None) -> None:
    """The in-memory indexes of an active run's status (``job_spec``: its job's spec, when the caller holds it:
    not looked up again)."""
    if run.status is RunStatus.PENDING:
        index_pending(tx, run, job_spec)
    elif run.status is RunStatus.LEASED:
        mem = tx.mem
        mem.leases[run.lease_id] = run.run_id
        mem.lease_deadlines.add((run.lease_expires_ms, run.lease_id))
        spec = shaping_spec(tx, run, job_spec)
        if spec is not None and spec.concurrency_key:
            key = spec.concurrency_key
            mem.conc_leased[key] = mem.conc_leased.get(key, 0) + 1
            mem.lease_conc[run.lease_id] = key


def unindex_live(tx: Tx, run: Run, job_spec: JobSpec | None = None) -> None:
    if run.status is RunStatus.PENDING:
        unindex_pending(tx, run, job_spec)
    elif run.status is RunStatus.LEASED:
        release(tx, run)


def release(tx: Tx, run: Run) -> None:
    """Forget the run's lease (the run record keeps its id and token for history)."""
    mem = tx.mem
    mem.leases.pop(run.lease_id, None)
    drop(mem.lease_deadlines, (run.lease_expires_ms, run.lease_id))
    if mem.lease_conc:
        key = mem.lease_conc.pop(run.lease_id, None)
        if key is not None:
            left = mem.conc_leased[key] - 1
            if left:
                mem.conc_leased[key] = left
            else:
                del mem.conc_leased[key]


def _run_type(tx: Tx, run: Run, spec: JobSpec | None) -> str:
    """The type a run executes as: its own (a notification's), else its job's (current) type."""
    if run.extra:
        own = run_extra(run, RunExtra.TYPE)
        if own:
            return str(own)
    return spec.type if spec is not None else ""


def index_pending(tx: Tx, run: Run, job_spec: JobSpec | None = None) -> None:
    key = (run.not_before_ms, run.run_id)
    mem = tx.mem
    if job_spec is None:
        job_spec = tx.spec(run.job_id)
    spec = shaping_spec(tx, run, job_spec)
    if spec is not None and spec.concurrency_key:
        mem.keyed_pending[run.run_id] = (spec.concurrency_key, spec.concurrency_limit)
    if spec is not None and spec.priority:
        _index_prio(tx, run, spec, key)
        return
    if spec is not None and spec.pending_ttl_ms:
        _index_ttl(tx, run, spec)
    run_type = _run_type(tx, run, job_spec)
    typed_key = (run.queue, run_type)
    typed = mem.pending_by_type.get(typed_key)
    if typed is None:  # the first of its queue and type: a list in both maps (``memory.queue_keys``)
        typed = mem.pending_by_type[typed_key] = SortedList()
        types = mem.queue_types.get(run.queue)
        if types is None:
            types = mem.queue_types[run.queue] = {}
        types[run_type] = typed
    typed.add(key)


def shaping_spec(tx: Tx, run: Run, job_spec: JobSpec | None = None) -> JobSpec | None:
    """The spec whose priority, concurrency key and pending_ttl apply to ``run``: its job's (``job_spec``, if the
    caller holds it), but for a notification (a run of the job's, delivered on its own terms: none of them
    apply)."""
    if run.extra and run_extra(run, RunExtra.TYPE) == NOTIFY_TYPE:
        return None
    return job_spec if job_spec is not None else tx.spec(run.job_id)


def _index_ttl(tx: Tx, run: Run, spec: JobSpec) -> None:
    deadline = run.not_before_ms + spec.pending_ttl_ms
    tx.mem.pending_ttl[run.run_id] = deadline
    tx.mem.pending_deadlines.add((deadline, run.run_id))


def _index_prio(tx: Tx, run: Run, spec: JobSpec, key: tuple[int, str]) -> None:
    """A PENDING run of a job with a priority: into the indexes of its priority."""
    mem, p = tx.mem, spec.priority
    mem.run_prio[run.run_id] = p
    at = (run.queue, p)
    found = mem.prio_pending.get(at)
    if found is None:  # (a ``setdefault`` would build a SortedList on every call)
        found = mem.prio_pending[at] = SortedList()
    found.add(key)
    typed_at = (run.queue, _run_type(tx, run, spec), p)
    typed = mem.prio_by_type.get(typed_at)
    if typed is None:
        typed = mem.prio_by_type[typed_at] = SortedList()
    typed.add(key)
    if spec.pending_ttl_ms:
        _index_ttl(tx, run, spec)


def _unindex_prio(tx: Tx, run: Run, p: int, key: tuple[int, str], job_spec: JobSpec | None) -> None:
    mem = tx.mem
    at = (run.queue, p)
    found = mem.prio_pending.get(at)
    if found is not None:
        drop(found, key)
        if not found:
            del mem.prio_pending[at]
    typed_at = (run.queue, _run_type(tx, run, job_spec), p)
    typed = mem.prio_by_type.get(typed_at)
    if typed is not None:
        drop(typed, key)
        if not typed:
            del mem.prio_by_type[typed_at]


def unindex_pending(tx: Tx, run: Run, job_spec: JobSpec | None = None) -> None:
    """Undo ``index_pending`` (call it while the run's job still has the type it was indexed under; ``job_spec``:
    the job's spec, when the caller holds it)."""
    key = (run.not_before_ms, run.run_id)
    mem = tx.mem
    if job_spec is None:
        job_spec = tx.spec(run.job_id)
    if mem.pending_ttl:
        deadline = mem.pending_ttl.pop(run.run_id, None)
        if deadline is not None:
            drop(mem.pending_deadlines, (deadline, run.run_id))
    if mem.keyed_pending:
        mem.keyed_pending.pop(run.run_id, None)
    if mem.run_prio:
        p = mem.run_prio.pop(run.run_id, 0)
        if p:
            _unindex_prio(tx, run, p, key, job_spec)
            return
    run_type = _run_type(tx, run, job_spec)
    typed_key = (run.queue, run_type)
    typed = mem.pending_by_type.get(typed_key)
    if typed is not None:
        drop(typed, key)
        if not typed:
            del mem.pending_by_type[typed_key]
            types = mem.queue_types[run.queue]
            del types[run_type]
            if not types:
                del mem.queue_types[run.queue]


# ------------------------------------------------------------ handlers


def cancel_run(tx: Tx, cmd: c.CancelRun) -> Result:
    run = tx.run(cmd.run_id)
    if run is None:
        return NotFound(f"run {cmd.run_id} not found")
    if run.status is RunStatus.PENDING:
        finish(tx, run, RunStatus.CANCELLED, "cancelled by request")
        return Ok(run)
    if run.status is RunStatus.LEASED:
        if not run.cancel_requested:
            request_cancel(tx, run, "CancelRun")
        return Ok(run)
    return FailedPrecondition(f"run {run.run_id} is already {run.status.value}; only PENDING or LEASED runs can be cancelled")


def retry_run(tx: Tx, cmd: c.RetryRun) -> Result:
    run = tx.run(cmd.run_id)
    if run is None:
        return NotFound(f"run {cmd.run_id} not found")
    if run.status not in RETRYABLE:
        return FailedPrecondition(
            f"run {run.run_id} is {run.status.value}; only DEAD_LETTER, FAILED or CANCELLED runs can be retried"
        )
    job = tx.job(run.job_id)
    if job is None or job.status is JobStatus.DELETED:
        return FailedPrecondition(f"run {run.run_id}'s job {run.job_id} is deleted; its runs cannot be retried")
    pending = tx.mem.run_counts[RunStatus.PENDING]
    if cmd.max_pending and pending >= cmd.max_pending:
        return ResourceExhausted(
            f"the cluster holds {pending} PENDING runs, its limit [limits] max_pending_runs = {cmd.max_pending}: "
            "add executors or raise max_pending_runs, then retry"
        )
    was = run.status
    retention.unretain(tx, run)
    set_status(tx, run, RunStatus.PENDING)
    run.finished_ms = 0
    run.cancel_requested = False
    run.lease_expires_ms = 0
    run.not_before_ms = max(tx.mem.now_ms, run.scheduled_ms)  # fired early (look-ahead): never before its instant
    run.error = ""
    run.budget_base = run.attempt
    activate(tx, run)
    who = f" by {cmd.requested_by!r}" if cmd.requested_by else ""
    step(
        tx, run, "manual_retry",
        f"RetryRun{who} (entry {tx.index}): {was.value} -> PENDING with a fresh budget of "
        f"{job.spec.retry.max_attempts} attempts (the next is attempt {run.attempt + 1})",
    )  # fmt: skip
    tx.events.append(("retry_scheduled", run))
    return Ok(run)
