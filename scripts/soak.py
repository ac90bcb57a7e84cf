#!/usr/bin/env python
"""Soak: a 3-node cluster under random faults for N minutes, then the history check. Not part of CI.

    python scripts/soak.py --minutes 30 [--seed S] [--keep]
    python scripts/soak.py --plan --minutes 2 --seed 7      # only print the faults it would inject

A ``LocalCluster`` in a temp dir, interval jobs (every 1 s, noop; every 2 s, shell), a couple of one-off jobs,
a writer creating a one-off job due 8 s later every 0.5 s, and two executors. Every few seconds a fault
(``next_fault``): a SIGKILL — half of them of the leader, some of them followed at once by a SIGKILL of the
next leader — with the node restarted after a random delay, or now and then a SIGSTOP for a few seconds
and a SIGCONT. Measured on this process's clocks:

- every time to a new leader the survivors agree on, after a leader dies or freezes; one over 5 s is a
  "stuck election" (guarantee 7), and one that never comes within 60 s ends the soak;
- every time for a restarted or resumed node to name the same leader as the others (at most 10 s);
- after each leader loss, when a fire proposed after it was first seen (``firing resumed``).

At the end every node is read and ``tests.history`` checks the whole history: no double fire, no gap, no
instant skipped, every acknowledged write on every node, at most one lease holder at a time (from the runs'
attempt records), the same runs everywhere; and no node's log may say it deleted Raft log entries it had
applied. A summary is printed; the exit status is 1 on any violation (stuck elections and slow rejoins
included), 0 otherwise. Every process started here is stopped by pid.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from raftsched.cluster.app.local_cluster import LocalCluster  # noqa: E402
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb  # noqa: E402
from raftsched.rpc import convert as cv  # noqa: E402
from raftsched.rpc.client.client import Client  # noqa: E402
from tests.elections import EventClock, attempt_leases, now_ms, wait_agreed  # noqa: E402
from tests.helpers import at_spec, every_spec, start_executor  # noqa: E402
from tests.history import Expected, IntervalJob, LeaseRecord, OneOffJob, violations  # noqa: E402
from tests.history_read import applied_entries_deleted, read_history, settled  # noqa: E402

QUEUE = "soak"
ELECTION_S = 5.0  # guarantee 7: a new leader within 5 s, every time
REJOIN_S = 10.0  # guarantee 7: a restarted node names the same leader as the others within 10 s
GIVE_UP_S = 60.0  # no leader (or no rejoin) this long: the soak stops, failed
HISTORY_LIMIT = 100_000  # keep every run of the soak (an every-1s job makes 3,600 an hour)


@dataclass(frozen=True)
class Fault:
    """One fault: ``kind`` kill or stop, of the ``leader`` or a follower, back after ``back_after_s`` (restart or
    SIGCONT); ``double``: once the survivors elect, the victim is restarted and the new leader killed at once;
    ``wait_s``: the quiet time before it."""

    kind: str
    leader: bool
    back_after_s: float
    double: bool
    wait_s: float

    def words(self) -> str:
        who = "the leader" if self.leader else "a follower"
        what = f"SIGSTOP {who} for {self.back_after_s:.1f} s" if self.kind == "stop" else f"SIGKILL {who}"
        if self.kind == "kill":
            what += f", restart after {self.back_after_s:.1f} s" + (", then SIGKILL the next leader" if self.double else "")
        return f"after {self.wait_s:.1f} s: {what}"


def next_fault(rng: random.Random) -> Fault:
    """The next fault: 90 % SIGKILLs (half of the leader, a tenth of those followed by a kill of the next leader),
    10 % SIGSTOPs of 2-10 s (half of the leader), every 2-6 s."""
    wait_s = rng.uniform(2.0, 6.0)
    leader = rng.random() < 0.5
    if rng.random() < 0.1:
        return Fault("stop", leader, rng.uniform(2.0, 10.0), False, wait_s)
    return Fault("kill", leader, rng.uniform(0.5, 5.0), leader and rng.random() < 0.2, wait_s)


@dataclass
class LeaderLoss:
    cause: str
    victim: str
    #: wall ms when it happened (fires stamped later were proposed by a later leader)
    at_ms: int
    #: seconds to a leader the others agreed on (None: none within GIVE_UP_S)
    election_s: float | None
    resumed_s: float | None = None


@dataclass
class Tally:
    kills: int = 0
    leader_kills: int = 0
    double_kills: int = 0
    stops: int = 0
    losses: list[LeaderLoss] = field(default_factory=list)
    rejoins: list[float] = field(default_factory=list)
    slow_rejoins: list[str] = field(default_factory=list)


class Writer:
    """Creates a one-off job due 8 s later every 0.5 s from a thread; keeps the acknowledged ones."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.acknowledged: dict[str, int] = {}
        self.unacknowledged = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        k = 0
        while not self._stop.wait(0.5):
            at = now_ms() + 8000
            try:
                job = self.client.create_job(at_spec(f"soak-once-{k}", at, queue="soak-idle"), idempotency_key=f"soak-once-{k}")
                self.acknowledged[job.job_id] = at
            except Exception:  # noqa: BLE001 - not acknowledged: not checked
                self.unacknowledged += 1
            k += 1

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(120)
        return dict(self.acknowledged)


