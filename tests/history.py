"""The history checker: what every fault test (and any test that checks a run history) asserts at its end.

Pure: it takes plain records, so its own unit tests build histories by hand
(``tests/unit/test_history.py``); ``tests.history_read`` reads them from the
nodes of a running cluster. Given

- ``History.runs``: the runs of the checked jobs as each node reports them,
- ``History.jobs``: the job ids each node knows (for acknowledged writes),
- ``History.leases``: the leases an observer saw granted and ended, on its
  own timeline (a node's apply order, or milliseconds),

and what the test knows (``Expected``: acknowledged job ids, interval jobs
with their ``every``, one-off jobs), ``violations`` lists, in words a person
can act on, every breach of:

- **no double fire**: one run per job and scheduled instant (manual runs
  aside), and no run id twice;
- **no gap**: an interval job covers every instant of its grid from its first
  (given, or observed) to its last observed one, fired or inside a SKIPPED
  record (``skipped_count`` instants through ``skipped_until_ms``); optionally
  no SKIPPED record at all, at least N fires, a fire after a given instant;
- **one-off jobs fired once**, at their instant;
- **no lost acknowledged write**: every acknowledged job on every node;
- **at most one lease holder**: no two leases of a run overlap, tokens and
  attempts grow, one token is one executor's, and the last lease seen is the
  lease each node's run record names;
- **replicas agree**: every node reports the same runs, field for field.

``check_history`` raises ``HistoryViolation`` (an ``AssertionError``) listing them all.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import astuple, dataclass, field
from datetime import datetime, timezone
from typing import Collection, Iterable, Sequence

SKIPPED = "SKIPPED"
MAX_LINES = 60


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run as one node reports it (``status`` is the ``RunStatus`` name without its prefix: "PENDING")."""

    run_id: str
    job_id: str
    scheduled_ms: int
    status: str
    attempt: int = 0
    fencing_token: int = 0
    executor_id: str = ""
    manual: bool = False
    skipped_count: int = 0
    skipped_until_ms: int = 0
    error: str = ""


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """A lease as observed: held from ``start`` until ``end`` (None: still held when observing stopped)."""

    run_id: str
    attempt: int
    fencing_token: int
    executor_id: str
    start: int
    end: int | None


@dataclass(frozen=True)
class IntervalJob:
    job_id: str
    every_ms: int
    #: the instant it must have fired first (created + every): no gap before the first observed run
    first_ms: int | None = None
    #: it fired (not skipped) at least this many instants
    min_fired: int = 1
    #: its last fired instant is later than this (it kept firing, e.g. after a kill)
    fired_after_ms: int | None = None
    #: False: any SKIPPED record is itself a violation (a failover must not skip instants)
    skips_allowed: bool = True


@dataclass(frozen=True)
class OneOffJob:
    job_id: str
    #: the instant its one run is for (None: any)
    at_ms: int | None = None
    #: the status its run must have (None: any)
    status: str | None = None


@dataclass
class History:
    runs: dict[str, list[RunRecord]]
    jobs: dict[str, set[str]] = field(default_factory=dict)
    leases: list[LeaseRecord] = field(default_factory=list)


@dataclass(frozen=True)
class Expected:
    acknowledged: Collection[str] = ()
    interval: Sequence[IntervalJob] = ()
    one_off: Sequence[OneOffJob] = ()
    #: every node that must have been read (empty: whichever the history holds)
    nodes: Collection[str] = ()


class HistoryViolation(AssertionError):
    def __init__(self, found: list[str], summary: str) -> None:
        shown = found[:MAX_LINES] + ([f"... and {len(found) - MAX_LINES} more"] if len(found) > MAX_LINES else [])
        super().__init__(f"history check failed: {len(found)} violation(s) in {summary}:\n  - " + "\n  - ".join(shown))
        self.violations = found


def at(ms: int) -> str:
    """``ms`` and its UTC time, for messages."""
    return f"{ms} ({datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec='milliseconds')})"


def check_history(history: History, expected: Expected) -> None:
    found = violations(history, expected)
    if found:
        records = sum(len(runs) for runs in history.runs.values())
        summary = f"{len(history.runs)} node(s), {records} run record(s), {len(history.leases)} lease(s)"
        raise HistoryViolation(found, summary)


def violations(history: History, expected: Expected) -> list[str]:
    found = _coverage(history, expected) + replica_disagreements(history.runs) + _lost_writes(history.jobs, expected.acknowledged)
    for node, runs in sorted(history.runs.items()):
        by_job: dict[str, list[RunRecord]] = defaultdict(list)
        for run in runs:
            by_job[run.job_id].append(run)
        found += _double_fires(node, by_job)
        found += [v for job in expected.interval for v in _interval(node, job, by_job.get(job.job_id, []))]
        found += [v for job in expected.one_off for v in _one_off(node, job, by_job.get(job.job_id, []))]
        found += _leases_match_runs(node, runs, history.leases)
    return found + _lease_holders(history.leases)


