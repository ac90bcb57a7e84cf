"""What a node's CPU pays per run under a steady load, and what its apply alone pays, replayed from the real log.

    python scripts/bench/micro/replay_cost.py record [--seconds 30] [--jobs 2000] [--history-limit 10] [--out replay.log]
    python scripts/bench/micro/replay_cost.py replay replay.log [--rounds 3] [--skip 40] [--format 6] [--entries N]

``record`` starts three nodes on loopback (``LocalCluster``) with ``--jobs``
interval jobs due every second and three executors (``noop``, 64 slots each)
completing them, lets the load settle (each job keeps ``--history-limit``
finished runs, 10 by default: from then on every completion also drops the
job's oldest run, as in a cluster that has run for a while), then reads each node's CPU time
(user and system, from ``/proc``) over ``--seconds`` and prints it per
completed run (the leader marked ``*``): the figure to compare with another
version under the same load. It then stops the cluster and saves n1's
committed log — every regular entry's index and data, as the Raft adapter
hands them to the state machine — to ``--out``.

``replay`` applies that log to a fresh state machine on a fresh LMDB
environment, exactly as a replica does (batches unpacked, one commit per
entry, its events drained and published to an event hub, whose history of
run changes a node keeps for watches to resume from), and prints the microseconds per finished run
it took, best of ``--rounds``. Unlike ``apply_cost.py`` (one-off jobs fired,
leased and completed in large synthetic entries), the entries, their sizes
and their mix are what a leader proposed under the load: interval jobs
fired and rescheduled in small batches, grants and completions as the
executors asked. The same file replays on any later version that reads its
command format, so two versions compare on identical input, without Raft,
gRPC, other processes or the machine's noise. ``--skip`` leaves the first
entries (the jobs' creation) out of the figure. With it the replay prints the
process's user and system CPU and the bytes it wrote (``wchar``: LMDB's page
writes) per finished run, the mechanism behind the time. ``--format N``
replays every command format switch in the log as a switch to ``N``: one log
compares the layouts of two formats (those that change only what apply
stores, as 6 and 7 do), on the same entries.

On a noisy machine two versions can differ by less than the noise between
two runs of one; their instructions do not. ``--entries N`` replays only the
log's first ``N`` entries, so that a replay fits under an instruction counter
(``valgrind --tool=callgrind``, ~50 times slower): the instructions of
``--entries 150`` minus those of ``--entries 40`` (the jobs' creation and the
process's start) are what applying entries 40 to 149 cost, the same on every
run of one version.
"""

from __future__ import annotations

import argparse
import gc
import marshal
import os
import pickle
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

from raftsched.cluster.app.node_main import GC_THRESHOLDS
from raftsched.cluster.domain import commands as c
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.event_hub import EventHub
from raftsched.raft import batching

#: pysyncobj's first byte of a regular (state machine) command in its log
_REGULAR = b"\x00"
_INDEX = struct.Struct(">Q")
_TERM_BYTES = 8


