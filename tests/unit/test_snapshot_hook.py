"""The background snapshot writer (``raftsched.raft.snapshotter``): a pinned copy of the state, written by a thread while
the tick thread goes on; the dump is replaced only once the file is whole; the hook
(``raftsched_snapshot_seconds``) is called with the index and the seconds it took."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pysyncobj.config import SERIALIZER_STATE
from pysyncobj.serializer import Serializer

from raftsched.raft import pysyncobj_patches
from raftsched.raft.snapshot_file import SnapshotError, check_body, open_body, read_snapshot, write_snapshot_file
from raftsched.raft.snapshotter import BytesCopy, Snapshotter
from raftsched.storage.disk import io_priority
from raftsched.storage.disk.durable_files import OLD_MARK, removals_done

pytestmark = pytest.mark.unit

RAFT_DATA = ((b"cmd", 7, 1), (b"cmd", 6, 1), ["a:1"])


class SlowCopy(BytesCopy):
    """A copy that takes its time, and says when it started (the state was pinned before)."""

    def __init__(self, data: bytes, seconds: float, fail: bool = False) -> None:
        super().__init__(data)
        self.seconds, self.fail = seconds, fail
        self.started = threading.Event()
        self.closed = False
        self.io_priority: int | None = None

    def write_to(self, fd: int) -> None:
        self.io_priority = io_priority.get()
        self.started.set()
        time.sleep(self.seconds)
        if self.fail:
            raise OSError("disk on fire")
        super().write_to(fd)

    def close(self) -> None:
        self.closed = True


def _until_done(snap: Snapshotter, timeout: float = 10) -> int:
    deadline = time.monotonic() + timeout
    while (state := snap.check()) == SERIALIZER_STATE.SERIALIZING and time.monotonic() < deadline:
        time.sleep(0.01)
    return state


def test_the_copy_is_written_in_the_background_and_put_in_place_when_whole(tmp_path: Path) -> None:
    dump = str(tmp_path / "raft.snapshot")
    copy = SlowCopy(b"the state at 7" * 1000, 0.3)
    seen: list[tuple[int, float]] = []
    snap = Snapshotter(dump, lambda: copy)
    snap.on_written = lambda index, seconds: seen.append((index, seconds))
    started = time.monotonic()
    snap.serialize(dump + ".tmp", RAFT_DATA)
    assert time.monotonic() - started < 0.1 and snap.last_pause_seconds < 0.1  # the tick thread goes on
    assert not os.path.exists(dump + ".tmp")  # nothing for pysyncobj's rename to move
    pysyncobj_patches.install()
    pysyncobj_patches._atomic_replace(dump + ".tmp", dump)  # what pysyncobj does next: nothing, no file
    assert copy.started.wait(5) and snap.check() == SERIALIZER_STATE.SERIALIZING and not os.path.exists(dump)
    assert _until_done(snap) == SERIALIZER_STATE.SUCCESS
    assert copy.closed and not os.path.exists(dump + ".next")
    header = read_snapshot(dump)
    assert (header.index, header.term, header.cluster, header.body_size) == (7, 1, ["a:1"], len(b"the state at 7" * 1000))
    check_body(dump, header)
    with open_body(dump, header) as body:
        assert body.read(header.body_size) == b"the state at 7" * 1000
    assert len(seen) == 1 and seen[0][0] == 7 and seen[0][1] >= 0.3
    assert snap.last_index == 7 and snap.check() == SERIALIZER_STATE.NOT_SERIALIZING
    assert copy.io_priority == io_priority.CLASS_IDLE << 13  # the copy's reads and writes queue behind the log's


def test_the_dump_replaced_is_freed_in_the_background(tmp_path: Path) -> None:
    dump = str(tmp_path / "raft.snapshot")
    Path(dump).write_bytes(b"the old dump")
    Path(dump + OLD_MARK + "12345").write_bytes(b"left by a crash")
    snap = Snapshotter(dump, lambda: BytesCopy(b"the new state"))
    snap.serialize(dump + ".tmp", RAFT_DATA)
    assert _until_done(snap) == SERIALIZER_STATE.SUCCESS
    assert removals_done(10) and os.listdir(tmp_path) == ["raft.snapshot"]
    header = read_snapshot(dump)
    with open_body(dump, header) as body:
        assert body.read(header.body_size) == b"the new state"


def test_a_failing_hook_does_not_fail_the_snapshot(tmp_path: Path) -> None:
    snap = Snapshotter(str(tmp_path / "raft.snapshot"), lambda: BytesCopy(b"state"))

    def boom(index: int, seconds: float) -> None:
        raise RuntimeError("hook bug")

    snap.on_written = boom
    snap.serialize(str(tmp_path / "raft.snapshot.tmp"), RAFT_DATA)
    assert _until_done(snap) == SERIALIZER_STATE.SUCCESS
    assert snap.last_index == 7 and os.path.exists(tmp_path / "raft.snapshot")


def test_a_failed_copy_keeps_the_old_dump_and_the_log(tmp_path: Path) -> None:
    dump = tmp_path / "raft.snapshot"
    dump.write_bytes(b"the previous snapshot")
    copy = SlowCopy(b"x", 0.0, fail=True)
    snap = Snapshotter(str(dump), lambda: copy)
    snap.serialize(str(dump) + ".tmp", RAFT_DATA)
    assert _until_done(snap) == SERIALIZER_STATE.FAILED  # pysyncobj keeps its log
    assert dump.read_bytes() == b"the previous snapshot" and not os.path.exists(str(dump) + ".next")
    assert copy.closed and snap.last_index == 0


def test_after_a_failed_snapshot_the_next_one_waits_instead_of_failing_every_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pysyncobj asks for a snapshot again at the next tick after a failure: a full disk must not make every tick
    pin the state, start a writer, fail and log (``RETRY_AFTER_FAILURE_S``)."""
    from raftsched.raft import snapshotter

    monkeypatch.setattr(snapshotter, "RETRY_AFTER_FAILURE_S", 0.5)
    dump = tmp_path / "raft.snapshot"
    dump.write_bytes(b"the previous snapshot")
    opened: list[SlowCopy] = []

    def open_copy() -> SlowCopy:
        opened.append(SlowCopy(b"x", 0.0, fail=len(opened) == 0))
        return opened[-1]

    snap = Snapshotter(str(dump), open_copy)
    snap.serialize(str(dump) + ".tmp", RAFT_DATA)
    assert _until_done(snap) == SERIALIZER_STATE.FAILED
    began = time.monotonic()
    snap.serialize(str(dump) + ".tmp", RAFT_DATA)  # asked again at once: nothing is pinned nor written
    assert len(opened) == 1 and snap.check() == SERIALIZER_STATE.SERIALIZING
    assert _until_done(snap) == SERIALIZER_STATE.FAILED and time.monotonic() - began >= 0.4
    snap.serialize(str(dump) + ".tmp", RAFT_DATA)  # then it is tried for real, and succeeds
    assert _until_done(snap) == SERIALIZER_STATE.SUCCESS and len(opened) == 2
    assert read_snapshot(str(dump)).index == 7