def _coverage(history: History, expected: Expected) -> list[str]:
    found = []
    if (expected.interval or expected.one_off) and not history.runs:
        found.append("no node's runs were read: nothing to check")
    if expected.acknowledged and not history.jobs:
        found.append("no node's jobs were read: acknowledged writes cannot be checked")
    for node in sorted(expected.nodes):
        if (expected.interval or expected.one_off) and node not in history.runs:
            found.append(f"node {node}: its runs were not read")
        if expected.acknowledged and node not in history.jobs:
            found.append(f"node {node}: its jobs were not read")
    return found


def replica_disagreements(runs: dict[str, list[RunRecord]]) -> list[str]:
    """Where the nodes' readings of the runs differ (a run missing on one, or recorded otherwise)."""
    if len(runs) < 2:
        return []
    nodes = sorted(runs)
    tables = {n: {r.run_id: r for r in runs[n]} for n in nodes}
    first, found = nodes[0], []
    for other in nodes[1:]:
        a, b = tables[first], tables[other]
        only_a, only_b = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
        differ = sorted(k for k in a.keys() & b.keys() if astuple(a[k]) != astuple(b[k]))
        if only_a:
            found.append(f"replicas disagree: {len(only_a)} run(s) on {first} but not on {other}, e.g. {only_a[:3]}")
        if only_b:
            found.append(f"replicas disagree: {len(only_b)} run(s) on {other} but not on {first}, e.g. {only_b[:3]}")
        for k in differ[:3]:
            found.append(f"replicas disagree on run {k}: {first} has {a[k]}, {other} has {b[k]}")
        if len(differ) > 3:
            found.append(f"replicas disagree on {len(differ) - 3} more run(s) between {first} and {other}")
    return found


def _double_fires(node: str, by_job: dict[str, list[RunRecord]]) -> list[str]:
    found = []
    for job_id, runs in sorted(by_job.items()):
        for run_id, n in sorted(Counter(r.run_id for r in runs).items()):
            if n > 1:
                found.append(f"double fire: run {run_id} is listed {n} times on {node}")
        instants: dict[int, list[str]] = defaultdict(list)
        for r in runs:
            if not r.manual:
                instants[r.scheduled_ms].append(r.run_id)
        for ms, ids in sorted(instants.items()):
            if len(ids) > 1:
                found.append(f"double fire: job {job_id} on {node} has {len(ids)} runs for instant {at(ms)}: {sorted(ids)}")
    return found


def _covered(job: IntervalJob, node: str, runs: list[RunRecord]) -> tuple[dict[int, list[RunRecord]], list[str]]:
    """Every instant the runs decided (fired, or inside a SKIPPED record), and what is wrong with the records."""
    covered: dict[int, list[RunRecord]] = defaultdict(list)
    found = []
    for r in runs:
        if r.status != SKIPPED:
            covered[r.scheduled_ms].append(r)
            continue
        count = max(1, r.skipped_count)
        last = r.scheduled_ms + (count - 1) * job.every_ms
        if r.skipped_until_ms and r.skipped_until_ms != last:
            found.append(
                f"job {job.job_id} on {node}: SKIPPED record {r.run_id} counts {count} instant(s) "
                f"from {at(r.scheduled_ms)}, which ends at {at(last)}, but says it ends at {at(r.skipped_until_ms)}"
            )
        for k in range(count):
            covered[r.scheduled_ms + k * job.every_ms].append(r)
    return covered, found


