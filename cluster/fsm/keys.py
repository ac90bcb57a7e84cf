"""The keys of the state's tables (``raftsched.cluster.fsm.store.Table``): bytes that sort as the machine reads them.

* ids are UTF-8 (bytewise order of UTF-8 is code point order, as Python
  compares strings);
* an instant is 8 bytes big-endian of ``ms + 2**63``, so negative instants
  sort before positive ones;
* a key of a job's rows (``JOB_RUNS``, ``ACTIVE``, ``FAILED_RUNS``) is
  ``job_id NUL instant run_id``: the NUL ends the id (ids hold no NUL), so
  one job's rows are one contiguous range, and ``"j1"``'s come before
  ``"j10"``'s as the ids sort;
* a key of a timed index (``DUE``, ``EXPIRY``, ``PURGE``,
  ``REQUEST_EXPIRY``) is ``instant id``;
* a key of ``RANKED`` is ``rank instant run_id``: one byte, 0 for the
  highest priority, then the instant the run first became leasable: the
  order grants take runs, so that a grant's writes fall on pages side by
  side (and a completion's, and retention's deletes, in about that order).
  The run's row in ``RUNS`` then holds ``ranked_ref`` of that key: a NUL
  byte (no record starts with one), then the key.

The values are ``layout``'s.
"""

from __future__ import annotations

import hashlib
import struct

_MS = struct.Struct(">Q")
_BIAS = 1 << 63
_SEP = b"\x00"
#: an idempotency key longer than this (in UTF-8) is stored under its SHA-256 (the table holds the key itself too)
MAX_PLAIN_KEY = 400


def ms_bytes(ms: int) -> bytes:
    return _MS.pack(ms + _BIAS)


def ms_from(raw: bytes, at: int = 0) -> int:
    return int(_MS.unpack_from(raw, at)[0]) - _BIAS


def id_key(ident: str) -> bytes:
    return ident.encode("utf-8")


def job_prefix(job_id: str) -> bytes:
    """The first bytes of every key of ``job_id``'s rows (``JOB_RUNS``, ``ACTIVE``, ``FAILED_RUNS``)."""
    return job_id.encode("utf-8") + _SEP


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix`` (a ``stop`` for a scan)."""
    return prefix[:-1] + bytes([prefix[-1] + 1]) if prefix and prefix[-1] < 255 else prefix + b"\xff" * 8


def job_run_key(job_id: str, scheduled_ms: int, run_id: str) -> bytes:
    return job_id.encode("utf-8") + _SEP + _MS.pack(scheduled_ms + _BIAS) + run_id.encode("utf-8")  # prefix, instant, id


def job_run_from(key: bytes, prefix_len: int) -> tuple[int, str]:
    """``(scheduled_ms, run_id)`` of a job's row key whose job prefix is ``prefix_len`` bytes."""
    return ms_from(key, prefix_len), key[prefix_len + 8 :].decode("utf-8")


def run_id_of(key: bytes) -> str:
    """The run id of a job's row key, whatever its job."""
    return job_run_from(key, key.index(_SEP) + 1)[1]


def timed_key(ms: int, ident: str) -> bytes:
    """A key of ``DUE``, ``EXPIRY``, ``PURGE``, ``REQUEST_EXPIRY``: by instant, then id."""
    return _MS.pack(ms + _BIAS) + ident.encode("utf-8")


def timed_from(key: bytes) -> tuple[int, str]:
    return ms_from(key), key[8:].decode("utf-8")


#: the first byte of a ``RUNS`` value that points into ``RANKED`` (a record's ``marshal`` bytes never start with it)
RANKED_REF = b"\x00"


def ranked_key(rank: int, ms: int, run_id: str) -> bytes:
    return bytes((rank,)) + _MS.pack(ms + _BIAS) + run_id.encode("utf-8")


def ranked_ref(key: bytes) -> bytes:
    """What ``RUNS`` holds for a run whose record is in ``RANKED`` under ``key``."""
    return RANKED_REF + key


def idem_key(key: str) -> bytes:
    raw = key.encode("utf-8")
    return raw if len(raw) <= MAX_PLAIN_KEY else b"\xff#" + hashlib.sha256(raw).digest()