def test_an_abandoned_snapshot_is_dropped(tmp_path: Path) -> None:
    dump = tmp_path / "raft.snapshot"
    copy = SlowCopy(b"state", 0.2)
    snap = Snapshotter(str(dump), lambda: copy)
    snap.serialize(str(dump) + ".tmp", RAFT_DATA)
    assert copy.started.wait(5)
    snap.abandon()  # a snapshot from the leader is about to replace the state
    assert not os.path.exists(str(dump) + ".next")
    assert snap.check() == SERIALIZER_STATE.FAILED and not dump.exists()


def test_a_new_snapshot_waits_until_the_followers_have_the_entries_it_covers(tmp_path: Path) -> None:
    dump = tmp_path / "raft.snapshot"
    dump.write_bytes(b"the previous snapshot")
    behind = {"yes": True}
    asked: list[int] = []
    snap = Snapshotter(str(dump), lambda: BytesCopy(b"state at 7"))
    snap.behind = lambda index: asked.append(index) or behind["yes"]
    snap.serialize(str(dump) + ".tmp", RAFT_DATA)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not os.path.exists(str(dump) + ".next"):
        time.sleep(0.01)
    for _ in range(20):  # written, but a follower still needs what it covers: the log stays whole
        assert snap.check() == SERIALIZER_STATE.SERIALIZING
        time.sleep(0.01)
    assert dump.read_bytes() == b"the previous snapshot" and asked and set(asked) == {7}
    behind["yes"] = False
    assert snap.check() == SERIALIZER_STATE.SUCCESS
    assert read_snapshot(str(dump)).index == 7


