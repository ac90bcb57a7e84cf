"""Snapshot writers sharing a lock file (the nodes of one data dir, on one disk) write one at a time; a writer
waiting for its turn can be called off; the kernel frees a turn whose holder was SIGKILLed."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pysyncobj.config import SERIALIZER_STATE

from raftsched.raft import snapshot_turns
from raftsched.raft.snapshot_file import read_snapshot
from raftsched.raft.snapshot_turns import Cancelled, turn
from raftsched.raft.snapshotter import Snapshotter
from tests.unit.test_snapshot_hook import RAFT_DATA, SlowCopy, _until_done

pytestmark = pytest.mark.unit


class TimedCopy(SlowCopy):
    """Records when its writing began and ended."""

    def __init__(self, data: bytes, seconds: float) -> None:
        super().__init__(data, seconds)
        self.span: tuple[float, float] | None = None

    def write_to(self, fd: int) -> None:
        began = time.monotonic()
        super().write_to(fd)
        self.span = (began, time.monotonic())


def test_nodes_sharing_a_lock_write_their_snapshots_one_after_the_other(tmp_path: Path) -> None:
    lock = str(tmp_path / snapshot_turns.LOCK_NAME)
    copies = [TimedCopy(b"state of n%d" % i * 100, 0.4) for i in range(3)]
    snaps = []
    for i, copy in enumerate(copies):
        (tmp_path / f"n{i}").mkdir()
        snaps.append(Snapshotter(str(tmp_path / f"n{i}" / "raft.snapshot"), lambda c=copy: c, lock))
    for snap in snaps:  # every node reaches the threshold at the same index, in the same moment
        snap.serialize("unused.tmp", RAFT_DATA)
    assert [_until_done(s) for s in snaps] == [SERIALIZER_STATE.SUCCESS] * 3
    spans = sorted(c.span for c in copies if c.span is not None)
    assert len(spans) == 3
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), f"two copies overlapped: {spans}"
    assert sorted(round(s.last_wait_seconds, 1) >= 0.3 for s in snaps) == [False, True, True]  # two waited
    for i, snap in enumerate(snaps):
        assert read_snapshot(snap.dump_file).index == 7


def test_without_a_lock_the_writers_do_not_wait(tmp_path: Path) -> None:
    copies = [TimedCopy(b"x" * 100, 0.4) for _ in range(2)]
    snaps = [Snapshotter(str(tmp_path / f"d{i}"), lambda c=c: c) for i, c in enumerate(copies)]
    for snap in snaps:
        snap.serialize("unused.tmp", RAFT_DATA)
    assert [_until_done(s) for s in snaps] == [SERIALIZER_STATE.SUCCESS] * 2
    (a, b) = sorted(c.span for c in copies if c.span is not None)
    assert b[0] < a[1]  # at the same time
    assert [s.last_wait_seconds for s in snaps] == [0.0, 0.0]


def test_a_writer_waiting_for_its_turn_is_abandoned_at_once(tmp_path: Path) -> None:
    lock = str(tmp_path / snapshot_turns.LOCK_NAME)
    holder = Snapshotter(str(tmp_path / "holder"), lambda: SlowCopy(b"x", 1.5), lock)
    waiter_copy = SlowCopy(b"y", 0.0)
    waiter = Snapshotter(str(tmp_path / "waiter"), lambda: waiter_copy, lock)
    holder.serialize("unused.tmp", RAFT_DATA)
    time.sleep(0.2)
    waiter.serialize("unused.tmp", RAFT_DATA)
    time.sleep(0.2)
    began = time.monotonic()
    waiter.abandon()  # a snapshot from the leader is about to be installed (tick thread)
    assert time.monotonic() - began < 1.0, "abandon waited for the other node's snapshot"
    assert waiter.check() == SERIALIZER_STATE.FAILED
    assert not waiter_copy.started.is_set() and waiter_copy.closed  # nothing written; the pinned state let go
    assert not Path(waiter.next_path).exists()
    holder.abandon()


def test_a_turn_held_by_a_process_killed_with_sigkill_is_free_again(tmp_path: Path) -> None:
    lock = str(tmp_path / snapshot_turns.LOCK_NAME)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({lock!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        stop = threading.Event()
        threading.Timer(0.3, stop.set).start()
        with pytest.raises(Cancelled):
            with turn(lock, stop.is_set):
                pass
        holder.kill()  # SIGKILL
        holder.wait(10)
        with turn(lock) as waited:
            assert waited < 5
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)


def test_a_lock_that_cannot_be_opened_means_no_turns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="raftsched.raft"), turn(str(tmp_path / "missing-dir" / "lock")) as waited:
        assert waited == 0.0
    assert "snapshots do not take turns" in caplog.text


def test_a_writer_that_just_had_its_turn_comes_after_those_waiting(tmp_path: Path) -> None:
    """Every node reaches the next threshold as soon as its snapshot is in place: the one that just wrote asks
    again at once, and must not win the turn over those that waited (it did, with polling)."""
    lock = str(tmp_path / snapshot_turns.LOCK_NAME)
    order: list[str] = []
    first_in = threading.Event()
    base = [10**6]  # waiter threads left by other tests, counted once a holds its first turn

    def waiting() -> int:
        return sum(t.name == "snapshot-turn" for t in threading.enumerate())

    def writer(name: str, rounds: int) -> None:
        for _ in range(rounds):
            with turn(lock):
                order.append(name)
                first_in.set()
                time.sleep(0.1)
                if len(order) == 1:  # a's first turn: until b and c are both waiting
                    deadline = time.monotonic() + 10
                    while waiting() < base[0] + 2 and time.monotonic() < deadline:
                        time.sleep(0.01)
                    time.sleep(0.1)

    a = threading.Thread(target=writer, args=("a", 2))
    a.start()
    assert first_in.wait(5)
    base[0] = waiting()
    others = [threading.Thread(target=writer, args=(name, 1)) for name in ("b", "c")]
    for t in others:
        t.start()
    for t in [a, *others]:
        t.join(10)
    # the turn a let go of went to one of those already waiting (after that, a waits among them)
    assert order[0] == "a" and order[1] in ("b", "c") and sorted(order) == ["a", "a", "b", "c"], order
