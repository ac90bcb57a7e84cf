#!/usr/bin/env python
"""What priorities and concurrency keys cost a grant: the same backlog granted plain and shaped, one replica.

    python scripts/bench/micro/grant_cost.py [--jobs 100000] [--store memory|lmdb] [--rounds 3]

Builds two machines on command format 5 with ``--jobs`` one-off jobs all
due at one instant, fires them (``Fire`` commands of 256), then grants every
run 500 at a time (``AcquireLeases``, as an executor asking in batches), each
entry applied and committed as the Raft adapter does. ``plain``: every job
of priority 0 without a key. ``shaped``: priorities spread over 0-9 and
concurrency keys over 1,000 (``k0`` .. ``k999``), each with a limit no grant
reaches, so every run is granted and every grant pays the checks. Prints
microseconds per granted run for each, best of ``--rounds``, and the ratio
shaped/plain (the target: at most 1.15). Both backlogs get random-looking ids, so the
two are as scattered over the store's keys: this measures the priority and key checks alone.

    python scripts/bench/micro/grant_cost.py --windows [--jobs 100000] [--store memory|lmdb]

What the cluster's ``grant_shapes`` scenario does, on one replica: both backlogs
in one machine, the jobs of each kind alike (one name, as the scenario creates
them), with ids a node makes (``j-<ms><random>``: in creation order, so a plain
backlog is granted in storage order and a shaped one, by priority, is not), then
eight windows of grants in the scenario's order (``WINDOW_ORDER``), each window's
leases completed after it. Prints each kind's CPU microseconds per grant (the
mean of its windows) and plain/shaped: the scenario's ratio, without gRPC or Raft.

    python scripts/bench/micro/grant_cost.py --windows --ordered [--jobs 100000] [--store memory|lmdb]
    python scripts/bench/micro/grant_cost.py --windows --rounds 5 [--ordered] [--jobs 100000] [--store memory|lmdb]

The same, with each shaped job's id starting with its priority's rank: shaped
runs are then stored in the order they are granted, as plain ones are, and
the ratio shows what is left of the difference once storage order is not.
``--rounds N`` runs either ``--windows`` form N times, each in a fresh
machine, and prints every round's ratio and the median round's figures: on a
busy two-core machine one run's ratio moved by 0.1 from one run to the next.
``--windows`` also prints each kind's CPU per completion (a layout that made
grants cheaper by making completions dearer would show there).

``--format N``: the command format the machines use (default: the newest); 5
stores every run under its id, as every version before format 6 did (6
stores the runs of jobs with a priority in the order grants take them).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import tempfile
import time
from typing import Any

from apply_cost import _machine, entry_applier  # the machine on either store, as apply_cost.py makes it (a sibling script)
from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import MAX_PRIORITY, At, JobSpec

T0 = 1_767_225_600_000
FIRE_BATCH = 256
LEASE_BATCH = 500
KEYS = 1000
#: the command format the machines switch to (``--format``): the newest by default
FORMAT = [c.wire.FORMAT_VERSION]


def job_id(i: int) -> str:
    """The i-th job's id: random-looking, as the ids a node makes are, so that a grant's runs are as scattered
    over the store's keys in both backlogs (numbered ids would put a plain grant's runs side by side, and make
    its writes cheaper than any real grant's)."""
    return "j-" + hashlib.blake2b(i.to_bytes(8, "big"), digest_size=10).hexdigest()


def _spec(i: int, shaped: bool) -> JobSpec:
    spec = JobSpec(name=f"n{i}", schedule=At(T0), type="noop")
    if shaped:
        spec = spec._replace(priority=i % 10, concurrency_key=f"k{i % KEYS}", concurrency_limit=1_000_000)
    return spec


