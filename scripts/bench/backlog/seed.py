"""The backlog, built without the API: each node's state environment written directly, with a snapshot of it.

Creating millions of jobs through the API would take longer than the
measurement (the create rate is measured by ``scripts/bench.py``), so the
jobs are written straight into one state environment — the records and keys
of the domain's encoding (``raftsched.cluster.fsm.keys`` and ``layout``), byte for byte
what the state machine writes for a ``CreateJob``, appended in key order —
and every node's data dir gets a copy of it, a snapshot file of it at Raft
index 2 (pysyncobj's two no-op entries) and its ``NODE`` file, as if the
cluster had created the jobs and taken a snapshot.

Kinds of backlog:

* ``mix``: a third each ``every 1 h``, a Berlin cron at 03:00, ``at`` in 30 days;
* ``at``: one-off ``at`` jobs spread evenly over the next 30 days (the reminders case).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from typing import Any, Iterator

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.cluster.domain.model import At, Cron, Every, Job, JobSpec, JobStatus, Schedule
from raftsched.cluster.domain.schedule import first_fire
from raftsched.cluster.domain.schedule.legacy import under_rules
from raftsched.cluster.fsm import keys, layout
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.store import Table
from raftsched.cluster.node.config import load_config
from raftsched.raft.snapshot_file import write_snapshot_file
from raftsched.storage.lmdb_state import LmdbTableStore

NO_OP = b"\x01"  # pysyncobj's _COMMAND_TYPE.NO_OP entry
SEEDED_INDEX = 2
DAY_MS = 86_400_000
PAYLOAD = json.dumps({"command": "echo report"}).encode()
KINDS = ("mix", "at")


class Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, what: str, total: int, enabled: bool = True) -> None:
        self.what, self.total, self.enabled = what, max(1, total), enabled
        self.started = time.monotonic()
        self._shown = -1

    def update(self, done: int) -> None:
        percent = done * 100 // self.total
        if not self.enabled or percent == self._shown:
            return
        self._shown = percent
        bar = "#" * (percent // 4)
        rate = done / max(1e-6, time.monotonic() - self.started)
        sys.stderr.write(f"\r{self.what}: [{bar:<25}] {percent:3d}% {done:,}/{self.total:,} ({rate:,.0f}/s)")
        if done >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _schedule(kind: str, i: int, n: int, now_ms: int) -> Schedule:
    if kind == "at":
        return At(now_ms + 3_600_000 + i * (30 * DAY_MS) // n)
    return (Every(3_600_000), Cron("0 3 * * *", "Europe/Berlin"), At(now_ms + 30 * DAY_MS))[i % 3]


def _jobs(kind: str, n: int, now_ms: int, progress: Progress) -> Iterator[Job]:
    """``n`` ACTIVE jobs, created at ``now_ms``, in id order (what ``CreateJob`` makes of each)."""
    firsts: dict[Schedule, int | None] = {}
    specs: dict[Schedule, JobSpec] = {}
    for i in range(n):
        schedule = _schedule(kind, i, n, now_ms)
        if kind == "at":  # every instant its own: nothing to share
            nxt: int | None = first_fire(schedule, now_ms)
            spec = JobSpec(name="backlog", schedule=schedule, payload=PAYLOAD)
        else:
            if schedule not in firsts:
                firsts[schedule] = first_fire(under_rules(schedule, 1), now_ms)
                specs[schedule] = JobSpec(name="backlog", schedule=schedule, payload=PAYLOAD)
            nxt, spec = firsts[schedule], specs[schedule]
        assert nxt is not None
        if i % 10_000 == 0:
            progress.update(i)
        yield Job(f"j-backlog-{i:09d}", spec, JobStatus.ACTIVE, now_ms, min(now_ms, nxt - 1), nxt, now_ms, now_ms)
    progress.update(n)


def build_state(path: str, n: int, now_ms: int, kind: str = "mix", show: bool = True) -> dict[str, Any]:
    """The state environment at ``path`` with ``n`` jobs, at Raft index ``SEEDED_INDEX``; sizes and seconds."""
    started = time.monotonic()
    store = LmdbTableStore(path, map_size=max(1 << 30, n * 2048))
    due: list[bytes] = []
    in_order = True

    def rows() -> Iterator[tuple[bytes, bytes]]:
        nonlocal in_order
        for job in _jobs(kind, n, now_ms, Progress(f"seeding {n:,} {kind} jobs", n, show)):
            assert job.next_fire_ms is not None
            key = keys.timed_key(job.next_fire_ms, job.job_id)
            in_order = in_order and (not due or key > due[-1])
            due.append(key)
            yield keys.id_key(job.job_id), layout.encode_job(job)

    store.load_sorted(Table.JOBS, rows())
    if not in_order:
        due.sort()
    store.load_sorted(Table.DUE, ((key, b"") for key in due))
    due.clear()
    machine = JobStateMachine(store)
    machine.now_ms, machine.applied_index = now_ms, SEEDED_INDEX
    machine.job_counts[JobStatus.ACTIVE] = n
    machine.commit()
    store.close()
    return {"seconds": round(time.monotonic() - started, 1), "state_bytes": os.path.getsize(path)}


def seed(cluster: LocalCluster, n: int, kind: str = "mix", now_ms: int | None = None, show: bool = True) -> dict[str, Any]:
    """Every node's data dir: its NODE file, the state environment with ``n`` jobs and a snapshot of it.
    Sizes (bytes) and seconds."""
    cfg = load_config(cluster.config_path)
    work = os.path.join(cluster.root, "seed")
    os.makedirs(work, exist_ok=True)
    master = os.path.join(work, "state.mdb")
    out = build_state(master, n, now_ms or int(time.time() * 1000), kind, show)
    started = time.monotonic()
    raft_data = ((NO_OP, SEEDED_INDEX, 0), (NO_OP, SEEDED_INDEX - 1, 0), [x.raft for x in cfg.nodes])
    snapshot = os.path.join(work, "raft.snapshot")
    store = LmdbTableStore(master, map_size=max(1 << 30, n * 2048))
    copy = store.open_copy()
    try:
        write_snapshot_file(snapshot, raft_data, copy.write_to)
    finally:
        copy.close()
        store.close()
    for node in cfg.nodes:
        node_dir = cfg.node_dir(node.id)
        os.makedirs(node_dir, mode=0o700, exist_ok=True)
        with open(os.path.join(node_dir, "NODE"), "w", encoding="utf-8") as f:
            json.dump({"node_id": node.id, "members": sorted(x.raft for x in cfg.nodes)}, f)
        shutil.copyfile(master, os.path.join(node_dir, "state.mdb"))
        shutil.copyfile(snapshot, os.path.join(node_dir, "raft.snapshot"))
        for name in ("NODE", "state.mdb", "raft.snapshot"):
            os.chmod(os.path.join(node_dir, name), 0o600)
    out["snapshot_bytes"] = os.path.getsize(snapshot)
    out["copy_seconds"] = round(time.monotonic() - started, 1)
    shutil.rmtree(work)
    return out
