"""What fsync of the Raft log costs: 3 RaftNode processes on loopback, the same run with ``journal_fsync`` on and off.

    python scripts/bench/micro/raft_fsync_cost.py [--seconds 5] [--dir DIR]

For each setting it prints commits/s with up to 20,000 200-byte proposals
in flight (each its own entry, as the bench's raw Raft ceiling), the p50 and
p99 of one proposal at a time (200 in a row), and how many log commits
(syncs, with fsync on) the leader and a follower made per second: group
commit makes that a fraction of the entries. Data lives under ``--dir``
(default: a temp dir; fsync cost depends on the disk under it). The scripts
used by the bench wire this in later; runtime code never imports it.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, BinaryIO

from raftsched.raft.snapshotter import BytesCopy


class _Counter:
    def __init__(self) -> None:
        self.n = 0

    committed_index = 0

    def apply(self, data: bytes, index: int, pos: int) -> int:
        self.n += 1
        return self.n

    def commit(self) -> None:
        pass

    def open_copy(self) -> BytesCopy:
        return BytesCopy(b"")

    def install(self, source: BinaryIO, size: int) -> None:
        source.read(size)

    def restore(self, data: bytes) -> None:
        pass

    def has_room(self) -> bool:
        return True

    def full_message(self) -> str:
        return ""


def _node(addr: str, peers: list[str], root: str, fsync: bool, seconds: float, results: Any, stop: Any) -> None:
    import logging

    from raftsched.raft import lmdb_journal
    from raftsched.raft.adapter import RaftNode, RaftSettings

    # pysyncobj warns of this under saturation (the bench counts it as well); it is noise here
    logging.getLogger("pysyncobj.syncobj").addFilter(lambda r: "truncating already-applied" not in r.getMessage())

    commits = [0]
    real_commit = lmdb_journal.LmdbJournal.commit

    def counting_commit(self: Any) -> None:
        if self._txn is not None:
            commits[0] += 1
        real_commit(self)

    lmdb_journal.LmdbJournal.commit = counting_commit  # type: ignore[method-assign]
    d = os.path.join(root, addr.replace(":", "_"))
    settings = RaftSettings(
        self_address=addr,
        peer_addresses=tuple(peers),
        journal_file=os.path.join(d, "raft.lmdb"),
        journal_fsync=fsync,
        dump_file=os.path.join(d, "raft.snapshot"),
        password="a long secret for the measurement",
    )
    node = RaftNode(settings, _Counter(), threading.RLock())
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and node.leader_address() is None:
            time.sleep(0.05)
        time.sleep(1.0)
        if not node.is_leader():
            c0 = commits[0]
            stop.wait(120)
            results.put({"role": "follower", "commits": commits[0] - c0})
            return
        results.put(_measure(node, seconds, commits))
        stop.wait(5)
    finally:
        node.stop()


def _measure(node: Any, seconds: float, commits: list[int]) -> dict[str, Any]:
    payload = os.urandom(100).hex().encode()
    sem = threading.BoundedSemaphore(20_000)
    done: list[float] = []

    def cb(_res: Any, err: int) -> None:
        if err == 0:
            done.append(time.monotonic())
        sem.release()

    start = time.monotonic()
    warm = start + 1.0
    end = warm + seconds
    c_warm = None
    while time.monotonic() < end:
        if c_warm is None and time.monotonic() >= warm:
            c_warm = commits[0]
        sem.acquire()
        node.propose_async(payload, cb)
    leader_commits = commits[0] - (c_warm or 0)
    time.sleep(1.0)
    committed = sum(1 for t in done if warm <= t < end)
    latencies = []
    for _ in range(200):
        t0 = time.monotonic()
        node.propose(payload, timeout=5)
        latencies.append((time.monotonic() - t0) * 1000)
    latencies.sort()
    return {
        "role": "leader",
        "commits_per_s": committed / seconds,
        "leader_log_commits_per_s": leader_commits / seconds,
        "p50_ms": statistics.median(latencies),
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1],
    }


def run(fsync: bool, seconds: float, root: str) -> dict[str, Any]:
    from raftsched.cluster.app.local_cluster import free_ports

    addrs = [f"127.0.0.1:{p}" for p in free_ports(3)]
    ctx = mp.get_context("spawn")
    results, stop = ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(target=_node, args=(a, [x for x in addrs if x != a], root, fsync, seconds, results, stop), daemon=True)
        for a in addrs
    ]
    for p in procs:
        p.start()
    leader = results.get(timeout=90 + seconds)
    while leader["role"] != "leader":
        leader = results.get(timeout=90 + seconds)
    stop.set()
    followers = [results.get(timeout=30) for _ in range(2)]
    for p in procs:
        p.join(30)
    measured = seconds + 1.0 + 1.0 + 200 * leader["p50_ms"] / 1000  # what the followers' count spans, roughly
    leader["follower_log_commits_per_s"] = max(f["commits"] for f in followers if f["role"] == "follower") / measured
    return leader


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--dir", default="")
    args = ap.parse_args()
    for fsync in (True, False):
        root = tempfile.mkdtemp(prefix="raft-fsync-", dir=args.dir or None)
        r = run(fsync, args.seconds, root)
        print(
            f"fsync {'on ' if fsync else 'off'}: {r['commits_per_s']:8.0f} commits/s "
            f"(leader log commits {r['leader_log_commits_per_s']:.0f}/s, a follower's about "
            f"{r['follower_log_commits_per_s']:.0f}/s); one at a time p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
