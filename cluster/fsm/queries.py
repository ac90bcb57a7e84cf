"""What the node's loops and services ask the state between entries (under the node's lock, on any thread).

The leader loop reads what is due (``due_page``), which leases are past
their deadline (``expired_leases``) and when to look again; the lease
service when a run may next be leased. Each answer comes from an index —
the stored due and retention indexes, the in-memory live indexes — never
from a scan of every record. ``JobStateMachine`` offers each as a method.
"""

from __future__ import annotations

from raftsched.cluster.domain.leases import token_of
from raftsched.cluster.domain.model import Run
from raftsched.cluster.domain.output import OutputKey
from raftsched.cluster.fsm import keys, retention, runs
from raftsched.cluster.fsm.reader import RecordReader
from raftsched.cluster.fsm.store import Table
from raftsched.cluster.fsm.tx import Tx

# ------------------------------------------------------------ firing


def due_page(tx: Tx, until_ms: int, limit: int) -> list[bytes]:
    """The due index's keys of ACTIVE jobs due at or before ``until_ms``, earliest first (``due_item`` reads one)."""
    return [key for key, _ in tx.scan(Table.DUE, b"", keys.ms_bytes(until_ms + 1), limit)]


def due_item(key: bytes) -> tuple[str, int]:
    """(job_id, next_fire_ms) of a key of ``due_page``."""
    ms, job_id = keys.timed_from(key)
    return job_id, ms


def next_due_ms(tx: Tx) -> int | None:
    rows = tx.scan(Table.DUE, limit=1)
    return keys.ms_from(rows[0][0]) if rows else None


def due_keys(tx: Tx) -> list[tuple[int, str]]:
    """The whole due index, (next_fire_ms, job_id) in order (tests and tools)."""
    return [keys.timed_from(key) for key, _ in tx.rows(Table.DUE)]


# ------------------------------------------------------------ leases


def expired_leases(tx: Tx, now_ms: int, limit: int) -> list[tuple[str, int]]:
    """(lease_id, fencing token) of live leases whose deadline is before ``now_ms``: the token is the one in the
    lease's id, so nothing but the in-memory index is read."""
    out: list[tuple[str, int]] = []
    for _, lease_id in tx.mem.lease_deadlines.irange(maximum=(now_ms, ""), inclusive=(True, False)):
        out.append((lease_id, token_of(lease_id)))
        if len(out) >= limit:
            break
    return out


def lease_output(tx: Tx, lease_id: str, token: int) -> OutputKey | None:
    """Where the output of the attempt that holds ``lease_id`` belongs (None when no live lease has that id and
    token)."""
    run_id = tx.mem.leases.get(lease_id)
    if run_id is None:
        return None
    run = runs.indexed_run(tx, run_id)
    if run.fencing_token != token:
        return None
    return OutputKey(run.job_id, run.run_id, run.attempt, run.fencing_token)


def lease_ttls(tx: Tx, lease_ids: list[str]) -> dict[str, int]:
    """The TTL (ms) of each live lease among ``lease_ids``, from its job's spec (leases no longer live are left
    out)."""
    out: dict[str, int] = {}
    for lease_id in lease_ids:
        run_id = tx.mem.leases.get(lease_id)
        if run_id is None:
            continue
        spec = tx.spec(runs.indexed_run(tx, run_id).job_id)
        if spec is not None:
            out[lease_id] = spec.lease_ttl_ms
    return out


def next_lease_deadline(tx: Tx) -> int | None:
    deadlines = tx.mem.lease_deadlines
    return deadlines[0][0] if deadlines else None


def next_leasable_ms(tx: Tx, queues: list[str], types: tuple[str, ...] | list[str] = ()) -> int | None:
    """The earliest instant a PENDING run of these queues (and of these job types; empty: any) may be leased, or
    None if there is none."""
    mem = tx.mem
    if types:
        typed = mem.pending_by_type
        heads = [typed[(q, t)][0][0] for q in queues for t in types if typed.get((q, t))]
        if mem.prio_by_type:
            wanted = {(q, t) for q in queues for t in types}
            heads += [keys[0][0] for (q, t, _), keys in mem.prio_by_type.items() if keys and (q, t) in wanted]
    else:
        found = [mem.queue_keys(q) for q in queues]
        heads = [keys[0][0] for keys in found if keys]
        if mem.prio_pending:
            heads += [keys[0][0] for (q, _), keys in mem.prio_pending.items() if keys and q in queues]
    return min(heads) if heads else None


# ------------------------------------------------------------ retention


def next_prune_ms(tx: Tx) -> int | None:
    heads = (retention.head(tx, Table.EXPIRY), retention.head(tx, Table.PURGE), retention.head(tx, Table.REQUEST_EXPIRY))
    known = [head[1] for head in heads if head is not None]
    return min(known) if known else None


# ------------------------------------------------------------ runs


def active_runs(tx: Tx, view: RecordReader, job_id: str = "") -> list[Run]:
    """PENDING and LEASED runs (of ``job_id``, or of every job), by scheduled time: from the index of active
    runs, never a scan of every run kept."""
    if job_id:
        ids = runs.active_ids(tx, job_id)
    else:
        ids = [keys.run_id_of(key) for key, _ in tx.rows(Table.ACTIVE)]
    found = [r for r in (view.run(run_id) for run_id in ids) if r is not None]
    return sorted(found, key=lambda r: (r.scheduled_ms, r.run_id))