def grant_us(store: str, jobs: int, shaped: bool) -> float:
    """Microseconds per granted run, in one fresh machine."""
    folder = tempfile.mkdtemp(prefix="raftsched-grant-")
    machine, close = _machine(store, folder)
    index = 0

    def apply(cmd: Any) -> Any:
        nonlocal index
        index += 1
        result = machine.apply(c.encode(cmd), index, 0)
        machine.commit()
        machine.drain_events()
        return result

    try:
        apply(c.SetClusterFormat(T0 - 60_000, FORMAT[0]))
        for i in range(jobs):
            apply(c.CreateJob(T0 - 60_000, job_id(i), _spec(i, shaped)))
        items = [(job_id(i), T0) for i in range(jobs)]
        for k in range(0, jobs, FIRE_BATCH):
            apply(c.Fire(T0, tuple(items[k : k + FIRE_BATCH]), 100))
        granted = 0
        began = time.perf_counter()
        while granted < jobs:
            answer = apply(c.AcquireLeases(T0, "bench", ("default",), LEASE_BATCH))
            if not answer.value:
                break
            granted += len(answer.value)
        took = time.perf_counter() - began
        if granted != jobs:
            raise SystemExit(f"only {granted} of {jobs} runs were granted")
        return took / jobs * 1e6
    finally:
        close()
        shutil.rmtree(folder, ignore_errors=True)


#: the cluster scenario's queues and windows (``bench.scenarios.grant_shapes``)
PLAIN_QUEUES = ("bench-grant-plain-0", "bench-grant-plain-1")
SHAPED_QUEUES = ("bench-grant-shaped-0", "bench-grant-shaped-1")
WINDOW_ORDER = ("plain", "shaped", "shaped", "plain", "shaped", "plain", "plain", "shaped")
#: leases per AcquireLeases and AcquireLeases per entry in a window, CompleteRuns per entry after it
WINDOW_GRANT, WINDOW_GRANTS_PER_ENTRY, WINDOW_COMPLETES = 50, 2, 20


def _window_spec(shaped: bool, queue: str, rnd: random.Random) -> JobSpec:
    spec = JobSpec(name="bench-shaped" if shaped else "bench-plain", schedule=At(T0), type="bench", queue=queue)
    spec = spec._replace(lease_ttl_ms=600_000)
    if shaped:
        key = f"k{rnd.randrange(KEYS)}"
        spec = spec._replace(priority=rnd.randrange(10), concurrency_key=key, concurrency_limit=1_000_000)
    return spec


def window_job_id(ms: int, spec: JobSpec, ordered: bool, rnd: random.Random) -> str:
    """A job's id as a node names a new one (in creation order); ``ordered``: its priority's rank first, so that
    the runs of higher priorities sort first (in the order a grant takes them)."""
    first = f"{MAX_PRIORITY - spec.priority}" if ordered else ""
    return f"j-{first}{ms:012x}{rnd.getrandbits(32):08x}"


def windows_us(store: str, jobs: int, seed: int = 7, ordered: bool = False) -> dict[str, float]:
    """CPU microseconds per grant of each kind (the mean of its windows), in one fresh machine holding both.
    ``ordered``: a shaped job's id starts with its priority's rank, so shaped runs are stored in the order
    they are granted, as plain ones are."""
    folder = tempfile.mkdtemp(prefix="raftsched-grant-")
    machine, close = _machine(store, folder)
    rnd = random.Random(seed)
    entry = entry_applier(machine)

    try:
        entry([c.SetClusterFormat(T0 - 60_000, FORMAT[0])])
        ids: list[str] = []
        ms = T0 - 3_600_000
        for i in range(jobs):
            ms += 1 if i % 3 == 0 else 0
            for shaped in (False, True):
                spec = _window_spec(shaped, (SHAPED_QUEUES if shaped else PLAIN_QUEUES)[i % 2], rnd)
                job = window_job_id(ms, spec, shaped and ordered, rnd)
                ids.append(job)
                entry([c.CreateJob(ms, job, spec)])
        items = sorted((job, T0) for job in ids)
        for k in range(0, len(items), FIRE_BATCH):
            entry([c.Fire(T0, tuple(items[k : k + FIRE_BATCH]), 100)])
        per = max(1, int(0.9 * jobs / 4))  # 90 % of a backlog over its four windows: neither runs dry
        now = T0 + 1000
        cpu: dict[str, list[float]] = {"plain": [], "shaped": []}
        done_cpu: dict[str, list[float]] = {"plain": [], "shaped": []}
        for kind in WINDOW_ORDER:
            queues = PLAIN_QUEUES if kind == "plain" else SHAPED_QUEUES
            held: list[tuple[str, int, str]] = []
            began = time.process_time()
            calls = 0
            while len(held) < per:
                left = per - len(held)  # a window grants its share exactly: the backlog's other windows keep theirs
                asks = [min(WINDOW_GRANT, left - k * WINDOW_GRANT) for k in range(WINDOW_GRANTS_PER_ENTRY)]
                cmds = [c.AcquireLeases(now, f"ex-{(calls + k) % 6}", queues, n) for k, n in enumerate(asks) if n > 0]
                calls += len(cmds)
                granted = [g for r in entry(cmds) for g in r.value]
                if not granted:
                    raise SystemExit(f"the {kind} backlog ran dry after {len(held)} grants")
                held.extend((g.run.lease_id, g.run.fencing_token, g.run.executor_id) for g in granted)
            cpu[kind].append((time.process_time() - began) / len(held) * 1e6)
            began = time.process_time()
            for k in range(0, len(held), WINDOW_COMPLETES):
                done = entry(
                    [
                        c.CompleteRun(now, lease, token, True, executor_id=ex)
                        for lease, token, ex in held[k : k + WINDOW_COMPLETES]
                    ]
                )
                assert all(r.value.status.value == "SUCCEEDED" for r in done), done
            done_cpu[kind].append((time.process_time() - began) / len(held) * 1e6)
            now += 1000
        out = {kind: sum(v) / len(v) for kind, v in cpu.items()}
        return out | {f"{kind}_complete": sum(v) / len(v) for kind, v in done_cpu.items()}
    finally:
        close()
        shutil.rmtree(folder, ignore_errors=True)


