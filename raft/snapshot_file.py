"""The snapshot file written through pysyncobj's serializer hooks: a single-file LMDB environment.

pysyncobj calls the serializer with a temporary path, renames the file onto
its dump path, and streams that very file to a follower that fell too far
behind; so a snapshot must be one file. Ours is an LMDB environment in one
file (``subdir=False``) holding three keys:

    magic  b"RSCHSNAP"
    meta   JSON {"format", "index", "term", "entries": [[b64 command, idx, term] x2],
                 "cluster": [addr...], "size", "crc32"}  (the Raft index it covers and
                 pysyncobj's two boundary entries)
    state  the state machine's snapshot bytes

``read_snapshot`` checks all of it and raises ``SnapshotError`` naming the
file and what to do; nothing is ever loaded from a damaged, foreign or newer
file, and nothing here overwrites one.
"""

from __future__ import annotations

import base64
import json
import os
import zlib
from dataclasses import dataclass
from typing import Any

import lmdb

from raft.durable_files import FILE_MODE
from raft.errors import RaftError
from raft.lmdb_check import lmdb_short_by

MAGIC = b"RSCHSNAP"
FORMAT_VERSION = 2
_HEADROOM = 16 << 20


class SnapshotError(RaftError):
    """A snapshot file is damaged, foreign, or from a newer version."""


@dataclass(frozen=True)
class SnapshotFile:
    index: int
    term: int
    entries: tuple[Any, Any]  # (last_entry, prev_entry) as pysyncobj wants them: (bytes, idx, term)
    cluster: list[str]
    state: bytes


def _entry_to_plain(entry: Any) -> list[Any]:
    command, idx, term = entry
    return [base64.b64encode(bytes(command)).decode("ascii"), int(idx), int(term)]


def _entry_from_plain(p: list[Any]) -> tuple[bytes, int, int]:
    return (base64.b64decode(p[0]), int(p[1]), int(p[2]))


def write_snapshot(path: str, raft_data: Any, state: bytes) -> None:
    """Write ``state`` plus pysyncobj's ``(last_entry, prev_entry, cluster)`` to ``path`` (``0600``) and fsync it."""
    last_entry, prev_entry, cluster = raft_data
    meta = {
        "format": FORMAT_VERSION,
        "index": int(last_entry[1]),
        "term": int(last_entry[2]),
        "entries": [_entry_to_plain(last_entry), _entry_to_plain(prev_entry)],
        "cluster": sorted(str(getattr(n, "id", n)) for n in cluster),
        "size": len(state),
        "crc32": zlib.crc32(state),
    }
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


def _open(path: str) -> Any:
    if not os.path.exists(path):
        raise SnapshotError(f"cannot read snapshot {path}: it does not exist")
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
        raise SnapshotError(f"snapshot {path} is damaged ({exc}); move it away to rebuild this node from its peers") from exc


def read_snapshot(path: str) -> SnapshotFile:
    env = _open(path)
    try:
        with env.begin() as txn:
            magic, raw_meta, state = txn.get(b"magic"), txn.get(b"meta"), txn.get(b"state")
    except lmdb.Error as exc:
        raise SnapshotError(f"snapshot {path} is damaged ({exc}); move it away to rebuild this node from its peers") from exc
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
        raise SnapshotError(
            f"snapshot {path} is damaged (unreadable metadata); move it away to rebuild this node from its peers"
        ) from exc
    if version > FORMAT_VERSION:
        raise SnapshotError(
            f"snapshot {path} has format {version}, newer than this version understands ({FORMAT_VERSION}); "
            "upgrade raftsched on this node"
        )
    if state is None or len(state) != meta.get("size") or zlib.crc32(state) != meta.get("crc32"):
        raise SnapshotError(f"snapshot {path} is damaged (checksum mismatch); move it away to rebuild this node from its peers")
    last, prev = (_entry_from_plain(e) for e in meta["entries"])
    return SnapshotFile(int(meta["index"]), int(meta["term"]), (last, prev), list(meta["cluster"]), bytes(state))