class Soak:
    def __init__(self, cluster: LocalCluster, rng: random.Random, say: Any) -> None:
        self.c = cluster
        self.rng = rng
        self.say = say
        self.tally = Tally()
        self.nodes = list(cluster.nodes)

    def leader(self) -> str:
        leader, _ = wait_agreed(self.c, self.nodes, GIVE_UP_S)
        if leader is None:
            raise SoakAborted(f"the nodes agree on no leader within {GIVE_UP_S:.0f} s (logs in {self.c.root})")
        return leader

    def _elect(self, survivors: list[str], since: float, cause: str, victim: str, at_ms: int) -> str:
        leader, took = wait_agreed(self.c, survivors, GIVE_UP_S, since=since)
        self.tally.losses.append(LeaderLoss(cause, victim, at_ms, took if leader else None))
        if leader is None:
            raise SoakAborted(f"{cause} of the leader {victim}: {survivors} agree on no leader within {GIVE_UP_S:.0f} s")
        stuck = " (a STUCK election: over 5 s)" if took > ELECTION_S else ""
        self.say(f"  {cause} of the leader {victim}: {survivors} agreed on {leader} after {took:.2f} s{stuck}")
        return leader

    def _rejoin(self, node: str, since: float, what: str) -> None:
        leader, took = wait_agreed(self.c, self.nodes, GIVE_UP_S, since=since)
        if leader is None:
            raise SoakAborted(f"{what} {node}: the nodes agree on no leader within {GIVE_UP_S:.0f} s")
        self.tally.rejoins.append(took)
        if took > REJOIN_S:
            self.tally.slow_rejoins.append(f"{what} {node} named the leader after {took:.1f} s")
        self.say(f"  {what} {node}: every node names {leader} after {took:.2f} s")

    def _kill_leader(self, back_after_s: float, cause: str = "SIGKILL") -> tuple[str, str]:
        victim = self.leader()
        survivors = [n for n in self.nodes if n != victim]
        at, at_ms = time.monotonic(), now_ms()
        self.c.kill(victim)
        self.tally.kills += 1
        self.tally.leader_kills += 1
        new = self._elect(survivors, at, cause, victim, at_ms)
        time.sleep(max(0.0, at + back_after_s - time.monotonic()))
        return victim, new

    def inject(self, fault: Fault) -> None:
        self.say(fault.words())
        if fault.kind == "stop":
            self._stop(fault)
        elif fault.leader:
            victim, _ = self._kill_leader(fault.back_after_s)
            self._restart(victim)
            if fault.double:
                self.tally.double_kills += 1
                second, _ = self._kill_leader(self.rng.uniform(0.5, 3.0), "second SIGKILL in a row")
                self._restart(second)
        else:
            victim = self.rng.choice([n for n in self.nodes if n != self.leader()])
            self.c.kill(victim)
            self.tally.kills += 1
            time.sleep(fault.back_after_s)
            self._restart(victim)

    def _restart(self, node: str) -> None:
        self.c.start(node)
        self._rejoin(node, time.monotonic(), "restarted")

    def _stop(self, fault: Fault) -> None:
        leader = self.leader()
        victim = leader if fault.leader else self.rng.choice([n for n in self.nodes if n != leader])
        pid = self.c.nodes[victim].pid
        if pid is None:
            return
        at, at_ms = time.monotonic(), now_ms()
        os.kill(pid, signal.SIGSTOP)
        self.tally.stops += 1
        try:
            if fault.leader:
                self._elect([n for n in self.nodes if n != victim], at, "SIGSTOP", victim, at_ms)
            time.sleep(max(0.0, at + fault.back_after_s - time.monotonic()))
        finally:
            os.kill(pid, signal.SIGCONT)
        self._rejoin(victim, time.monotonic(), "resumed")


