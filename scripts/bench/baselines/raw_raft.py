"""The raw Raft ceiling: a bare 3-process pysyncobj cluster committing 200-byte commands.

Each process (``raw_raft_node``, spawned) runs a ``SyncObj`` counter with the
conf our nodes use (``raftsched.raft.adapter.build_conf`` of ``RaftSettings``) and, with
``node_journal``, their journal (``raftsched.raft.lmdb_journal.LmdbJournal``), else
pysyncobj's own file journal at the same path. The leader proposes
asynchronously (at most ``IN_FLIGHT`` at once) and reports commits per second;
followers report how often pysyncobj warned about truncating applied entries.
``run_raw_raft`` starts the three, returns the leader's report, and stops
them by pid.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
import signal
import threading
import time
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, replicated

from bench import stats as st
from bench.harness.processes import stop_mp
from bench.profile import Profile
from raftsched.cluster.app.local_cluster import free_ports
from raftsched.raft.adapter import RaftSettings, build_conf
from raftsched.raft.lmdb_journal import LmdbJournal

#: proposals in flight at most on the leader
IN_FLIGHT = 20_000
NODE_JOURNAL = "raftsched.raft.lmdb_journal.LmdbJournal, as the nodes"
FILE_JOURNAL = "pysyncobj file journal"


class Counter(SyncObj):  # type: ignore[misc]
    def __init__(self, self_addr: str, peers: list[str], conf: Any) -> None:
        self.value = 0
        super().__init__(self_addr, peers, conf)

    @replicated
    def incr(self, payload: bytes) -> int:
        self.value += 1
        return self.value


class TruncationCount(logging.Filter):
    """Counts (and hides) pysyncobj's 'truncating already-applied log entries' warnings."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if "truncating already-applied" in record.getMessage():
            self.n += 1
            return False
        return True


def _wait_stable_leader(obj: Counter, stop: Any, timeout: float = 30.0) -> None:
    """Until one leader has been known for 0.5 s (or ``timeout``, or ``stop``)."""
    stable_since = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stop.is_set():
        if obj._getLeader() is None:
            stable_since = None
        elif stable_since is None:
            stable_since = time.monotonic()
        elif time.monotonic() - stable_since > 0.5:
            return
        time.sleep(0.05)


def _measure(obj: Counter, warmup: float, measure: float) -> dict[str, Any]:
    """Propose for ``warmup + measure`` s; commits per second over the measured part."""
    payload = os.urandom(100).hex().encode()  # 200 bytes
    sem = threading.BoundedSemaphore(IN_FLIGHT)
    ok: list[float] = []
    fails: dict[int, int] = {}

    def cb(_res: Any, err: int) -> None:
        if err == FAIL_REASON.SUCCESS:
            ok.append(time.monotonic())
        else:
            fails[err] = fails.get(err, 0) + 1
        sem.release()

    start = time.monotonic()
    end = start + warmup + measure
    proposed = 0
    while time.monotonic() < end:
        sem.acquire()
        obj.incr(payload, callback=cb)
        proposed += 1
    drain = time.monotonic() + 10
    while len(ok) + sum(fails.values()) < proposed and time.monotonic() < drain:
        time.sleep(0.01)
    committed = sum(1 for t in ok if start + warmup <= t < end)
    return {
        "commits_per_s": committed / measure,
        "proposed": proposed,
        "committed_total": len(ok),
        "failed": {str(k): v for k, v in fails.items()},
        "per_second": st.histogram(ok, start, 1.0, end),
    }


def raw_raft_node(
    self_addr: str,
    peers: list[str],
    journal: str,
    dump: str,
    password: str,
    warmup: float,
    measure: float,
    results: Any,
    stop: Any,
    node_journal: bool = True,
) -> None:
    """One process of the bare pysyncobj cluster; the leader proposes and measures."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    truncations = TruncationCount()
    logging.getLogger("pysyncobj.syncobj").addFilter(truncations)
    settings = RaftSettings(
        self_address=self_addr, peer_addresses=tuple(peers), journal_file=journal, dump_file=dump, password=password
    )
    if node_journal:
        conf = build_conf(settings, None, None, None, journal=LmdbJournal(journal, settings.journal_fsync))
    else:
        conf = build_conf(settings, None, None, None)  # a path in journalFile: pysyncobj's FileJournal
    obj = Counter(self_addr, peers, conf)
    try:
        _wait_stable_leader(obj, stop)
        if not obj._isLeader():
            stop.wait(120)
            results.put({"follower": self_addr, "truncations": truncations.n})
            return
        res = _measure(obj, warmup, measure)
        results.put({**res, "leader": self_addr, "journal": NODE_JOURNAL if node_journal else FILE_JOURNAL})
        stop.wait(120)
    finally:
        obj.destroy()


def run_raw_raft(root: str, profile: Profile, node_journal: bool) -> dict[str, Any] | None:
    """One bare 3-process pysyncobj cluster in ``root``; the leader's result (with the followers'
    truncation warnings added), or None when it produced none within 60 s."""
    os.makedirs(root)
    addrs = [f"127.0.0.1:{port}" for port in free_ports(3)]
    password = os.urandom(24).hex()
    ctx = mp.get_context("spawn")
    results, stop = ctx.Queue(), ctx.Event()
    procs = []
    try:
        for i, a in enumerate(addrs):
            peers = [x for x in addrs if x != a]
            journal, dump = os.path.join(root, f"r{i}.journal"), os.path.join(root, f"r{i}.dump")
            args = (a, peers, journal, dump, password, profile.raw_warmup_s, profile.raw_measure_s, results, stop, node_journal)
            proc = ctx.Process(target=raw_raft_node, args=args, daemon=True, name=f"raw-raft-{i}")
            proc.start()
            procs.append(proc)
        try:
            res: dict[str, Any] = results.get(timeout=60 + profile.raw_warmup_s + profile.raw_measure_s)
        except queue.Empty:
            return None
        stop.set()
        truncations = 0
        for _ in range(2):
            try:
                truncations += results.get(timeout=10).get("truncations", 0)
            except queue.Empty:
                pass
        res["follower_truncation_warnings"] = truncations
        return res
    finally:
        stop.set()
        stop_mp(procs)
