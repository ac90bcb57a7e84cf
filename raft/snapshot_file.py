"""The snapshot file written through pysyncobj's serializer hooks: a header, then a copy of the state.

pysyncobj renames the file onto its dump path and streams that very file to
a follower that fell too far behind, so a snapshot is one file. Format 3
(this version writes it):

    0   8 bytes  b"RSCHSNAP"
    8   u32      format (3)
    12  u32      length of the metadata
    16  u64      length of the body
    24  u32      CRC-32 of the body
    28  u32      CRC-32 of the metadata
    32  metadata JSON {"format", "index", "term", "entries": [[b64 command, idx, term] x2],
                       "cluster": [addr...]}  (the Raft index it covers and pysyncobj's two
                       boundary entries), then zeros up to a 4096-byte boundary
        body     the state machine's copy of its state at that index, as it wrote it
                 (a node's: LMDB's compacting copy of its state environment)

Reading the header (``read_snapshot``) is cheap, whatever the body's size:
a restart with a state that already covers the snapshot never reads the
body. Its checksum is checked (``check_body``) before anything is loaded
from it. Format 2 — what versions before the state moved into LMDB wrote: a
single-file LMDB environment with ``magic``, ``meta`` and the state blob
``state`` — is still read (``SnapshotFile.state``), so a node upgraded from
one converts it on first start.

Every refusal (``SnapshotError``) names the file and says what to do:
nothing is loaded from a damaged, foreign or newer file, and nothing here
overwrites one.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import threading
import zlib
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable

import lmdb

from raftsched.raft.errors import RaftError
from raftsched.storage.disk.durable_files import FILE_MODE
from raftsched.storage.disk.lmdb_check import lmdb_short_by
from raftsched.storage.disk.paced_io import SYNC_EVERY, PacedWrites

MAGIC = b"RSCHSNAP"
FORMAT_VERSION = 3
#: format 2: a single-file LMDB environment holding the state as one blob (read for migration)
BLOB_FORMAT = 2
_HEADER = struct.Struct(">8sIIQII")
_ALIGN = 4096
_CHUNK = 8 << 20
_PIPE_READ = 1 << 20
_HEADROOM = 16 << 20


class SnapshotError(RaftError):
    """A snapshot file is damaged, foreign, or from a newer version."""


@dataclass(frozen=True)
class SnapshotFile:
    index: int
    term: int
    entries: tuple[Any, Any]  # (last_entry, prev_entry) as pysyncobj wants them: (bytes, idx, term)
    cluster: list[str]
    format: int = FORMAT_VERSION
    #: format 3: where the body starts, its length and checksum
    body_offset: int = 0
    body_size: int = 0
    body_crc: int = 0
    #: format 2: the state blob (checked)
    state: bytes | None = None


def _entry_to_plain(entry: Any) -> list[Any]:
    command, idx, term = entry
    return [base64.b64encode(bytes(command)).decode("ascii"), int(idx), int(term)]


def _entry_from_plain(p: list[Any]) -> tuple[bytes, int, int]:
    return (base64.b64decode(p[0]), int(p[1]), int(p[2]))


def _meta(raft_data: Any, version: int) -> dict[str, Any]:
    last_entry, prev_entry, cluster = raft_data
    return {
        "format": version,
        "index": int(last_entry[1]),
        "term": int(last_entry[2]),
        "entries": [_entry_to_plain(last_entry), _entry_to_plain(prev_entry)],
        "cluster": sorted(str(getattr(n, "id", n)) for n in cluster),
    }


# ------------------------------------------------------------------ writing


def write_snapshot_file(path: str, raft_data: Any, write_body: Callable[[int], None], sync_every: int = SYNC_EVERY) -> int:
    """Write a format-3 snapshot to ``path`` (``0600``, fsynced): the header for pysyncobj's ``(last_entry,
    prev_entry, cluster)``, then whatever ``write_body(fd)`` writes to the descriptor it is given. Its size.

    The body goes through a pipe: it is checksummed on its way and synced every ``sync_every`` bytes, so
    the disk never holds more than that of it in flight. A burst of hundreds of megabytes would make every
    other fsync on the disk (the Raft log's, before each answer) wait behind it."""
    meta = json.dumps(_meta(raft_data, FORMAT_VERSION), separators=(",", ":")).encode("utf-8")
    offset = (_HEADER.size + len(meta) + _ALIGN - 1) // _ALIGN * _ALIGN
    if os.path.lexists(path):
        os.unlink(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.pwrite(fd, meta, _HEADER.size)
        size, crc = _stream_body(fd, offset, write_body, sync_every)
        os.pwrite(fd, _HEADER.pack(MAGIC, FORMAT_VERSION, len(meta), size, crc, zlib.crc32(meta)), 0)
        os.fsync(fd)
        return offset + size
    finally:
        os.close(fd)


def _stream_body(fd: int, offset: int, write_body: Callable[[int], None], sync_every: int) -> tuple[int, int]:
    """Run ``write_body`` on a pipe in a thread; copy what comes out to ``fd`` from ``offset``: (length, CRC-32)."""
    r, w = os.pipe()
    failed: list[BaseException] = []

    def produce() -> None:
        try:
            write_body(w)
        except BaseException as exc:  # re-raised below, in the caller's thread
            failed.append(exc)
        finally:
            os.close(w)

    producer = threading.Thread(target=produce, name="snapshot-body", daemon=True)
    producer.start()
    size = crc = 0
    paced = PacedWrites(
        sync_every, drop=True, start=offset
    )  # the state file needs the memory more than a snapshot nobody reads soon
    try:
        while True:
            chunk = os.read(r, _PIPE_READ)
            if not chunk:
                break
            os.pwrite(fd, chunk, offset + size)
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
            paced.wrote(fd, len(chunk))
    finally:
        os.close(r)  # a producer still writing gets EPIPE and stops
        producer.join()
    if failed:
        raise failed[0]
    return size, crc


def write_snapshot(path: str, raft_data: Any, state: bytes) -> None:
    """Write a format-2 snapshot (the state as one blob, what older versions wrote): for tests and migrations."""
    meta = dict(_meta(raft_data, BLOB_FORMAT), size=len(state), crc32=zlib.crc32(state))
    if os.path.lexists(path):
        os.unlink(path)
    size = (len(state) + _HEADROOM + 4095) // 4096 * 4096
    env = lmdb.open(path, subdir=False, map_size=size, lock=False, sync=False, metasync=False, max_dbs=0, mode=FILE_MODE)
    try:
        with env.begin(write=True) as txn:
            txn.put(b"magic", MAGIC)
            txn.put(b"meta", json.dumps(meta, separators=(",", ":")).encode("utf-8"))
            txn.put(b"state", state)
        env.sync(True)
    finally:
        env.close()


# ------------------------------------------------------------------ reading


def _damaged(path: str, what: str) -> SnapshotError:
    return SnapshotError(f"snapshot {path} is damaged ({what}); move it away to rebuild this node from its peers")


def read_snapshot(path: str) -> SnapshotFile:
    """The snapshot's header (format 3: its body is checked by ``check_body``; format 2: the whole state, checked)."""
    if not os.path.exists(path):
        raise SnapshotError(f"cannot read snapshot {path}: it does not exist")
    with open(path, "rb") as f:
        head = f.read(_HEADER.size)
        if head[:8] != MAGIC:
            return _read_blob_snapshot(path)
        if len(head) < _HEADER.size:
            raise SnapshotError(
                f"snapshot {path} is truncated ({len(head)} bytes); move it away to rebuild this node from its peers"
            )
        _, version, meta_len, body_size, body_crc, meta_crc = _HEADER.unpack(head)
        if version > FORMAT_VERSION:
            raise SnapshotError(
                f"snapshot {path} has format {version}, newer than this version understands ({FORMAT_VERSION}); "
                "upgrade raftsched on this node"
            )
        raw = f.read(meta_len)
    offset = (_HEADER.size + meta_len + _ALIGN - 1) // _ALIGN * _ALIGN
    size = os.path.getsize(path)
    if len(raw) < meta_len or size < offset + body_size:
        raise SnapshotError(
            f"snapshot {path} is truncated ({size} bytes, its header counts {offset + body_size}); "
            "move it away to rebuild this node from its peers"
        )
    if zlib.crc32(raw) != meta_crc:
        raise _damaged(path, "metadata checksum mismatch")
    try:
        meta = json.loads(raw)
        last, prev = (_entry_from_plain(e) for e in meta["entries"])
        return SnapshotFile(
            int(meta["index"]),
            int(meta["term"]),
            (last, prev),
            [str(a) for a in meta["cluster"]],
            version,
            offset,
            body_size,
            body_crc,
        )
    except (TypeError, ValueError, KeyError) as exc:
        raise _damaged(path, "unreadable metadata") from exc


_checked: tuple[tuple[int, int, int, int], int] | None = None


def _identity(path: str) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def check_body(path: str, snap: SnapshotFile) -> None:
    """Raise ``SnapshotError`` unless the body of the snapshot at ``path`` matches its checksum (a format-2 one
    was checked whole when it was read). The file last found whole is not read again (a rename keeps it)."""
    global _checked
    if snap.state is not None:
        return
    identity = _identity(path)
    if _checked == (identity, snap.body_crc):
        return
    crc = 0
    with open(path, "rb") as f:
        f.seek(snap.body_offset)
        left = snap.body_size
        while left > 0:
            chunk = f.read(min(_CHUNK, left))
            if not chunk:
                break
            crc = zlib.crc32(chunk, crc)
            left -= len(chunk)
    if left or crc != snap.body_crc:
        raise _damaged(path, "checksum mismatch")
    _checked = (identity, snap.body_crc)


def open_body(path: str, snap: SnapshotFile) -> BinaryIO:
    """The file, positioned at the body of a format-3 snapshot (the caller reads ``body_size`` bytes and closes it)."""
    f = open(path, "rb")
    f.seek(snap.body_offset)
    return f


def _open_blob(path: str) -> Any:
    if os.path.getsize(path) < 8192:
        raise SnapshotError(
            f"snapshot {path} is truncated ({os.path.getsize(path)} bytes); move it away to rebuild this node from its peers"
        )
    short = lmdb_short_by(path)
    if short:
        raise SnapshotError(f"snapshot {path} is truncated ({short}); move it away to rebuild this node from its peers")
    try:
        return lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=0)
    except lmdb.InvalidError as exc:
        raise SnapshotError(
            f"{path} is not a raftsched snapshot (not an LMDB file); it belongs to something else: move it away"
        ) from exc
    except lmdb.Error as exc:
        raise _damaged(path, str(exc)) from exc


def _read_blob_snapshot(path: str) -> SnapshotFile:
    env = _open_blob(path)
    try:
        with env.begin() as txn:
            magic, raw_meta, state = txn.get(b"magic"), txn.get(b"meta"), txn.get(b"state")
    except lmdb.Error as exc:
        raise _damaged(path, str(exc)) from exc
    finally:
        env.close()
    if magic != MAGIC:
        raise SnapshotError(
            f"{path} is not a raftsched snapshot (no raftsched marker); it belongs to something else: move it away"
        )
    try:
        meta = json.loads(raw_meta)
        version = int(meta["format"])
    except (TypeError, ValueError, KeyError) as exc:
        raise _damaged(path, "unreadable metadata") from exc
    if version > FORMAT_VERSION:
        raise SnapshotError(
            f"snapshot {path} has format {version}, newer than this version understands ({FORMAT_VERSION}); "
            "upgrade raftsched on this node"
        )
    if state is None or len(state) != meta.get("size") or zlib.crc32(state) != meta.get("crc32"):
        raise _damaged(path, "checksum mismatch")
    last, prev = (_entry_from_plain(e) for e in meta["entries"])
    return SnapshotFile(int(meta["index"]), int(meta["term"]), (last, prev), list(meta["cluster"]), version, state=bytes(state))
