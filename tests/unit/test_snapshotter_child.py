"""A background snapshot's child lets go of its node's ports and dies with its node."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NODE = textwrap.dedent(
    """
    import os, socket, sys, time
    from raft.snapshotter import Snapshotter

    dump = sys.argv[1]
    open(dump, "wb").write(b"an older dump")  # with a dump to link, the snapshot is written by a child
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    snap = Snapshotter(dump, lambda: time.sleep(60) or b"state")  # a child that takes its time
    snap.serialize(dump + ".tmp", ((b"cmd", 7, 1), (b"cmd", 6, 1), ["a:1"]))
    print(listener.getsockname()[1], snap._pid, flush=True)
    time.sleep(60)
    """
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_killed_nodes_snapshot_child_frees_its_port_and_dies(tmp_path: Path) -> None:
    orphans: list[int] = []
    node = subprocess.Popen(
        [sys.executable, "-c", NODE, str(tmp_path / "raft.snapshot")], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert node.stdout is not None
        port_s, child_s = node.stdout.readline().split()
        port, child = int(port_s), int(child_s)
        orphans.append(child)
        assert _alive(child)
        os.kill(node.pid, signal.SIGKILL)
        node.wait(10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the snapshot child outlived its node"
        with socket.socket() as again:  # what a restarted node does first
            again.bind(("127.0.0.1", port))
            again.listen()
    finally:
        if node.poll() is None:
            node.kill()
            node.wait()
        for pid in orphans:  # only when the test failed: the child we started, by pid
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