class SoakAborted(Exception):
    """The cluster did not recover within ``GIVE_UP_S``: the soak stops and fails."""


def resumes(losses: list[LeaderLoss], fires: list[Any]) -> None:
    """Fill each loss's ``resumed_s``: when the first fire proposed after it was seen."""
    stamped = sorted((s.stamped_ms, s.seen_ms) for s in fires)
    for loss in losses:
        seen = [seen_ms for stamp, seen_ms in stamped if stamp > loss.at_ms]
        loss.resumed_s = (min(seen) - loss.at_ms) / 1000.0 if seen else None


def summary(tally: Tally, found: list[str], minutes: float) -> tuple[str, bool]:
    """The summary's lines, and whether anything was violated."""
    elections = [x.election_s for x in tally.losses if x.election_s is not None]
    resumed = [x.resumed_s for x in tally.losses if x.resumed_s is not None]
    stuck = [x for x in tally.losses if x.election_s is None or x.election_s > ELECTION_S]
    kinds = {"duplicates": "double fire", "gaps": "gap:", "lost writes": "lost acknowledged write", "lease overlaps": "two lease"}
    counts = {name: sum(1 for v in found if key in v) for name, key in kinds.items()}
    others = len(found) - sum(counts.values())

    def spread(xs: list[float]) -> str:
        return f"median {statistics.median(xs):.2f} s, max {max(xs):.2f} s (n={len(xs)})" if xs else "none measured"

    lines = [
        f"soak summary ({minutes:.1f} min)",
        f"  kills                {tally.kills} ({tally.leader_kills} of the leader, {tally.double_kills} double)",
        f"  SIGSTOPs             {tally.stops}",
        f"  time to new leader   {spread(elections)}",
        f"  firing resumed after {spread(resumed)}",
        f"  stuck elections      {len(stuck)} (over {ELECTION_S:.0f} s)",
        f"  rejoin               {spread(tally.rejoins)}; over {REJOIN_S:.0f} s: {len(tally.slow_rejoins)}",
        *(f"  {name:<20} {n}" for name, n in counts.items()),
        f"  other violations     {others}",
    ]
    lines += [f"    - {v}" for v in found[:40]] + [f"    - {s}" for s in tally.slow_rejoins]
    failed = bool(found or stuck or tally.slow_rejoins)
    lines.append("RESULT: " + ("FAILED" if failed else "ok"))
    return "\n".join(lines), failed


def _jobs(client: Client) -> tuple[dict[str, int], dict[str, int], list[str]]:
    """Interval jobs (job id -> first instant, job id -> every ms) and two one-offs due in an hour."""
    firsts, every = {}, {}
    for i in range(10):
        spec = every_spec(f"soak-tick-{i}", 1000, queue=QUEUE, history_limit=HISTORY_LIMIT)
        job = client.create_job(spec)
        firsts[job.job_id], every[job.job_id] = cv.ts_ms(job.created_at) + 1000, 1000
    for i in range(2):
        spec = every_spec(f"soak-shell-{i}", 2000, queue=QUEUE, history_limit=HISTORY_LIMIT, payload=b'{"command": "echo soak"}')
        spec.type = "shell"
        job = client.create_job(spec)
        firsts[job.job_id], every[job.job_id] = cv.ts_ms(job.created_at) + 2000, 2000
    later = [client.create_job(at_spec(f"soak-later-{i}", now_ms() + 3_600_000)).job_id for i in range(2)]
    return firsts, every, later