def test_a_received_snapshot_replaces_the_dump_only_when_whole(tmp_path: Path) -> None:
    pysyncobj_patches.install()
    dump = tmp_path / "raft.snapshot"
    dump.write_bytes(b"this node's own snapshot")
    received = str(dump) + ".1.tmp"
    write_snapshot_file(received, RAFT_DATA, BytesCopy(b"x" * 100_000).write_to)
    data = bytearray(Path(received).read_bytes())
    data[-10] ^= 0xFF
    Path(received).write_bytes(bytes(data))
    with pytest.raises(SnapshotError, match="checksum mismatch"):
        pysyncobj_patches._atomic_replace(received, str(dump))  # pysyncobj then drops it and the leader sends again
    assert dump.read_bytes() == b"this node's own snapshot"
    write_snapshot_file(received, RAFT_DATA, BytesCopy(b"x" * 100_000).write_to)
    pysyncobj_patches._atomic_replace(received, str(dump))
    assert read_snapshot(str(dump)).body_size == 100_000 and not os.path.exists(received)


def _send_dump(leader: Any, follower: Any, lose: int = 0) -> bool:
    """Hand the leader's dump to the follower piece by piece, as pysyncobj does; piece ``lose`` (1-based) is lost
    on the way. What the follower's last ``setTransmissionData`` answered."""
    n = 0
    while True:
        piece = leader.getTransmissionData("follower")
        n += 1
        if n == lose:
            continue
        installed = follower.setTransmissionData(piece)
        if piece[2]:
            return bool(installed)


def test_a_piece_lost_on_the_way_drops_the_transfer_and_the_next_one_installs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pysyncobj_patches.install()
    (tmp_path / "leader").mkdir()
    (tmp_path / "follower").mkdir()
    dump = str(tmp_path / "leader" / "raft.snapshot")
    write_snapshot_file(dump, RAFT_DATA, BytesCopy(os.urandom(20_000)).write_to)
    theirs = tmp_path / "follower" / "raft.snapshot"
    theirs.write_bytes(b"the follower's own snapshot")
    leader = Serializer(dump, 1024, False, None, None, None)
    follower = Serializer(str(theirs), 1024, False, None, None, None)
    with caplog.at_level("WARNING", logger="raftsched.raft"):
        assert _send_dump(leader, follower, lose=5) is False
    assert "byte 5120 came, 4096 was due" in caplog.text  # said once, at the gap, not for every piece after it
    assert caplog.text.count("was lost on the way") == 1
    assert theirs.read_bytes() == b"the follower's own snapshot"
    assert _send_dump(leader, follower) is True  # the leader starts over: the whole file arrives
    assert theirs.read_bytes() == Path(dump).read_bytes()


def test_pieces_of_an_older_leader_pass_unchecked(tmp_path: Path) -> None:
    """A leader of the version before pieces carried their offsets sends bare pieces: they are written as they come."""
    pysyncobj_patches.install()
    dump = tmp_path / "leader.snapshot"
    write_snapshot_file(str(dump), RAFT_DATA, BytesCopy(os.urandom(5_000)).write_to)
    theirs = tmp_path / "raft.snapshot"
    follower = Serializer(str(theirs), 1024, False, None, None, None)
    data = dump.read_bytes()
    pieces = [data[i : i + 1024] for i in range(0, len(data), 1024)] + [b""]
    answers = [follower.setTransmissionData((p, i == 0, p == b"")) for i, p in enumerate(pieces)]
    assert answers[-1] is True and not any(answers[:-1])
    assert theirs.read_bytes() == data


def test_a_dropped_connection_starts_the_transfer_over(tmp_path: Path) -> None:
    """pysyncobj would go on from the piece after the one lost with the connection; the leader starts over."""
    pysyncobj_patches.install()
    dump = str(tmp_path / "raft.snapshot")
    write_snapshot_file(dump, RAFT_DATA, BytesCopy(os.urandom(5_000)).write_to)
    leader = Serializer(dump, 1024, False, None, None, None)

    class Transport:
        _onNodeDisconnectedCallback: Any = None

        def setOnNodeDisconnectedCallback(self, callback: Any) -> None:
            self._onNodeDisconnectedCallback = callback

    seen: list[str] = []
    transport = Transport()
    transport.setOnNodeDisconnectedCallback(seen.append)  # pysyncobj's own (drops the node from its connected set)
    replica = type("Replica", (), {"_SyncObj__transport": transport, "_SyncObj__serializer": leader})()
    pysyncobj_patches.cancel_transfers_on_disconnect(replica)
    assert leader.getTransmissionData("n2")[1] is True and leader.getTransmissionData("n2")[1] is False
    transport._onNodeDisconnectedCallback("n2")
    assert seen == ["n2"]  # pysyncobj still hears of it
    assert leader.getTransmissionData("n2")[1] is True  # the next piece is the first again