def _cpu_s(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid``."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _succeeded(cluster: Any) -> int:
    """Runs that SUCCEEDED so far in the cluster: each node's ``raftsched_runs_finished_total`` counts the runs
    finished while it led, so their sum is the cluster's."""
    total = 0.0
    for node in cluster.nodes:
        with urllib.request.urlopen(cluster.http_url(node, "/metrics"), timeout=10) as answer:
            text = answer.read().decode()
        found = re.search(r'^raftsched_runs_finished_total\{status="SUCCEEDED"\} ([0-9.e+]+)$', text, re.MULTILINE)
        total += float(found.group(1)) if found else 0.0
    return int(total)


def record(seconds: float, jobs: int, out: str, history_limit: int = 10, settle: float = 15.0) -> int:
    from google.protobuf.duration_pb2 import Duration

    from raftsched.cluster.app.local_cluster import LocalCluster
    from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
    from raftsched.rpc.client import Client

    root = tempfile.mkdtemp(prefix="raftsched-replay-")
    cluster = LocalCluster.create(root, 3, http=True)
    executors: list[subprocess.Popen[bytes]] = []
    try:
        cluster.start_all()
        cluster.wait_leader(30)
        with Client(cluster.addresses, deadline_s=30) as client:
            for first in range(0, jobs, 500):
                req = pb.CreateJobsRequest()
                for k in range(first, min(jobs, first + 500)):
                    spec = req.jobs.add().spec
                    spec.name, spec.type = f"replay-{k}", "noop"
                    spec.every.CopyFrom(Duration(seconds=1))
                    spec.history_limit = history_limit
                client.job("CreateJobs", req)
            for e in range(3):
                log = open(os.path.join(root, f"executor-{e}.log"), "wb")
                executors.append(subprocess.Popen(
                    [sys.executable, "-m", "raftsched.cluster.app.main", "executor", "--config", cluster.config_path,
                     "--queue", "default", "--concurrency", "64", "--allow-type", "noop", "--executor-id", f"replay-{e}"],
                    stdout=log, stderr=subprocess.STDOUT,
                ))  # fmt: skip
            time.sleep(settle)
            pids = {n: p.pid for n, p in cluster.nodes.items() if p.pid is not None}
            done = _succeeded(cluster)
            before = {n: _cpu_s(pid) for n, pid in pids.items()}
            time.sleep(seconds)
            after = {n: _cpu_s(pid) for n, pid in pids.items()}
            runs = _succeeded(cluster) - done
            leader = cluster.wait_leader(10)
        print(f"{runs / seconds:.0f} runs/s completed over {seconds:g} s ({jobs} interval jobs due every second)")
        for node in sorted(pids):
            user, system = (after[node][i] - before[node][i] for i in (0, 1))
            mark = "*" if node == leader else " "
            print(
                f"  {node}{mark} user {user:.2f} s, system {system:.2f} s: {(user + system) / max(runs, 1) * 1e6:.0f} us per run"
            )
    finally:
        for proc in executors:
            proc.terminate()
        for proc in executors:
            proc.wait(10)
        cluster.stop_all()
    count = save_log(os.path.join(root, "var", "n1", "raft.lmdb"), out)
    shutil.rmtree(root, ignore_errors=True)
    print(f"saved {count} entries of n1's log to {out}")
    return 0


def save_log(journal: str, out: str) -> int:
    """n1's regular entries as ``[(index, data), ...]`` in ``out`` (marshal)."""
    import lmdb

    env = lmdb.open(journal, subdir=True, readonly=True, lock=False, max_dbs=4)
    entries: list[tuple[int, bytes]] = []
    try:
        with env.begin() as txn:
            for key, raw in txn.cursor(db=env.open_db(b"log", txn=txn, create=False)):
                command = raw[_TERM_BYTES:]
                if command[:1] == _REGULAR:
                    call = pickle.loads(command[1:])  # pysyncobj's (method id, args): our own log, never a stranger's
                    entries.append((_INDEX.unpack(key)[0], bytes(call[1][0])))
    finally:
        env.close()
    with open(out, "wb") as f:
        marshal.dump(entries, f)
    return len(entries)


def replay_once(entries: list[tuple[int, bytes]], skip: int) -> tuple[float, int]:
    """Seconds spent applying the entries after the first ``skip``, and how many runs they finished."""
    from raftsched.storage.lmdb_state import LmdbTableStore

    folder = tempfile.mkdtemp(prefix="raftsched-replay-")
    store = LmdbTableStore(os.path.join(folder, "state.mdb"), 8 << 30)
    machine = JobStateMachine(store)
    hub = EventHub(lambda: 0)  # as a node's: every entry's changes kept for watches to resume from
    spent, finished = 0.0, 0
    try:
        for k, (index, data) in enumerate(entries):
            began = time.perf_counter()
            commands = batching.unpack(data) if batching.is_batch(data) else [data]
            for pos, command in enumerate(commands):
                machine.apply(command, index, pos)
            machine.commit()
            events, records = machine.drain_changes()
            hub.publish(events, index, records)
            if k >= skip:
                spent += time.perf_counter() - began
                finished += sum(1 for kind, _ in events if kind == "finished")
    finally:
        store.close()
        shutil.rmtree(folder, ignore_errors=True)
    return spent, finished


def as_format(entries: list[tuple[int, bytes]], fmt: int) -> list[tuple[int, bytes]]:
    """The entries with every command format switch (``SetClusterFormat``) made a switch to ``fmt``."""

    def switched(data: bytes) -> bytes:
        if b"cluster_format" not in data:
            return data
        cmd = c.decode(data)
        return c.encode(c.SetClusterFormat(cmd.now_ms, fmt)) if isinstance(cmd, c.SetClusterFormat) else data

    out = []
    for index, data in entries:
        if batching.is_batch(data):
            out.append((index, batching.pack([switched(one) for one in batching.unpack(data)])))
        else:
            out.append((index, switched(data)))
    return out


def _written() -> int:
    """Bytes this process has written through system calls (``/proc/self/io``'s wchar)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))


def replay(path: str, rounds: int, skip: int, fmt: int | None = None, count: int | None = None) -> int:
    with open(path, "rb") as f:
        entries: list[tuple[int, bytes]] = marshal.load(f)
    if count is not None:
        if count < 1:
            print(f"--entries {count}: replay at least one entry", file=sys.stderr)
            return 2
        entries = entries[:count]
    if fmt is not None:
        if not 1 <= fmt <= c.FORMAT_VERSION:
            print(f"--format {fmt}: this code applies command formats 1 to {c.FORMAT_VERSION}", file=sys.stderr)
            return 2
        entries = as_format(entries, fmt)
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    results = []
    try:
        for _ in range(rounds):
            used, wrote = resource.getrusage(resource.RUSAGE_SELF), _written()
            spent, finished = replay_once(entries, skip)
            now = resource.getrusage(resource.RUSAGE_SELF)
            results.append((spent, finished, now.ru_utime - used.ru_utime, now.ru_stime - used.ru_stime, _written() - wrote))
    finally:
        gc.set_threshold(*before)
    spent, finished, user, system, wrote = min(results)
    if not finished:
        print(f"no run finished in the {max(0, len(entries) - skip)} entries replayed: nothing to divide by", file=sys.stderr)
        return 1
    print(f"replay  {len(entries) - skip} entries, {finished} runs finished: {spent / finished * 1e6:.1f} us/run "
          f"(apply, commit and events; best of {rounds}, node gc)")  # fmt: skip
    # the whole replay's (the skipped entries and the fresh store's set-up too), per run of the best round
    print(f"  that round: user {user / finished * 1e6:.1f} us, system {system / finished * 1e6:.1f} us, "
          f"{wrote / finished:.0f} bytes written per run")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    rec = sub.add_parser("record", help="run the load, print node CPU per run, save n1's log")
    rec.add_argument("--seconds", type=float, default=30.0)
    rec.add_argument("--jobs", type=int, default=2000)
    rec.add_argument("--out", default="replay.log")
    rec.add_argument("--history-limit", type=int, default=10, help="finished runs each job keeps")
    rep = sub.add_parser("replay", help="apply a saved log to a fresh state machine on LMDB")
    rep.add_argument("log")
    rep.add_argument("--rounds", type=int, default=3)
    rep.add_argument("--skip", type=int, default=40, help="entries left out of the figure (the jobs' creation)")
    rep.add_argument("--format", type=int, default=None, help="replay every command format switch as one to this format")
    rep.add_argument("--entries", type=int, default=None, help="replay only the log's first N entries (instruction counts)")
    args = parser.parse_args(argv)
    if args.what == "record":
        return record(args.seconds, args.jobs, args.out, args.history_limit)
    return replay(args.log, args.rounds, args.skip, args.format, args.entries)


if __name__ == "__main__":
    sys.exit(main())
