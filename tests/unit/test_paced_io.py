"""Big files beside a Raft log: written in synced pieces (never gigabytes dirty at once), read ahead of the
tick thread that sends them (``raftsched.storage.disk.paced_io``, and where pysyncobj's snapshot transfer uses it)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from pysyncobj.serializer import Serializer

from raftsched.raft import pysyncobj_patches
from raftsched.raft.snapshot_file import write_snapshot_file
from raftsched.raft.snapshotter import BytesCopy
from raftsched.storage.disk import paced_io
from raftsched.storage.disk.paced_io import PacedWrites, ReadAhead

pytestmark = pytest.mark.unit

RAFT_DATA = ((b"cmd", 7, 1), (b"cmd", 6, 1), ["a:1"])
MiB = 1 << 20


class Syncs:
    """Records each fdatasync with how much was written and not yet synced when it came, and each DONTNEED."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.unsynced_at_sync: list[int] = []
        self.dropped: list[tuple[int, int]] = []
        self.sizes: dict[int, int] = {}
        real_sync = os.fdatasync
        real_advise = os.posix_fadvise

        def fdatasync(fd: int) -> None:
            size = os.fstat(fd).st_size
            self.unsynced_at_sync.append(size - self.sizes.get(fd, 0))
            self.sizes[fd] = size
            real_sync(fd)

        def posix_fadvise(fd: int, offset: int, length: int, advice: int) -> None:
            if advice == os.POSIX_FADV_DONTNEED:
                self.dropped.append((offset, length))
            real_advise(fd, offset, length, advice)

        monkeypatch.setattr(paced_io.os, "fdatasync", fdatasync)
        monkeypatch.setattr(paced_io.os, "posix_fadvise", posix_fadvise)


def test_writes_are_synced_every_piece_and_never_pile_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    syncs = Syncs(monkeypatch)
    fd = os.open(tmp_path / "big", os.O_WRONLY | os.O_CREAT, 0o600)
    paced = PacedWrites(sync_every=256 << 10, max_yield_s=0)
    for _ in range(40):
        os.write(fd, b"x" * (64 << 10))
        paced.wrote(fd, 64 << 10)
    os.close(fd)
    assert paced.syncs == 10 and syncs.unsynced_at_sync == [256 << 10] * 10
    assert syncs.dropped == []  # kept in the page cache unless asked


def test_a_snapshot_drops_what_it_synced_from_the_cache_at_the_right_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    syncs = Syncs(monkeypatch)
    body = os.urandom(3 * MiB)
    size = write_snapshot_file(str(tmp_path / "snap"), RAFT_DATA, BytesCopy(body).write_to, sync_every=MiB)
    start = size - len(body)  # the body begins after the header, aligned
    assert syncs.dropped == [(start, MiB), (start + MiB, MiB), (start + 2 * MiB, MiB)]
    assert syncs.unsynced_at_sync == [start + MiB, MiB, MiB]  # the first sync also takes the header