def _interval(node: str, job: IntervalJob, all_runs: list[RunRecord]) -> list[str]:
    runs = [r for r in all_runs if not r.manual]
    name = f"interval job {job.job_id} (every {job.every_ms} ms) on {node}"
    if not runs:
        return [f"{name}: no run at all (never fired)"]
    skipped = [r for r in runs if r.status == SKIPPED]
    found = []
    if skipped and not job.skips_allowed:
        first = skipped[0]
        found.append(
            f"{name}: {len(skipped)} SKIPPED record(s), none allowed; first at {at(first.scheduled_ms)}: {first.error!r}"
        )
    covered, bad = _covered(job, node, runs)
    found += bad
    for ms, rs in sorted(covered.items()):
        if len(rs) > 1 and any(r.scheduled_ms != ms for r in rs):  # same-instant duplicates: reported as double fires
            found.append(f"double fire: {name}: instant {at(ms)} is both skipped and fired: {sorted(r.run_id for r in rs)}")
    start = job.first_ms if job.first_ms is not None else min(covered)
    end = max(covered)
    early = [ms for ms in covered if ms < start]
    if early:
        found.append(f"{name}: {len(early)} instant(s) before its first one {at(start)}, e.g. {at(min(early))}")
    off = sorted(ms for ms in covered if (ms - start) % job.every_ms)
    if off:
        found.append(f"{name}: {len(off)} instant(s) off its grid ({at(start)} + k * {job.every_ms} ms), e.g. {at(off[0])}")
    missing = [ms for ms in range(start, end + 1, job.every_ms) if ms not in covered]
    if missing:
        shown = ", ".join(at(ms) for ms in missing[:3])
        found.append(
            f"gap: {name}: {len(missing)} instant(s) neither fired nor skipped between {at(start)} and {at(end)}: {shown}"
        )
    fired = sorted(ms for ms, rs in covered.items() if any(r.status != SKIPPED for r in rs))
    if len(fired) < job.min_fired:
        found.append(f"{name}: fired {len(fired)} instant(s), expected at least {job.min_fired}")
    if job.fired_after_ms is not None and (not fired or fired[-1] <= job.fired_after_ms):
        last = at(fired[-1]) if fired else "none"
        found.append(f"{name}: stopped firing: its last fired instant ({last}) is not after {at(job.fired_after_ms)}")
    return found


def _one_off(node: str, job: OneOffJob, all_runs: list[RunRecord]) -> list[str]:
    runs = [r for r in all_runs if not r.manual]
    name = f"one-off job {job.job_id} on {node}"
    if len(runs) != 1:
        return [f"{name}: fired {len(runs)} times, expected once: {sorted(r.run_id for r in runs)}"]
    (run,) = runs
    found = []
    if job.at_ms is not None and run.scheduled_ms != job.at_ms:
        found.append(f"{name}: its run is for {at(run.scheduled_ms)}, expected {at(job.at_ms)}")
    if job.status is not None and run.status != job.status:
        found.append(f"{name}: its run is {run.status}, expected {job.status} ({run.error!r})")
    return found


def _lost_writes(jobs: dict[str, set[str]], acknowledged: Collection[str]) -> list[str]:
    found = []
    for node, known in sorted(jobs.items()):
        missing = [j for j in acknowledged if j not in known]
        if missing:
            found.append(f"lost acknowledged write: {node} lost {len(missing)} acknowledged job(s), e.g. {missing[:3]}")
    return found


def _lease_holders(leases: Iterable[LeaseRecord]) -> list[str]:
    by_run: dict[str, list[LeaseRecord]] = defaultdict(list)
    for lease in leases:
        by_run[lease.run_id].append(lease)
    found = []
    for run_id, ls in sorted(by_run.items()):
        owners: dict[int, set[str]] = defaultdict(set)
        for lease in ls:
            owners[lease.fencing_token].add(lease.executor_id)
        for token, who in sorted(owners.items()):
            if len(who) > 1:
                found.append(f"two lease holders: run {run_id}: token {token} was granted to {sorted(who)}")
        ordered = sorted(ls, key=lambda lease: (lease.start, lease.fencing_token))
        holder = prev = ordered[0]  # holder: the lease held longest so far (None = still held)
        for nxt in ordered[1:]:
            if holder.end is None or holder.end > nxt.start:
                found.append(
                    f"two lease holders: run {run_id}: attempt {holder.attempt} (token {holder.fencing_token}, "
                    f"{holder.executor_id}) held from {holder.start} to {holder.end} while attempt {nxt.attempt} "
                    f"(token {nxt.fencing_token}, {nxt.executor_id}) was granted at {nxt.start}"
                )
            if nxt.fencing_token <= prev.fencing_token or nxt.attempt <= prev.attempt:
                found.append(
                    f"run {run_id}: lease (attempt {nxt.attempt}, token {nxt.fencing_token}) granted after "
                    f"(attempt {prev.attempt}, token {prev.fencing_token}): attempts and tokens must grow"
                )
            if holder.end is not None and (nxt.end is None or nxt.end > holder.end):
                holder = nxt
            prev = nxt
    return found


def _leases_match_runs(node: str, runs: list[RunRecord], leases: Sequence[LeaseRecord]) -> list[str]:
    """The last lease seen of a run is the one the node's run record names (the observer missed none)."""
    last: dict[str, LeaseRecord] = {}
    for lease in leases:
        if lease.run_id not in last or lease.fencing_token > last[lease.run_id].fencing_token:
            last[lease.run_id] = lease
    found = []
    for r in runs:
        seen = last.get(r.run_id)
        if seen is not None and (seen.fencing_token, seen.attempt) != (r.fencing_token, r.attempt):
            found.append(
                f"run {r.run_id} on {node} is at attempt {r.attempt} with token {r.fencing_token}, but the last lease "
                f"observed is attempt {seen.attempt} with token {seen.fencing_token}: a lease went unobserved"
            )
    return found
