"""Checks of LMDB files before they are opened: a truncated file would crash the process (SIGBUS)."""

from __future__ import annotations

import os
import struct

_META = struct.Struct("<IIQQI")  # at 16 in a meta page: magic, version, address, mapsize, dbs[FREE].md_pad=pagesize
_LMDB_MAGIC = 0xBEEFC0DE


def lmdb_short_by(data_file: str) -> str:
    """Empty if ``data_file`` holds every page its newest meta page counts; else a description of what is missing.

    LMDB maps the file and reads pages directly: a truncated file is not an
    error it reports but a SIGBUS. Files that are not LMDB are left to
    ``lmdb.open``, which says so.
    """
    size = os.path.getsize(data_file)
    with open(data_file, "rb") as f:
        head = f.read(8192)
    metas = []
    for page in (0, 4096):
        if len(head) < page + 152:
            continue
        magic, _version, _addr, _mapsize, pagesize = _META.unpack_from(head, page + 16)
        last_pg, txnid = struct.unpack_from("<QQ", head, page + 136)
        if magic == _LMDB_MAGIC and pagesize:
            metas.append((txnid, last_pg, pagesize))
    if not metas:
        return ""
    _, last_pg, pagesize = max(metas)
    need = (last_pg + 1) * pagesize
    return "" if size >= need else f"{size} bytes, its pages need {need}"
