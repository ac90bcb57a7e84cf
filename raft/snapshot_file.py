"""The snapshot file written through pysyncobj's serializer hooks.

pysyncobj calls ``serializer(tmp_path, (last_entry, prev_entry, cluster))``
on its tick thread when it compacts the log, renames the file into place,
and streams the same file to a follower that fell too far behind. We write
our own format instead of pysyncobj's pickle:

    magic  b"RSCHSNAP"            8 bytes
    format u16 (FORMAT_VERSION)   2 bytes
    crc32  u32 of everything after the fixed header
    mlen   u32 length of the metadata JSON
    meta   JSON {"index", "term", "entries": [[b64 command, idx, term] x2], "cluster": [addr...]}
    state  the state machine's snapshot bytes

``read_snapshot`` checks all of it and raises ``SnapshotError`` naming the
file and what to do; nothing is ever loaded from a damaged file.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Any

MAGIC = b"RSCHSNAP"
FORMAT_VERSION = 1
_HEADER = struct.Struct(">8sHII")


class SnapshotError(Exception):
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
    """Write ``state`` plus pysyncobj's ``(last_entry, prev_entry, cluster)`` to ``path`` and fsync it."""
    last_entry, prev_entry, cluster = raft_data
    meta = {
        "index": int(last_entry[1]),
        "term": int(last_entry[2]),
        "entries": [_entry_to_plain(last_entry), _entry_to_plain(prev_entry)],
        "cluster": sorted(str(getattr(n, "id", n)) for n in cluster),
    }
    meta_bytes = json.dumps(meta, separators=(",", ":")).encode("utf-8")
    body = struct.pack(">I", len(meta_bytes)) + meta_bytes + state
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, zlib.crc32(body), len(body) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(header)
        f.write(body)
        f.flush()
        os.fsync(f.fileno())


def read_snapshot(path: str) -> SnapshotFile:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {path}: {exc}") from exc
    if len(data) < _HEADER.size:
        raise SnapshotError(f"snapshot {path} is truncated ({len(data)} bytes); move it away to rebuild this node from its peers")
    magic, version, crc, length = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SnapshotError(f"{path} is not a raftsched snapshot (bad magic); it belongs to something else: move it away")
    if version > FORMAT_VERSION:
        raise SnapshotError(
            f"snapshot {path} has format {version}, newer than this version understands ({FORMAT_VERSION}); "
            "upgrade raftsched on this node"
        )
    body = data[_HEADER.size :]
    if len(body) & 0xFFFFFFFF != length or zlib.crc32(body) != crc:
        raise SnapshotError(
            f"snapshot {path} is damaged (checksum mismatch); move it away to rebuild this node from its peers"
        )
    (mlen,) = struct.unpack_from(">I", body)
    meta = json.loads(body[4 : 4 + mlen])
    last, prev = (_entry_from_plain(e) for e in meta["entries"])
    return SnapshotFile(int(meta["index"]), int(meta["term"]), (last, prev), list(meta["cluster"]), body[4 + mlen :])
