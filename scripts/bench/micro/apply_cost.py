#!/usr/bin/env python
"""What applying a fire, a grant and a completion costs one replica, without Raft, gRPC or other processes.

    python scripts/bench/micro/apply_cost.py [--jobs 5000] [--store memory|lmdb|both] [--format 1|2|3] [--gc node|default]
    python scripts/bench/micro/apply_cost.py --floor [--jobs 100000]
    python scripts/bench/micro/apply_cost.py --shape steady [--jobs 2000] [--cycles 10] [--store ...] [--format 7]
    python scripts/bench/micro/apply_cost.py --shape steady --floor [--format 7]

Creates ``--jobs`` one-off jobs all due at one instant in a ``JobStateMachine``,
fires them in ``Fire`` commands of 256 (as the leader batches them), leases
them 500 at a time, then completes them, 100 ``CompleteRun`` commands to an
entry (as group commit packs them under load); each entry is applied and
committed as the Raft adapter does, and the events every entry reports are
taken as the node's event hub takes them. Prints microseconds per run for
firing, granting and completing, best of three, on the machine's in-memory
store and on an LMDB environment in a temp dir. The burst and e2e figures of
``scripts/bench.py`` are mostly this, paid on every replica. ``--jobs
100000`` is the size of the benchmark's burst (the caches that apply keeps
between commands matter at that size).

``--format``: the command format the machine uses (``SetClusterFormat`` first,
as the leader proposes it once every member runs a version that knows it):
3 records each run's history, as a cluster of today's nodes does;
1, the default, is what a version without ``SetClusterFormat`` runs.

``--gc``: the garbage collector's thresholds while applying: ``node`` (the
default) as a node sets them (``raftsched.cluster.app.node_main.GC_THRESHOLDS``, full
collections of a large heap rare), ``default`` as Python starts (at 100,000 jobs
that adds a third or more to each phase).

``--floor``: only the store work each phase does in LMDB, from a bare loop
with nothing of the state machine in it, one commit per entry of the same
sizes. A fire: its job read, decoded, encoded and written back, its due row
deleted, the run (encoded before the clock starts) and its two index rows
written. A grant: the run encoded and written (apply keeps it: no read). A
completion: the run encoded and written, its active row deleted, its expiry
row written, the job's finished count read and written, its failed count
read. Apply can cost no less than this plus the domain logic; a lower
bound, as the runs carry no history. Beside it, the index work the version
that kept the state in memory did in dicts, sets and sorted lists instead
(a grant there changed the run in place).

``--floor`` with ``--shape steady`` is recorded rather than written out: a
steady round runs on LMDB with every call apply makes into its store
recorded (each read, write, delete, scan and commit, with its very keys and
values), then the same calls are made again, in order, from a bare loop on a
fresh environment, one write transaction per entry as the store batches
them. Prints the microseconds per run of each phase's calls, and the calls
per run: what apply would cost if everything it does around the store cost
nothing.

``--shape steady``: the load of ``scripts/bench.py``'s ``steady`` scenario
instead of a burst: ``--jobs`` every-1s jobs (default 2,000: 2,000 runs a
second), each second fired in ``Fire`` commands of 50 items (the leader
gathers what comes due over 20 ms), leased 20 at a time (what an executor's
poll takes at that rate) and completed 20 ``CompleteRun`` commands to an
entry, for ``--cycles`` seconds after two seconds of warm-up. Prints
microseconds per run for each phase, and the process's user and system CPU
per run over the three (system: the store's writes and commits), best of
three. Most of a node's CPU per run in ``steady`` is this, on every replica.
``replay_cost.py`` replays the very entries a cluster committed under that
load, on this version and later ones; this synthetic shape also runs on the
versions before (the one that kept its state in memory among them).

To compare with another version, run this file with that version's checkout
and its interpreter (``PYTHONPATH=<checkout> <checkout>/.venv/bin/python
scripts/bench/micro/apply_cost.py``): it uses only the commands' constructors,
``JobStateMachine.apply`` and ``due_jobs``; it finds them under the versions'
import root (``raftsched.``, or none in versions before it), and versions
before the state lived in LMDB have only the in-memory store (``--store
memory``; their newest command format is 2).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import gc
import importlib
import inspect
import os
import resource
import shutil
import tempfile
import time
from types import ModuleType
from typing import Any, Callable, Iterator

from store_calls import StoreOp, bare_env, record_calls, replay


def _module(*names: str) -> ModuleType:
    """The first of ``names`` found under ``raftsched.`` (this version's import root), else the first found as it is
    (a version from before the one import root, run with its checkout on ``PYTHONPATH``)."""
    for root in ("raftsched.", ""):
        for name in names:
            try:
                return importlib.import_module(root + name)
            except ModuleNotFoundError as exc:
                if exc.name is None or not (root + name + ".").startswith(exc.name + "."):
                    raise  # the module is there: something it imports is not
    raise ModuleNotFoundError(f"none of {', '.join(names)} found, under raftsched. or as they are")


c: Any = _module("cluster.domain.commands")
_model: Any = _module("cluster.domain.model")
At, Every, JobSpec = _model.At, _model.Every, _model.JobSpec
JobStateMachine: Any = _module("cluster.fsm.machine", "cluster.domain.state").JobStateMachine

FIRE_BATCH = 256
LEASE_BATCH = 500
COMPLETE_BATCH = 100
T0 = 1_800_000_000_000
ROUNDS = 3
#: the steady shape (``--shape steady``): items per Fire, runs per grant, completions per entry, seconds of warm-up
STEADY_FIRE_BATCH = 50
STEADY_LEASE_BATCH = 20
STEADY_COMPLETE_BATCH = 20
STEADY_WARMUP = 2


def _machine(store: str, folder: str, ops: list[StoreOp] | None = None) -> tuple[Any, Callable[[], None]]:
    """A machine on ``store`` in ``folder`` and what closes it; with ``ops``, its LMDB store records every call
    apply makes into it (``--floor`` of the steady shape)."""
    if store == "memory":
        return JobStateMachine(), lambda: None
    from raftsched.storage.lmdb_state import LmdbTableStore

    lmdb_store = LmdbTableStore(os.path.join(folder, "state.mdb"), 8 << 30)
    if ops is not None:
        record_calls(lmdb_store, ops)
    return JobStateMachine(lmdb_store), lmdb_store.close


def entry_applier(machine: Any) -> Callable[[list[Any]], list[Any]]:
    """A function applying its commands to ``machine`` as the next Raft entry, as the Raft adapter does (each
    command at its position, then the entry's commit and the drain of its events), and returning their results."""
    index = 0
    commit = getattr(machine, "commit", None)  # the LMDB-era machine commits once per entry
    drain = getattr(machine, "drain_events", None)  # the event hub takes them after every entry

    def apply_entry(cmds: list[Any]) -> list[Any]:
        nonlocal index
        index += 1
        results = [machine.apply(c.encode(cmd), index, pos) for pos, cmd in enumerate(cmds)]
        if commit is not None:
            commit()
        if drain is not None:
            drain()
        return results

    return apply_entry


@contextlib.contextmanager
def _fresh_machine(
    store: str, command_format: int, ops: list[StoreOp] | None = None
) -> Iterator[tuple[Any, Callable[[list[Any]], list[Any]], Callable[[Any], Any]]]:
    """A fresh machine on ``store`` at ``command_format``: it, its entry applier (``entry_applier``) and a function
    applying one command as an entry; its files are removed afterwards (``ops``: as ``_machine``)."""
    folder = tempfile.mkdtemp(prefix="raftsched-apply-")
    machine, close = _machine(store, folder, ops)
    apply_entry = entry_applier(machine)

    def apply(cmd: Any) -> Any:
        return apply_entry([cmd])[0]

    try:
        _use_format(machine, apply, command_format)
        yield machine, apply_entry, apply
    finally:
        close()
        shutil.rmtree(folder, ignore_errors=True)


def _use_format(machine: Any, apply: Callable[[Any], Any], command_format: int) -> None:
    """Switch ``machine`` to ``command_format`` (``SetClusterFormat``, as the leader proposes it), if above 1."""
    if command_format <= 1:
        return
    set_format: Any = getattr(c, "SetClusterFormat", None)
    if set_format is None or getattr(machine, "cluster_format", 1) != 1:
        raise SystemExit(f"this version cannot switch to command format {command_format}")
    apply(set_format(T0 - 60_000, command_format))
    if machine.cluster_format != command_format:
        raise SystemExit(f"the machine stayed at command format {machine.cluster_format}, not {command_format}")


def _one_round(store: str, jobs: int, command_format: int = 1) -> tuple[float, float, float]:
    """Microseconds per run to fire, to grant and to complete, in one fresh machine."""
    with _fresh_machine(store, command_format) as (machine, apply_entry, apply):
        for i in range(jobs):
            apply(c.CreateJob(T0 - 60_000, f"j-{i:07d}", JobSpec(name=f"n{i}", schedule=At(T0), type="noop")))
        items = [(f"j-{i:07d}", T0) for i in range(jobs)]
        fire: Any = c.Fire  # its fields differ between versions: the look-ahead came later
        extra = {"lookahead_ms": 100} if "lookahead_ms" in inspect.signature(fire).parameters else {}
        began = time.perf_counter()
        for k in range(0, jobs, FIRE_BATCH):
            apply(fire(T0, tuple(items[k : k + FIRE_BATCH]), **extra))
        fire_us = (time.perf_counter() - began) / jobs * 1e6
        grants: list[Any] = []
        began = time.perf_counter()
        while len(grants) < jobs:
            answer = apply(c.AcquireLeases(T0, "bench", ("default",), LEASE_BATCH))
            granted = getattr(answer, "value", answer)
            if not granted:
                break
            grants.extend(granted)
        grant_us = (time.perf_counter() - began) / max(1, len(grants)) * 1e6
        if len(grants) != jobs:
            raise SystemExit(f"only {len(grants)} of {jobs} runs were granted: the benchmark no longer fits this version")
        completions = [
            c.CompleteRun(T0 + 5, g.run.lease_id, g.run.fencing_token, True, executor_id="bench") for g in grants
        ]  # built before the clock starts: a node decodes them, it does not build them
        began = time.perf_counter()
        for k in range(0, jobs, COMPLETE_BATCH):
            apply_entry(completions[k : k + COMPLETE_BATCH])
        complete_us = (time.perf_counter() - began) / jobs * 1e6
        return fire_us, grant_us, complete_us


def _cpu() -> tuple[float, float]:
    """The process's user and system CPU seconds so far (every thread's; microsecond resolution, unlike ``os.times``)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def _steady_round(store: str, jobs: int, command_format: int, cycles: int, ops: list[StoreOp] | None = None) -> tuple[float, ...]:
    """Microseconds per run to fire, to grant and to complete, then the process's user and system CPU per run over
    the three, for ``cycles`` seconds of ``jobs`` every-1s jobs (``--shape steady``), in one fresh machine. With
    ``ops`` (LMDB only), every store call is recorded there, each measured phase between marks (``store_calls.replay``)."""

    def mark(phase: str) -> None:
        if ops is not None:
            ops.append(("mark", "", b"", phase, 0))

    with _fresh_machine(store, command_format, ops) as (machine, apply_entry, apply):
        for i in range(jobs):  # their instants: T0 and every second after it
            apply(c.CreateJob(T0 - 1_000, f"j-{i:07d}", JobSpec(name=f"n{i}", schedule=Every(1_000), type="noop")))
        extra = {"lookahead_ms": 100} if "lookahead_ms" in inspect.signature(c.Fire).parameters else {}
        wall = [0.0, 0.0, 0.0]
        user = system = 0.0
        runs = 0
        for cycle in range(STEADY_WARMUP + cycles):
            now = T0 + cycle * 1_000 + 50
            items = machine.due_jobs(now + 100, jobs + 1)
            measured = cycle >= STEADY_WARMUP
            mark("fire" if measured else "")
            cpu, began = _cpu(), time.perf_counter()
            for k in range(0, len(items), STEADY_FIRE_BATCH):
                apply(c.Fire(now, tuple(items[k : k + STEADY_FIRE_BATCH]), **extra))
            fired = time.perf_counter()
            mark("grant" if measured else "")
            grants: list[Any] = []
            while True:
                answer = apply(c.AcquireLeases(now + 10, "bench", ("default",), STEADY_LEASE_BATCH))
                granted = getattr(answer, "value", answer)
                if not granted:
                    break
                grants.extend(granted)
            granted_at, cpu_granted = time.perf_counter(), _cpu()
            mark("")
            completions = [
                c.CompleteRun(now + 20, g.run.lease_id, g.run.fencing_token, True, executor_id="bench") for g in grants
            ]  # built off the clocks: a node decodes them, it does not build them
            mark("complete" if measured else "")
            cpu_built, built = _cpu(), time.perf_counter()
            for k in range(0, len(completions), STEADY_COMPLETE_BATCH):
                apply_entry(completions[k : k + STEADY_COMPLETE_BATCH])
            done, cpu_done = time.perf_counter(), _cpu()
            mark("")
            if len(items) != jobs or len(grants) != jobs:
                raise SystemExit(
                    f"second {cycle}: {len(items)} of {jobs} jobs due, {len(grants)} runs granted: the benchmark no longer "
                    "fits this version"
                )
            if cycle < STEADY_WARMUP:
                continue
            wall[0] += fired - began
            wall[1] += granted_at - fired
            wall[2] += done - built
            user += (cpu_granted[0] - cpu[0]) + (cpu_done[0] - cpu_built[0])
            system += (cpu_granted[1] - cpu[1]) + (cpu_done[1] - cpu_built[1])
            runs += len(grants)
        return tuple(x / runs * 1e6 for x in (*wall, user, system))


def _steady_floor_round(jobs: int, command_format: int, cycles: int) -> tuple[float, float, float, float]:
    """``--floor`` of the steady shape: a steady round on LMDB with every store call recorded, then the same calls
    replayed from a bare loop on a fresh environment (``store_calls.replay``): microseconds per run of each phase's store work
    alone, and the store calls per run."""
    ops: list[StoreOp] = []
    _steady_round("lmdb", jobs, command_format, cycles, ops)
    fire, grant, complete, calls = replay(ops)
    runs = jobs * cycles
    return fire / runs * 1e6, grant / runs * 1e6, complete / runs * 1e6, calls / runs


def _floor_round(jobs: int, before_close: Callable[[Any], None] = lambda env: None) -> tuple[float, float, float]:
    """Microseconds per run of the LMDB work a fire, a grant and a completion do, and nothing else (``--floor``);
    ``before_close`` is handed the environment once all three are done (the tests read what they left)."""
    import marshal

    from raftsched.cluster.domain.leases import lease_id_for
    from raftsched.cluster.domain.model import Job, JobStatus, Run, RunStatus, run_id_for
    from raftsched.cluster.fsm import keys, layout
    from raftsched.cluster.fsm.store import Table

    v = layout.MARSHAL_VERSION
    folder = tempfile.mkdtemp(prefix="raftsched-floor-")
    env = bare_env(folder)
    try:
        names = (Table.META, Table.JOBS, Table.RUNS, Table.JOB_RUNS, Table.ACTIVE, Table.DUE, Table.EXPIRY, Table.FINISHED,
                 Table.FAILED)  # fmt: skip
        meta, jobs_db, runs, job_runs, active, due, expiry, finished, failed = (env.open_db(t.encode()) for t in names)
        made = T0 - 60_000
        ids = [f"j-{i:07d}" for i in range(jobs)]
        with env.begin(write=True) as txn:
            for i, job_id in enumerate(ids):
                spec = JobSpec(name=f"n{i}", schedule=At(T0), type="noop")
                job = Job(job_id, spec, JobStatus.ACTIVE, made, made, T0, made, made)
                txn.put(job_id.encode(), marshal.dumps(layout.job_to_tuple(job), v), db=jobs_db)
                txn.put(keys.timed_key(T0, job_id), b"", db=due)
        # what is written that does not depend on what is read, and each run's records (no history: a lower
        # bound), made before the clock starts
        rows = []
        ttl = JobSpec(name="n", schedule=At(T0), type="noop").history_ttl_ms
        for token, job_id in enumerate(ids, 1):
            run_id = run_id_for(job_id, T0)
            run = Run(run_id, job_id, "default", T0, T0)
            fired = marshal.dumps(layout.run_to_tuple(run), v)
            run.status, run.attempt, run.executor_id, run.fencing_token = RunStatus.LEASED, 1, "bench", token
            run.lease_id, run.lease_expires_ms, run.started_ms = lease_id_for(token), T0 + 30_000, T0
            leased = layout.run_to_tuple(run)
            run.status, run.finished_ms = RunStatus.SUCCEEDED, T0 + 5
            key = keys.job_run_key(job_id, T0, run_id)
            rows.append((job_id.encode(), keys.timed_key(T0, job_id), run_id.encode(), fired, key, leased, layout.run_to_tuple(run),
                         keys.timed_key(T0 + 5 + ttl, run_id)))  # fmt: skip
        done = JobStatus.COMPLETED.value
        took: list[float] = []
        index = 0

        def entries(batch: int) -> Iterator[tuple[Any, list[tuple[Any, ...]]]]:
            """A write transaction and its rows per entry of ``batch`` runs, the applied index written in each."""
            nonlocal index
            began = time.perf_counter()
            for k in range(0, jobs, batch):
                with env.begin(write=True) as txn:
                    yield txn, rows[k : k + batch]
                    index += 1
                    txn.put(b"applied", marshal.dumps(index), db=meta)
            took.append((time.perf_counter() - began) / jobs * 1e6)

        for txn, batch in entries(FIRE_BATCH):
            for job_key, due_key, run_key, run_raw, job_run_key, _, _, _ in batch:
                t = marshal.loads(txn.get(job_key, db=jobs_db))
                txn.put(job_key, marshal.dumps((t[0], done, t[2], T0, None, t[5], T0, t[7], t[8] + 1) + t[9:], v), db=jobs_db)
                txn.delete(due_key, db=due)
                txn.put(run_key, run_raw, db=runs)
                txn.put(job_run_key, b"", db=job_runs)
                txn.put(job_run_key, b"", db=active)
        for txn, batch in entries(LEASE_BATCH):
            for _, _, run_key, _, _, leased, _, _ in batch:
                txn.put(run_key, marshal.dumps(leased, v), db=runs)  # apply keeps the run: no read
        for txn, batch in entries(COMPLETE_BATCH):
            for job_key, _, run_key, _, job_run_key, _, ended, expiry_key in batch:
                txn.put(run_key, marshal.dumps(ended, v), db=runs)
                txn.delete(job_run_key, db=active)
                txn.put(expiry_key, b"", db=expiry)
                txn.put(job_key, layout.encode_int(layout.decode_int(txn.get(job_key, db=finished)) + 1), db=finished)
                layout.decode_int(txn.get(job_key, db=failed))
        before_close(env)
        return took[0], took[1], took[2]
    finally:
        env.close()
        shutil.rmtree(folder, ignore_errors=True)


class _Keys:
    """A job's runs by instant as the in-memory version kept them (its ``KeyList``: a sorted list, appended to)."""

    __slots__ = ("keys",)

    def __init__(self) -> None:
        self.keys: list[tuple[int, str]] = []

    def add(self, key: tuple[int, str]) -> None:
        keys = self.keys
        if not keys or key > keys[-1]:
            keys.append(key)
        else:
            bisect.insort(keys, key)


def _containers_round(jobs: int) -> tuple[float, float]:
    """Microseconds per run of the index work the in-memory version (``f91d6df``) did in Python containers where
    this one writes LMDB (``--floor``): a fire took its job out of the sorted due index and put its run into the
    runs, the job's runs and the job's active runs; a completion took the run out of the active runs and put it
    into the sorted expiry index and the job's finished count. A grant changed the run in place: nothing."""
    from sortedcontainers import SortedList

    ids = [f"j-{i:07d}" for i in range(jobs)]
    run_ids = [f"{job_id}@{T0}" for job_id in ids]
    due = SortedList((T0, job_id) for job_id in ids)
    jobs_by_id: dict[str, object] = {job_id: object() for job_id in ids}
    runs: dict[str, object] = {}
    runs_by_job: dict[str, _Keys] = {}
    active_by_job: dict[str, set[str]] = {}
    expiry: Any = SortedList()
    finished: dict[str, int] = {}
    began = time.perf_counter()
    for job_id, run_id in zip(ids, run_ids):
        job = jobs_by_id[job_id]
        due.discard((T0, job_id))
        runs[run_id] = job
        keys = runs_by_job.get(job_id)
        if keys is None:
            keys = runs_by_job[job_id] = _Keys()
        keys.add((T0, run_id))
        active = active_by_job.get(job_id)
        if active is None:
            active = active_by_job[job_id] = set()
        active.add(run_id)
    fire = (time.perf_counter() - began) / jobs * 1e6
    began = time.perf_counter()
    for job_id, run_id in zip(ids, run_ids):
        active = active_by_job.get(job_id)
        if active is not None:
            active.discard(run_id)
            if not active:
                del active_by_job[job_id]
        expiry.add((T0 + 5, run_id))
        finished[job_id] = finished.get(job_id, 0) + 1
    return fire, (time.perf_counter() - began) / jobs * 1e6


def _node_gc_thresholds() -> tuple[int, ...]:
    try:
        from raftsched.cluster.app.node_main import GC_THRESHOLDS
    except ImportError:  # versions before the constant set the same thresholds in run_node
        return (50_000, 20, 100)
    return tuple(GC_THRESHOLDS)


@contextlib.contextmanager
def _collector(mode: str) -> Iterator[None]:
    """The collector's thresholds for ``mode`` while measuring; the process's own again afterwards."""
    before = gc.get_threshold()
    if mode == "node":
        gc.set_threshold(*_node_gc_thresholds())
    try:
        yield
    finally:
        gc.set_threshold(*before)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=None, help="jobs (default 5,000; 2,000 with --shape steady)")
    p.add_argument("--shape", choices=("burst", "steady"), default="burst", help="one burst of one-off jobs (default), or "
                   "every-1s jobs, second after second (the bench's steady scenario)")  # fmt: skip
    p.add_argument("--cycles", type=int, default=10, help="--shape steady: seconds measured, after two of warm-up")
    p.add_argument("--store", choices=("memory", "lmdb", "both"), default="both")
    p.add_argument("--format", type=int, default=1, help="the command format the machine uses (default 1)")
    p.add_argument("--gc", choices=("node", "default"), default="node", help="the collector's thresholds (default: a node's)")
    p.add_argument("--floor", action="store_true", help="only the LMDB work of each phase, from a bare loop (a lower bound)")
    a = p.parse_args(argv)
    if a.jobs is None:
        a.jobs = 2000 if a.shape == "steady" else 5000
    if a.jobs < 1 or a.cycles < 1:
        p.error("--jobs and --cycles must be at least 1")
    if a.shape == "steady":
        if a.floor:
            return _steady_floor(a.jobs, a.format, a.cycles, a.gc)
        return _steady(a.store, a.jobs, a.format, a.cycles, a.gc)
    if a.floor:
        with _collector(a.gc):
            floors = [_floor_round(a.jobs) for _ in range(ROUNDS)]
        fire, grant, complete = (min(r[k] for r in floors) for k in range(3))
        print(
            f"floor   {a.jobs} runs, the LMDB work alone: fire {fire:.1f} us/run, grant {grant:.1f} us/run, "
            f"complete {complete:.1f} us/run (best of {ROUNDS}, {a.gc} gc)"
        )
        with _collector(a.gc):
            in_dicts = [_containers_round(a.jobs) for _ in range(ROUNDS)]
        fire, complete = (min(r[k] for r in in_dicts) for k in range(2))
        print(
            f"in dicts {a.jobs} runs, the same indexes in Python containers: fire {fire:.1f} us/run, grant 0 us/run, "
            f"complete {complete:.1f} us/run (best of {ROUNDS}, {a.gc} gc)"
        )
        return 0
    for store in ("memory", "lmdb") if a.store == "both" else (a.store,):
        with _collector(a.gc):
            rounds = [_one_round(store, a.jobs, a.format) for _ in range(ROUNDS)]
        fire, grant, complete = (min(r[k] for r in rounds) for k in range(3))
        print(
            f"{store:7} {a.jobs} runs, format {a.format}: fire {fire:.1f} us/run, grant {grant:.1f} us/run, "
            f"complete {complete:.1f} us/run (best of {ROUNDS}, {a.gc} gc)"
        )
    return 0


def _steady(stores: str, jobs: int, command_format: int, cycles: int, gc_mode: str) -> int:
    for store in ("memory", "lmdb") if stores == "both" else (stores,):
        with _collector(gc_mode):
            rounds = [_steady_round(store, jobs, command_format, cycles) for _ in range(ROUNDS)]
        fire, grant, complete, user, system = (min(r[k] for r in rounds) for k in range(5))
        print(
            f"steady {store:7} {jobs} every-1s jobs x {cycles} s, format {command_format}: fire {fire:.1f} us/run, "
            f"grant {grant:.1f} us/run, complete {complete:.1f} us/run; CPU user {user:.1f} + system {system:.1f} "
            f"us/run (best of {ROUNDS}, {gc_mode} gc)"
        )
    return 0


def _steady_floor(jobs: int, command_format: int, cycles: int, gc_mode: str) -> int:
    with _collector(gc_mode):
        rounds = [_steady_floor_round(jobs, command_format, cycles) for _ in range(ROUNDS)]
    fire, grant, complete, calls = (min(r[k] for r in rounds) for k in range(4))
    print(
        f"steady floor {jobs} every-1s jobs x {cycles} s, format {command_format}, the LMDB work alone: fire {fire:.1f} "
        f"us/run, grant {grant:.1f} us/run, complete {complete:.1f} us/run; {calls:.1f} store calls a run (best of "
        f"{ROUNDS}, {gc_mode} gc)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
