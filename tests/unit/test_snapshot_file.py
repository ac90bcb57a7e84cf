"""The snapshot file (``raftsched.raft.snapshot_file``): format 3 is a header and a copy of the state; every damaged, foreign
or newer file is refused naming it, and a format-2 file (the state as one blob, from older versions) still reads."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from raftsched.raft.snapshot_file import (
    FORMAT_VERSION,
    SnapshotError,
    check_body,
    open_body,
    read_snapshot,
    write_snapshot,
    write_snapshot_file,
)
from raftsched.raft.snapshotter import BytesCopy

pytestmark = pytest.mark.unit

RAFT_DATA = ((b"\x01last", 42, 3), (b"\x01prev", 41, 3), ["127.0.0.1:7001", "127.0.0.1:7002"])
BODY = bytes(range(256)) * 500


def _write(path: Path, body: bytes = BODY) -> None:
    write_snapshot_file(str(path), RAFT_DATA, BytesCopy(body).write_to)


def test_a_snapshot_round_trips_and_its_body_starts_on_a_page(tmp_path: Path) -> None:
    path = tmp_path / "raft.snapshot"
    _write(path)
    snap = read_snapshot(str(path))
    assert (snap.format, snap.index, snap.term) == (FORMAT_VERSION, 42, 3)
    assert snap.entries == ((b"\x01last", 42, 3), (b"\x01prev", 41, 3))
    assert snap.cluster == ["127.0.0.1:7001", "127.0.0.1:7002"] and snap.state is None
    assert snap.body_offset % 4096 == 0 and snap.body_size == len(BODY)
    check_body(str(path), snap)
    with open_body(str(path), snap) as f:
        assert f.read(snap.body_size) == BODY
    assert os.stat(path).st_mode & 0o777 == 0o600


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_damaged_body_is_found_before_anything_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "raft.snapshot"
    _write(path)
    snap = read_snapshot(str(path))
    _flip(path, snap.body_offset + 1000)
    header = read_snapshot(str(path))  # the header is whole: a restart that needs no body reads only this
    with pytest.raises(SnapshotError, match="checksum mismatch") as err:
        check_body(str(path), header)
    assert str(path) in str(err.value) and "move it away" in str(err.value)


@pytest.mark.parametrize(
    "damage, needle",
    [
        (lambda p: _flip(p, 40), "metadata checksum mismatch"),
        (lambda p: os.truncate(p, 5000), "truncated"),
        (lambda p: os.truncate(p, 20), "truncated"),
        (lambda p: p.write_bytes(p.read_bytes()[:8] + struct.pack(">I", 99) + p.read_bytes()[12:]), "newer than this version"),
        (lambda p: p.write_bytes(b"PK\x03\x04 a zip file, not ours" * 1000), "not a raftsched snapshot"),
    ],
    ids=["metadata", "truncated-body", "truncated-header", "newer-format", "foreign"],
)
def test_a_damaged_foreign_or_newer_file_is_refused_naming_it(tmp_path: Path, damage, needle: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "raft.snapshot"
    _write(path)
    damage(path)
    before = path.read_bytes()
    with pytest.raises(SnapshotError, match=needle) as err:
        read_snapshot(str(path))
    assert str(path) in str(err.value)
    assert path.read_bytes() == before  # never rewritten


def test_a_format_2_snapshot_still_reads_with_its_state(tmp_path: Path) -> None:
    path = tmp_path / "raft.snapshot"
    write_snapshot(str(path), RAFT_DATA, b"a state blob of an older version")
    snap = read_snapshot(str(path))
    assert (snap.format, snap.index, snap.state) == (2, 42, b"a state blob of an older version")
    assert snap.entries[1] == (b"\x01prev", 41, 3)