def _print_windows(store: str, jobs: int, ordered: bool, rounds: int) -> int:
    """``--windows``: each round in a fresh machine; with more than one, each round's ratio and then the round
    whose ratio is the median (one run of this on a busy two-core machine moved the ratio by 0.1)."""
    order = ", shaped ids in grant order" if ordered else ""
    each = [windows_us(store, jobs, seed=7 + k, ordered=ordered) for k in range(rounds)]
    ratios = [us["plain"] / us["shaped"] for us in each]
    if rounds > 1:
        print(f"grant windows, round by round: plain/shaped {', '.join(f'{r:.3f}' for r in ratios)}")
    us = sorted(each, key=lambda u: u["plain"] / u["shaped"])[(rounds - 1) // 2]
    which = "" if rounds == 1 else f"; the median of {rounds} rounds, ratios {min(ratios):.3f}-{max(ratios):.3f}"
    print(f"grant windows, {jobs} runs of each kind in one machine, {store} store{order} (CPU, mean of 4 windows each{which}):")
    print(f"  plain  {us['plain']:7.2f} us/grant, {us['plain_complete']:7.2f} us/completion")
    print(f"  shaped {us['shaped']:7.2f} us/grant, {us['shaped_complete']:7.2f} us/completion")
    print(f"  ratio plain/shaped {us['plain'] / us['shaped']:.3f} (grant_shapes' target: at least 0.85)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--store", choices=["memory", "lmdb"], default="lmdb")
    ap.add_argument(
        "--rounds", type=int, default=None, help="best of (or, with --windows, median of) this many (default 3; --windows: 1)"
    )
    ap.add_argument("--windows", action="store_true", help="both backlogs in one machine, as grant_shapes has them")
    ap.add_argument(
        "--format", type=int, default=c.wire.FORMAT_VERSION, help="the command format the machines use (default: the newest)"
    )
    ap.add_argument(
        "--ordered", action="store_true", help="with --windows: shaped jobs' ids sort in grant order (priority first)"
    )
    args = ap.parse_args(argv)
    if args.ordered and not args.windows:
        ap.error("--ordered goes with --windows")
    if args.rounds is not None and args.rounds < 1:
        ap.error("--rounds must be at least 1")
    FORMAT[0] = args.format
    if args.windows:
        return _print_windows(args.store, args.jobs, args.ordered, args.rounds or 1)
    rounds = args.rounds or 3
    best = {"plain": float("inf"), "shaped": float("inf")}
    for _ in range(rounds):  # alternated, so both see the same machine conditions
        for kind in best:
            best[kind] = min(best[kind], grant_us(args.store, args.jobs, kind == "shaped"))
    print(f"grant, {args.jobs} runs, {args.store} store (best of {rounds}):")
    print(f"  plain  (priority 0, no key)            {best['plain']:7.2f} us/run")
    print(f"  shaped (priorities 0-9, {KEYS} keys)     {best['shaped']:7.2f} us/run")
    print(f"  ratio shaped/plain {best['shaped'] / best['plain']:.3f} (target <= 1.15)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