def _check(c: LocalCluster, client: Client, firsts: dict[str, int], every: dict[str, int], acked: dict[str, int], later: list[str], last_fault_ms: int) -> list[str]:  # fmt: skip
    expected = Expected(
        acknowledged=[*acked, *later],
        interval=[
            IntervalJob(j, every[j], first_ms=f, fired_after_ms=last_fault_ms, skips_allowed=False) for j, f in firsts.items()
        ],
        one_off=[OneOffJob(j, at_ms=at) for j, at in acked.items()],
        nodes=list(c.nodes),
    )

    def leases() -> list[LeaseRecord]:  # read after the runs: a retry the executors take meanwhile is among them
        return attempt_leases(r for j in firsts for r in client.list_runs(job_id=j))

    history = settled(lambda: read_history(c, [*firsts, *acked], job_prefix="soak-", leases=leases))
    return violations(history, expected) + [f"deleted applied Raft log entries: {line}" for line in applied_entries_deleted(c)]


def run(args: argparse.Namespace, root: str, say: Any) -> int:
    faults = random.Random(args.seed)  # the faults drawn: what --plan prints for the same seed
    c = LocalCluster.create(os.path.join(root, "cluster"), 3)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        c.start_all()
        c.wait_leader(30)
        with Client(c.addresses, deadline_s=30) as client:
            firsts, every, later = _jobs(client)
            procs = [start_executor(c, root, f"exec-soak-{i}", QUEUE, allow=allow) for i, allow in ((1, ("shell",)), (2, ()))]
            writer = Writer(client)
            soak = Soak(c, random.Random(args.seed + 1), say)  # the victims and the second kills' delays
            started = time.monotonic()
            end = started + args.minutes * 60
            with EventClock({n: c.nodes[n].grpc for n in c.nodes}, QUEUE) as seen:
                try:
                    while time.monotonic() < end:
                        fault = next_fault(faults)
                        time.sleep(min(fault.wait_s, max(0.0, end - time.monotonic())))
                        if time.monotonic() < end:
                            soak.inject(fault)
                except SoakAborted as exc:
                    say(f"ABORTED: {exc}")
                    soak.tally.slow_rejoins.append(f"aborted: {exc}")
                last_fault_ms = now_ms()
                for node in c.nodes:
                    c.start(node)  # whatever an abort left down
                soak.leader()
                acked = writer.stop()
                time.sleep(10.0)  # the last one-offs' instants (8 s after their creation) pass
                for job_id in firsts:
                    client.job("PauseJob", pb.PauseJobRequest(job_id=job_id))
                time.sleep(2.0)
                fires, _ = seen.sightings()
            resumes(soak.tally.losses, fires)
            say(f"checking the history: {len(firsts)} interval jobs, {len(acked)} acknowledged one-offs "
                f"({writer.unacknowledged} writes not acknowledged)")  # fmt: skip
            found = _check(c, client, firsts, every, acked, later, last_fault_ms)
        text, failed = summary(soak.tally, found, (time.monotonic() - started) / 60)
        print(text, flush=True)
        if failed:
            say(f"node and executor logs kept in {root}")
        return 1 if failed else 0
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
        for node in c.nodes:
            pid = c.nodes[node].pid
            if pid is not None and c.nodes[node].alive():
                os.kill(pid, signal.SIGCONT)
            c.kill(node)


def _interrupted(*_: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0, help="how long to inject faults (default 30)")
    ap.add_argument("--seed", type=int, default=None, help="the random seed of the faults (default: from the time)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, data) even when nothing failed")
    ap.add_argument("--plan", action="store_true", help="only print the faults the seed draws for about --minutes; start nothing")
    args = ap.parse_args(argv)
    if args.seed is None:
        args.seed = time.time_ns() % 1_000_000
    if args.plan:
        rng, elapsed = random.Random(args.seed), 0.0
        while elapsed < args.minutes * 60:
            fault = next_fault(rng)
            print(fault.words())
            elapsed += fault.wait_s + fault.back_after_s
        return 0

    def say(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)

    root = tempfile.mkdtemp(prefix="raftsched-soak-")
    say(f"soak: {args.minutes} min of faults, seed {args.seed}, in {root}")
    signal.signal(signal.SIGTERM, _interrupted)
    status = 1
    try:
        status = run(args, root, say)
    except KeyboardInterrupt:
        say("interrupted")
    finally:
        if status == 0 and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