def test_the_writer_leaves_the_disk_as_long_as_a_sync_took(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    naps: list[float] = []
    monkeypatch.setattr(paced_io.time, "sleep", naps.append)
    ticks = iter([10.0, 10.3, 20.0, 22.0])
    monkeypatch.setattr(paced_io.time, "monotonic", lambda: next(ticks))
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        paced_io.sync_and_yield(fd, 0, 0, drop=False, max_yield_s=0.5)  # took 0.3 s: yields 0.3 s
        paced_io.sync_and_yield(fd, 0, 0, drop=False, max_yield_s=0.5)  # took 2 s: yields at most 0.5 s
    finally:
        os.close(fd)
    assert naps == pytest.approx([0.3, 0.5])


def _wait(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_read_ahead_stays_a_window_ahead_of_its_consumer_and_ends_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "dump"
    path.write_bytes(os.urandom(10 * MiB))
    consumed = {"at": 0}
    with open(path, "rb") as f:
        ahead = ReadAhead(f.fileno(), lambda: consumed["at"], lambda: True, window=3 * MiB)
    _wait(lambda: ahead.read == 3 * MiB)  # the caller's file may close: the thread reads its own descriptor
    time.sleep(0.1)
    assert ahead.read == 3 * MiB  # not past the window
    consumed["at"] = 5 * MiB
    _wait(lambda: ahead.read == 8 * MiB)
    consumed["at"] = 9 * MiB
    assert ahead.join(10) and ahead.read == 10 * MiB


def test_read_ahead_stops_when_its_transfer_ends(tmp_path: Path) -> None:
    path = tmp_path / "dump"
    path.write_bytes(os.urandom(4 * MiB))
    alive = threading.Event()
    alive.set()
    ahead = ReadAhead(os.open(path, os.O_RDONLY), lambda: 0, alive.is_set, window=MiB)
    _wait(lambda: ahead.read == MiB)
    alive.clear()
    assert ahead.join(10) and ahead.read == MiB


def test_the_leader_reads_the_dump_it_sends_ahead_while_the_transfer_lasts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pysyncobj_patches.install()
    made: list[ReadAhead] = []

    class Narrow(ReadAhead):  # a window far smaller than the dump: it cannot finish before the transfer ends
        def __init__(self, fd: int, consumed: Callable[[], int], alive: Callable[[], bool], **kw: Any) -> None:
            super().__init__(fd, consumed, alive, **{**kw, "window": 256 << 10})
            made.append(self)

    monkeypatch.setattr(pysyncobj_patches, "ReadAhead", Narrow)
    dump = str(tmp_path / "raft.snapshot")
    write_snapshot_file(dump, RAFT_DATA, BytesCopy(os.urandom(2 * MiB)).write_to)
    leader = Serializer(dump, 64 << 10, False, None, None, None)
    before = {t.ident for t in threading.enumerate()}
    assert leader.getTransmissionData("n2")[1] is True
    (reader,) = [t for t in threading.enumerate() if t.ident not in before]
    assert reader.name == "read-ahead-n2"
    (ahead,) = made
    _wait(lambda: ahead.read >= 256 << 10)  # ahead of the one 64 KiB piece sent, up to its window
    assert ahead.read < 2 * MiB and reader.is_alive()
    leader.cancelTransmisstion("n2")  # the connection dropped: the transfer is over
    reader.join(10)
    assert not reader.is_alive() and ahead.read < 2 * MiB


def test_a_received_snapshot_is_written_in_synced_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pysyncobj_patches.install()
    monkeypatch.setattr(pysyncobj_patches, "RECEIVE_SYNC_EVERY", MiB)
    monkeypatch.setattr(pysyncobj_patches, "RECEIVE_MAX_YIELD_S", 0.0)
    syncs = Syncs(monkeypatch)
    (tmp_path / "leader").mkdir()
    (tmp_path / "follower").mkdir()
    dump = str(tmp_path / "leader" / "raft.snapshot")
    write_snapshot_file(dump, RAFT_DATA, BytesCopy(os.urandom(4 * MiB)).write_to)
    syncs.unsynced_at_sync.clear()
    theirs = tmp_path / "follower" / "raft.snapshot"
    leader = Serializer(dump, 64 << 10, False, None, None, None)
    follower = Serializer(str(theirs), 64 << 10, False, None, None, None)
    while True:
        piece = leader.getTransmissionData("n2")
        installed = follower.setTransmissionData(piece)
        if piece[2]:
            break
    assert installed is True and theirs.read_bytes() == Path(dump).read_bytes()
    assert len(syncs.unsynced_at_sync) >= 4 and max(syncs.unsynced_at_sync) <= MiB


def test_a_state_file_written_without_syncs_is_written_back_as_it_goes(tmp_path: Path) -> None:
    """``raftsched.storage.lmdb_state`` commits without fsync: its pages are handed to the disk every ``period_s``
    instead of gathering for a burst. The thread follows the path (an install renames a new file over it)."""
    path = tmp_path / "state.mdb"
    path.write_bytes(b"x" * MiB)
    with open(path, "rb") as f:
        assert paced_io.start_writeback(f.fileno()) is True  # Linux has sync_file_range
    wb = paced_io.Writeback(str(path), period_s=0.02)
    _wait(lambda: wb.rounds >= 3)
    path.unlink()  # being replaced: it goes on once the file is back
    time.sleep(0.1)
    path.write_bytes(b"y")
    seen = wb.rounds
    _wait(lambda: wb.rounds > seen)
    wb.stop()
    assert wb._thread is not None and not wb._thread.is_alive()


def test_the_state_store_writes_back_while_open_and_stops_when_closed(tmp_path: Path) -> None:
    from raftsched.storage.lmdb_state import LmdbTableStore

    store = LmdbTableStore(str(tmp_path / "state.mdb"), 1 << 30)
    writeback = store._writeback
    try:
        assert writeback is not None and writeback._thread is not None  # a boot id here: commits are not synced
        _wait(lambda: writeback.rounds >= 1)
    finally:
        store.close()
    assert not writeback._thread.is_alive()
