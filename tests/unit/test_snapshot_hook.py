"""The Raft adapter's snapshot hook (what ``raftsched_snapshot_seconds`` is fed from): called with the
index and the seconds a snapshot took, for one written on the tick thread and for one written by a
forked child (run in a subprocess of its own, as a node does it)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from raft.snapshotter import Snapshotter

pytestmark = pytest.mark.unit

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RAFT_DATA = ((b"cmd", 7, 1), (b"cmd", 6, 1), ["a:1"])


def test_a_snapshot_written_on_the_tick_thread_calls_the_hook(tmp_path: Path) -> None:
    seen: list[tuple[int, float]] = []
    snap = Snapshotter(str(tmp_path / "raft.snapshot"), lambda: time.sleep(0.05) or b"state", fork=False)
    snap.on_written = lambda index, seconds: seen.append((index, seconds))
    snap.serialize(str(tmp_path / "raft.snapshot.tmp"), RAFT_DATA)
    assert len(seen) == 1 and seen[0][0] == 7 and seen[0][1] >= 0.05


def test_a_failing_hook_does_not_fail_the_snapshot(tmp_path: Path) -> None:
    snap = Snapshotter(str(tmp_path / "raft.snapshot"), lambda: b"state", fork=False)

    def boom(index: int, seconds: float) -> None:
        raise RuntimeError("hook bug")

    snap.on_written = boom
    snap.serialize(str(tmp_path / "raft.snapshot.tmp"), RAFT_DATA)
    assert snap.last_index == 7 and os.path.exists(tmp_path / "raft.snapshot.tmp")


FORKED = textwrap.dedent(
    """
    import sys, time
    from pysyncobj.config import SERIALIZER_STATE
    from raft.snapshotter import Snapshotter

    dump = sys.argv[1]
    open(dump, "wb").write(b"an older dump")  # with a dump to link, a child writes the snapshot
    seen = []
    snap = Snapshotter(dump, lambda: time.sleep(0.2) or b"state")
    snap.on_written = lambda index, seconds: seen.append((index, seconds))
    snap.serialize(dump + ".tmp", ((b"cmd", 9, 1), (b"cmd", 8, 1), ["a:1"]))
    assert not seen  # not written yet: the child is at work
    deadline = time.monotonic() + 30
    while snap.check() != SERIALIZER_STATE.SUCCESS and time.monotonic() < deadline:
        time.sleep(0.02)
    print(seen)
    """
)


def test_a_snapshot_written_by_a_forked_child_calls_the_hook_once_it_is_in_place(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", FORKED, str(tmp_path / "raft.snapshot")], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    seen = ast.literal_eval(out.stdout.strip())
    assert len(seen) == 1 and seen[0][0] == 9 and seen[0][1] >= 0.2
