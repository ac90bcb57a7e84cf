"""Keys and values of the state's tables (``raftsched.cluster.domain.state_store.Table``): deterministic bytes.

Values are the snapshot codec's positional tuples (``snapshot_codec``) in
``marshal`` version 2 (no back-references: equal records give equal bytes).
Keys sort bytewise in the order the state machine reads them:

* ids are UTF-8 (bytewise order of UTF-8 is code point order, as Python
  compares strings);
* an instant is 8 bytes big-endian of ``ms + 2**63``, so negative instants
  sort before positive ones;
* a key of a job's rows is ``job_id NUL instant run_id``: the NUL ends the id
  (ids hold no NUL), so one job's rows are one contiguous range, and
  ``"j1"``'s come before ``"j10"``'s as the ids sort.
"""

from __future__ import annotations

import hashlib
import marshal
import struct
from typing import Any

from raftsched.cluster.domain import snapshot_codec
from raftsched.cluster.domain.model import Job, Member, MemberChange, Run

MARSHAL_VERSION = snapshot_codec.MARSHAL_VERSION
_MS = struct.Struct(">Q")
_BIAS = 1 << 63
_SEP = b"\x00"
#: an idempotency key longer than this (in UTF-8) is stored under its SHA-256 (the table holds the key itself too)
MAX_PLAIN_KEY = 400

# ------------------------------------------------------------------ keys


def ms_bytes(ms: int) -> bytes:
    return _MS.pack(ms + _BIAS)


def ms_from(raw: bytes, at: int = 0) -> int:
    return int(_MS.unpack_from(raw, at)[0]) - _BIAS


def id_key(ident: str) -> bytes:
    return ident.encode("utf-8")


def job_prefix(job_id: str) -> bytes:
    """The first bytes of every key of ``job_id``'s rows (``JOB_RUNS``, ``ACTIVE``)."""
    return job_id.encode("utf-8") + _SEP


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix`` (a ``stop`` for a scan)."""
    return prefix[:-1] + bytes([prefix[-1] + 1]) if prefix and prefix[-1] < 255 else prefix + b"\xff" * 8


def job_run_key(job_id: str, scheduled_ms: int, run_id: str) -> bytes:
    return job_id.encode("utf-8") + _SEP + _MS.pack(scheduled_ms + _BIAS) + run_id.encode("utf-8")  # prefix, instant, id


def job_run_from(key: bytes, prefix_len: int) -> tuple[int, str]:
    """``(scheduled_ms, run_id)`` of a ``JOB_RUNS``/``ACTIVE`` key whose job prefix is ``prefix_len`` bytes."""
    return ms_from(key, prefix_len), key[prefix_len + 8 :].decode("utf-8")


def timed_key(ms: int, ident: str) -> bytes:
    """A key of ``DUE``, ``EXPIRY``, ``PURGE``: by instant, then id."""
    return _MS.pack(ms + _BIAS) + ident.encode("utf-8")


def timed_from(key: bytes) -> tuple[int, str]:
    return ms_from(key), key[8:].decode("utf-8")


def idem_key(key: str) -> bytes:
    raw = key.encode("utf-8")
    return raw if len(raw) <= MAX_PLAIN_KEY else b"\xff#" + hashlib.sha256(raw).digest()


# ------------------------------------------------------------------ values


def encode_job(job: Job) -> bytes:
    return marshal.dumps(snapshot_codec.job_to_tuple(job), MARSHAL_VERSION)


def encode_run(run: Run) -> bytes:
    return marshal.dumps(snapshot_codec.run_to_tuple(run), MARSHAL_VERSION)


def decode_run(raw: bytes) -> Run:
    return snapshot_codec.run_from_tuple(marshal.loads(raw))


class JobDecoder(snapshot_codec.Decoder):
    """Decodes job values, sharing retry policies between them."""

    def decode(self, raw: bytes) -> Job:
        return self.job(marshal.loads(raw))


def encode_idem(key: str, job_id: str, fingerprint: str) -> bytes:
    return marshal.dumps((key, job_id, fingerprint), MARSHAL_VERSION)


def decode_idem(raw: bytes) -> tuple[str, str, str]:
    key, job_id, fingerprint = marshal.loads(raw)
    return key, job_id, fingerprint


def encode_int(n: int) -> bytes:
    return marshal.dumps(n, MARSHAL_VERSION)


def decode_int(raw: bytes | None, default: int = 0) -> int:
    return default if raw is None else int(marshal.loads(raw))


def encode_plain(value: Any) -> bytes:
    """Plain values (ints, strings, tuples, lists) as marshal bytes."""
    return marshal.dumps(value, MARSHAL_VERSION)


def decode_plain(raw: bytes) -> Any:
    return marshal.loads(raw)


# ------------------------------------------------------------------ membership

Members = dict[str, tuple[str, int]]


def encode_membership(
    members: Members,
    rafts: dict[str, str],
    roster: dict[str, Member],
    change: MemberChange | None,
    removed: dict[str, Member],
    cluster_format: int,
) -> bytes:
    membership = snapshot_codec.Membership(list(roster.values()), change, list(removed.values()), cluster_format, rafts)
    body = (sorted((node, ver, fmt) for node, (ver, fmt) in members.items()), snapshot_codec.membership_to_plain(membership))
    return marshal.dumps(body, MARSHAL_VERSION)


def decode_membership(raw: bytes) -> tuple[Members, snapshot_codec.Membership]:
    members, membership = marshal.loads(raw)
    return {node: (ver, fmt) for node, ver, fmt in members}, snapshot_codec.membership_from_plain(membership)
