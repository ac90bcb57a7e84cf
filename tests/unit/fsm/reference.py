"""A second state hash, computed by the reference: every row the machine derives, rebuilt here from the records.

``state_hash`` compares two machines' stores byte for byte, so a write that
every replica misses alike (an index row, a count, the small state) passes
it. This rebuilds, with this file's own keys and values and none of
``raftsched.cluster.fsm``'s code, every table that follows from the records
(the jobs and runs as stored) and from what the model itself applied (its
jobs, idempotency keys, answered requests, the last entry, the greatest
``now``, the cluster's format); ``stored_hash`` reads the same tables from a
store. The two agree exactly when the machine wrote every row it owed.
"""

from __future__ import annotations

import hashlib
import marshal
import struct
from typing import Any, Iterable

from raftsched.cluster.domain.model import Job, JobStatus, Run, RunStatus
from raftsched.cluster.fsm.store import Table, TableStore

_BIAS = 1 << 63
_ACTIVE = (RunStatus.PENDING, RunStatus.LEASED)
_FAILURES = (RunStatus.FAILED, RunStatus.DEAD_LETTER)
#: the tables rebuilt here, in the order they are hashed
TABLES = (
    Table.META, Table.JOBS, Table.IDEMPOTENCY, Table.JOB_RUNS, Table.ACTIVE, Table.DUE, Table.EXPIRY, Table.PURGE,
    Table.FINISHED, Table.REQUESTS, Table.REQUEST_EXPIRY, Table.FAILED_RUNS, Table.FAILED,
)  # fmt: skip
#: the record tables are hashed by their keys only (their values are the records the rows are rebuilt from)
KEYS_ONLY = (Table.JOBS,)


def _plain(value: Any) -> bytes:
    return marshal.dumps(value, 2)


def _ms(ms: int) -> bytes:
    return struct.pack(">Q", ms + _BIAS)


def _job_row(run: Run) -> bytes:
    return run.job_id.encode() + b"\x00" + _ms(run.scheduled_ms) + run.run_id.encode()


def expected_tables(
    jobs: dict[str, Job],
    runs: dict[str, Run],
    *,
    created: Iterable[str],
    applied: int,
    now_ms: int,
    cluster_format: int,
    idempotency: dict[str, tuple[str, str]],
    requests: dict[str, tuple[str, str, str, str, int]],
) -> dict[str, dict[bytes, bytes]]:
    """What every table in ``TABLES`` must hold, from the records and from what the model applied."""
    out: dict[str, dict[bytes, bytes]] = {name: {} for name in TABLES}
    if applied:
        run_counts = tuple(sum(r.status is s for r in runs.values()) for s in RunStatus)
        job_counts = tuple(sum(j.status is s for j in jobs.values()) for s in JobStatus)
        out[Table.META] = {
            b"layout": _plain(1),
            b"applied": _plain(applied),
            b"now": _plain(now_ms),
            b"counts": _plain((run_counts, job_counts)),
            b"membership": _plain(([], ([], None, [], cluster_format, []))),
        }
    out[Table.JOBS] = {job_id.encode(): b"" for job_id in created}
    for key, (job_id, fingerprint) in idempotency.items():
        out[Table.IDEMPOTENCY][key.encode()] = _plain((key, job_id, fingerprint))
    for job in jobs.values():
        if job.status is JobStatus.ACTIVE and job.next_fire_ms is not None:
            out[Table.DUE][_ms(job.next_fire_ms) + job.job_id.encode()] = b""
        if job.status is JobStatus.DELETED:
            out[Table.PURGE][_ms(job.updated_ms + job.spec.history_ttl_ms) + job.job_id.encode()] = b""
    finished: dict[str, int] = {}
    failed: dict[str, int] = {}
    for run in runs.values():
        out[Table.JOB_RUNS][_job_row(run)] = b""
        if run.status in _ACTIVE:
            out[Table.ACTIVE][_job_row(run)] = b""
            continue
        job = jobs.get(run.job_id)
        ttl = job.spec.history_ttl_ms if job is not None else 0
        out[Table.EXPIRY][_ms(run.finished_ms + ttl) + run.run_id.encode()] = b""
        finished[run.job_id] = finished.get(run.job_id, 0) + 1
        if run.status in _FAILURES and run.steps_raw and job is not None:
            out[Table.FAILED_RUNS][_job_row(run)] = b""
            failed[run.job_id] = failed.get(run.job_id, 0) + 1
    out[Table.FINISHED] = {job_id.encode(): _plain(n) for job_id, n in finished.items()}
    out[Table.FAILED] = {job_id.encode(): _plain(n) for job_id, n in failed.items()}
    for request_id, row in requests.items():
        out[Table.REQUESTS][request_id.encode()] = _plain(row)
        out[Table.REQUEST_EXPIRY][_ms(row[4]) + request_id.encode()] = b""
    return out


def reference_hash(tables: dict[str, dict[bytes, bytes]]) -> str:
    h = hashlib.sha256()
    for name in TABLES:
        h.update(name.encode() + b"\x00")
        for key in sorted(tables[name]):
            value = b"" if name in KEYS_ONLY else tables[name][key]
            h.update(struct.pack(">I", len(key)) + key + struct.pack(">I", len(value)) + value)
    return h.hexdigest()


def stored_tables(store: TableStore) -> dict[str, dict[bytes, bytes]]:
    """The tables in ``TABLES`` as ``store`` holds them."""
    out: dict[str, dict[bytes, bytes]] = {}
    for name in TABLES:
        rows: dict[bytes, bytes] = {}
        start = b""
        while True:
            page = store.scan(name, start, None, 500)
            rows.update(page)
            if len(page) < 500:
                break
            start = page[-1][0] + b"\x00"
        out[name] = rows
    return out


def stored_hash(store: TableStore) -> str:
    return reference_hash(stored_tables(store))


def differences(expected: dict[str, dict[bytes, bytes]], stored: dict[str, dict[bytes, bytes]]) -> list[str]:
    """The rows that differ, table by table (what an assertion shows)."""
    out = []
    for name in TABLES:
        want, have = expected[name], stored[name]
        for key in sorted(set(want) | set(have)):
            if key not in have:
                out.append(f"{name}: missing {key!r}")
            elif key not in want:
                out.append(f"{name}: unexpected {key!r}")
            elif name not in KEYS_ONLY and want[key] != have[key]:
                out.append(f"{name}: {key!r} is {have[key]!r}, not {want[key]!r}")
    return out