def test_a_follower_sent_the_dump_is_waited_for_until_it_answers_past_it(tmp_path: Path) -> None:
    """A follower installing a large snapshot answers nothing for seconds and the leader drops its connection:
    the leader still keeps the log after the dump it sent, until the follower's log matches past it."""
    from raftsched.raft.adapter import INSTALL_GRACE_S, RaftNode

    pysyncobj_patches.install()
    dump = str(tmp_path / "raft.snapshot")
    write_snapshot_file(dump, RAFT_DATA, BytesCopy(os.urandom(3_000)).write_to)
    leader = Serializer(dump, 1024, False, None, None, None)
    while not leader.getTransmissionData("n2")[2]:  # the whole dump, to its last piece
        pass
    assert not leader._Serializer__transmissions  # pysyncobj forgets a transfer once its last piece is out
    replica = type(
        "Replica",
        (),
        {
            "_isLeader": lambda self: True,
            "_SyncObj__serializer": leader,
            "_SyncObj__raftMatchIndex": {"n2": 0, "n3": 500},
            "_SyncObj__connectedNodes": {"n3"},  # n2 is installing: disconnected
        },
    )()
    node = RaftNode.__new__(RaftNode)
    node._replica = replica
    assert node._followers_behind(400) is True  # n2 has not answered past the dump it was sent
    replica._SyncObj__raftMatchIndex["n2"] = 450
    assert node._followers_behind(400) is False  # it has: compact away
    replica._SyncObj__raftMatchIndex["n2"] = 0
    leader._raftsched_sent_at["n2"] -= INSTALL_GRACE_S + 1
    assert node._followers_behind(400) is False  # sent too long ago: a follower that never came back holds nothing
    assert pysyncobj_patches.dump_sent_within(leader, INSTALL_GRACE_S) == []


def test_a_follower_that_cannot_write_its_disk_is_not_waited_for() -> None:
    """It takes nothing until room returns: holding the leader's compaction for it would only grow the leader's log."""
    from raftsched.raft.adapter import RaftNode
    from raftsched.raft.peer_probe import DISK, PeerProbes

    replica = type(
        "Replica",
        (),
        {
            "_isLeader": lambda self: True,
            "_SyncObj__serializer": Serializer(None, 1024, False, None, None, None),
            "_SyncObj__raftMatchIndex": {"n2": 55, "n3": 500},
            "_SyncObj__connectedNodes": {"n2", "n3"},
        },
    )()
    now = [100.0]
    node = RaftNode.__new__(RaftNode)
    node._replica = replica
    node.peer_probes = PeerProbes(monotonic=lambda: now[0])
    assert node._followers_behind(400) is True  # n2 is behind, connected, and says nothing of its disk
    node.peer_probes.on_message("n2", {"type": "raftsched.probe", "r": {DISK: "disk full: /d/n2/raft.lmdb"}}, None, 2)
    assert node._followers_behind(400) is False
    now[0] += 5  # what it said is stale: it may be catching up again
    assert node._followers_behind(400) is True


def test_a_node_sent_the_dump_counts_as_matching_nothing_until_it_answers(tmp_path: Path) -> None:
    """pysyncobj only raises match indexes: a wiped node kept the one from before, so the leader took it for
    caught up (and compacted the entries after the dump it was installing) and could count it towards a
    majority for entries it no longer had."""
    pysyncobj_patches.install()
    dump = str(tmp_path / "raft.snapshot")
    write_snapshot_file(dump, RAFT_DATA, BytesCopy(os.urandom(3_000)).write_to)
    leader = Serializer(dump, 1024, False, None, None, None)
    matched = {"n2": 39_000, "n3": 39_100}  # n2 matched 39,000 before it was wiped
    replica = type("Replica", (), {"_SyncObj__serializer": leader, "_SyncObj__raftMatchIndex": matched})()
    pysyncobj_patches.forget_match_on_dump_sent(replica)
    leader.getTransmissionData("n2")
    assert matched == {"n2": 0, "n3": 39_100}
    matched["n2"] = 7  # it answered after its install
    leader.getTransmissionData("n2")  # the next piece of the same transfer changes nothing
    assert matched == {"n2": 7, "n3": 39_100}
