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
shaped/plain (the target: at most 1.15).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import tempfile
import time
from typing import Any

from apply_cost import _machine  # the machine on either store, as apply_cost.py makes it (a sibling script)
from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import SCHEDULES_FORMAT, At, JobSpec

T0 = 1_767_225_600_000
FIRE_BATCH = 256
LEASE_BATCH = 500
KEYS = 1000


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
        apply(c.SetClusterFormat(T0 - 60_000, SCHEDULES_FORMAT))
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--store", choices=["memory", "lmdb"], default="lmdb")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    best = {"plain": float("inf"), "shaped": float("inf")}
    for _ in range(args.rounds):  # alternated, so both see the same machine conditions
        for kind in best:
            best[kind] = min(best[kind], grant_us(args.store, args.jobs, kind == "shaped"))
    print(f"grant, {args.jobs} runs, {args.store} store (best of {args.rounds}):")
    print(f"  plain  (priority 0, no key)            {best['plain']:7.2f} us/run")
    print(f"  shaped (priorities 0-9, {KEYS} keys)     {best['shaped']:7.2f} us/run")
    print(f"  ratio shaped/plain {best['shaped'] / best['plain']:.3f} (target <= 1.15)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
