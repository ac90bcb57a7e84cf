"""What a completion costs a replica once its job keeps as many finished runs as its history limit allows.

    python scripts/bench/micro/retention_cost.py [--jobs 20] [--limit 1000] [--store lmdb|memory]

Creates ``--jobs`` interval jobs (every second, ``history_limit = --limit``)
in a ``JobStateMachine``, then runs ``--limit + 100`` instants of each: a
``Fire`` entry, an ``AcquireLeases`` entry and one entry of completions per
instant, as a leader proposes them. Prints the microseconds per completion of
the first 100 instants (under the limit) and of the last 100 (over it: each
completion also drops the job's oldest run, which is what every completion
of a job that has run ``--limit`` times does). The cost over the limit is
the retention rule's (``raftsched.cluster.fsm.retention``): it grows with
nothing but the runs dropped.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time

from apply_cost import _machine, entry_applier  # the machine on either store, as apply_cost.py makes it (a sibling script)
from raftsched.cluster.app.node_main import GC_THRESHOLDS
from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import Every, JobSpec

T0 = 1_800_000_000_000
SEC = 1000
#: instants measured at each end
EDGE = 100


def measure(jobs: int, limit: int, store: str) -> tuple[float, float]:
    """Microseconds per completion under the limit (the first ``EDGE`` instants) and over it (the last ``EDGE``)."""
    folder = tempfile.mkdtemp(prefix="raftsched-retention-")
    machine, close = _machine(store, folder)
    entry = entry_applier(machine)

    ids = [f"j-{i:05d}" for i in range(jobs)]
    took: list[float] = []
    try:
        entry([c.SetClusterFormat(T0 - SEC, c.FORMAT_VERSION)])
        spec = JobSpec(name="retention", schedule=Every(SEC), type="noop", history_limit=limit)
        entry([c.CreateJob(T0, job_id, spec._replace(name=job_id)) for job_id in ids])  # instants: T0 + k s
        for k in range(1, limit + EDGE + 1):
            now = T0 + k * SEC
            entry([c.Fire(now, tuple((job_id, now) for job_id in ids), lookahead_ms=0)])
            answer = entry([c.AcquireLeases(now, "bench", ("default",), jobs)])[0]
            grants = getattr(answer, "value", answer)
            if len(grants) != jobs:
                raise SystemExit(f"instant {k}: {len(grants)} of {jobs} runs were granted: the benchmark no longer fits")
            done = [c.CompleteRun(now + 5, g.run.lease_id, g.run.fencing_token, True, executor_id="bench") for g in grants]
            began = time.perf_counter()
            entry(done)
            took.append((time.perf_counter() - began) / max(1, len(done)))
    finally:
        close()
        shutil.rmtree(folder, ignore_errors=True)
    return sum(took[:EDGE]) / EDGE * 1e6, sum(took[-EDGE:]) / EDGE * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--limit", type=int, default=1000, help="each job's history_limit")
    parser.add_argument("--store", choices=("lmdb", "memory"), default="lmdb")
    args = parser.parse_args(argv)
    if args.limit < EDGE:
        parser.error(f"--limit must be at least {EDGE}: the first {EDGE} instants are the ones under it")
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        under, over = measure(args.jobs, args.limit, args.store)
    finally:
        gc.set_threshold(*before)
    print(
        f"{args.store:7} {args.jobs} jobs, history limit {args.limit}: a completion {under:.1f} us under the limit, "
        f"{over:.1f} us over it (node gc)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
