"""Replacing a file without freeing the old one on the caller's thread (``raftsched.storage.disk.durable_files``), and the idle
I/O class the snapshot writer runs in (``raftsched.storage.disk.io_priority``)."""

from __future__ import annotations

import os
import platform
import threading
from pathlib import Path

import pytest

from raftsched.storage.disk import durable_files as df
from raftsched.storage.disk import io_priority

pytestmark = pytest.mark.unit


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def test_the_old_file_is_freed_by_the_background_remover_not_the_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dst, src = tmp_path / "raft.snapshot", tmp_path / "raft.snapshot.next"
    _write(dst, b"old" * 1000)
    _write(src, b"new")
    unlinked_by: list[tuple[str, str]] = []
    real_unlink = os.unlink

    def watched_unlink(path: str, *args: object, **kwargs: object) -> None:
        unlinked_by.append((os.path.basename(str(path)), threading.current_thread().name))
        real_unlink(path)

    monkeypatch.setattr(os, "unlink", watched_unlink)
    old_inode = dst.stat().st_ino
    df.durable_replace(str(src), str(dst), free_old_later=True)
    assert dst.read_bytes() == b"new" and not src.exists()
    assert oct(dst.stat().st_mode & 0o777) == oct(df.FILE_MODE)
    assert df.removals_done(10)
    assert os.listdir(tmp_path) == ["raft.snapshot"]  # the old one is gone, nothing else left
    [(name, thread)] = unlinked_by
    assert name.startswith("raft.snapshot" + df.OLD_MARK) and thread == "old-file-remover"
    assert thread != threading.current_thread().name and dst.stat().st_ino != old_inode


def test_nothing_to_free_when_the_destination_is_new(tmp_path: Path) -> None:
    src = tmp_path / "a.next"
    _write(src, b"first")
    df.durable_replace(str(src), str(tmp_path / "a"), free_old_later=True)
    assert df.removals_done(10) and os.listdir(tmp_path) == ["a"] and (tmp_path / "a").read_bytes() == b"first"


def test_without_hard_links_the_old_file_is_freed_by_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dst, src = tmp_path / "state.mdb", tmp_path / "state.mdb.new"
    _write(dst, b"old")
    _write(src, b"new")

    def no_links(a: str, b: str) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    df.replace_freeing_later(str(src), str(dst))
    assert df.removals_done(10) and os.listdir(tmp_path) == ["state.mdb"] and dst.read_bytes() == b"new"


def test_old_files_a_crash_left_are_swept_and_nothing_else(tmp_path: Path) -> None:
    keep = ["raft.snapshot", "raft.snapshot.next", "raft.snapshot.old-notanumber", "state.mdb.old-123", "raft.snapshotx.old-5"]
    doomed = ["raft.snapshot.old-1795756388000000000", "raft.snapshot.old-7"]
    for name in keep + doomed:
        _write(tmp_path / name, b"x")
    df.sweep_old(str(tmp_path / "raft.snapshot"))
    assert df.removals_done(10)
    assert sorted(os.listdir(tmp_path)) == sorted(keep)
    df.sweep_old(str(tmp_path / "missing-dir" / "raft.snapshot"))  # no folder: nothing to do, no error


@pytest.mark.skipif(platform.system() != "Linux", reason="I/O classes are Linux's")
def test_a_thread_set_idle_keeps_it_and_threads_it_starts_inherit_it() -> None:
    seen: dict[str, int | None] = {}

    def child() -> None:
        seen["child"] = io_priority.get()

    def parent() -> None:
        seen["took"] = int(io_priority.set_idle())
        seen["parent"] = io_priority.get()
        t = threading.Thread(target=child)
        t.start()
        t.join()

    t = threading.Thread(target=parent)
    t.start()
    t.join()
    idle = io_priority.CLASS_IDLE << 13
    assert seen == {"took": 1, "parent": idle, "child": idle}
    assert io_priority.get() != idle  # only that thread: the caller keeps its class


def _cuts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real = os.ftruncate
    monkeypatch.setattr(df.os, "ftruncate", lambda fd, size: (sizes.append(size), real(fd, size)))
    return sizes


def test_a_big_replaced_file_is_cut_down_in_steps_before_it_is_unlinked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cuts = _cuts(monkeypatch)
    old = tmp_path / "raft.snapshot.old-1"
    _write(old, os.urandom(10 << 20))
    df.free_gradually(str(old), step=3 << 20, pause_s=0)
    assert cuts == [7 << 20, 4 << 20, 1 << 20, 0]  # no single fsync carries the whole free
    assert not old.exists()


def test_a_file_still_open_here_or_linked_elsewhere_is_only_unlinked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cuts = _cuts(monkeypatch)
    data = os.urandom(4 << 20)
    sent = tmp_path / "raft.snapshot.old-1"  # a transfer of the old dump still reads it
    _write(sent, data)
    with open(sent, "rb") as reader:
        df.free_gradually(str(sent), step=1 << 20, pause_s=0)
        assert not sent.exists() and reader.read() == data  # the reader keeps all of it
    linked = tmp_path / "state.mdb.old-2"  # someone else's hard link (a backup, say) must keep its data
    _write(linked, data)
    os.link(linked, tmp_path / "kept-elsewhere")
    df.free_gradually(str(linked), step=1 << 20, pause_s=0)
    assert cuts == [] and not linked.exists() and (tmp_path / "kept-elsewhere").read_bytes() == data
