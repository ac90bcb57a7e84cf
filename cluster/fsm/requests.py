"""Request ids: the same mutating request again within 24 h returns its first answer and changes nothing.

Every mutating command may carry a ``request_id`` (command format 3 on,
``commands.command_format``). Through the log, so every node decides alike
(``machine`` calls ``seen`` before a command with an id, ``remember`` after):

* Before the command's handler runs, a known id whose request is the same
  (``commands.request_fingerprint``: op and fields, without the id, the
  proposer's quotas and the ids it makes up) answers ``Ok`` with the record
  the first answer named, as it is now; nothing else is applied.
* A known id with a different request is ``InvalidArgument`` naming the id:
  a client bug (an id reused for another request), not a conflict of
  resources (``AlreadyExists`` stays the idempotency key's answer).
* Only successful answers are remembered: a refused request changed nothing,
  so its retry is decided again on the state as it then is.
* An id is remembered ``REQUEST_ID_TTL_MS`` (24 h) of the commands' ``now``;
  an expired one is unknown at once, and ``PruneHistory`` drops expired rows
  (at most ``REQUEST_PRUNE_BATCH`` per entry) from an index by expiry.
"""

from __future__ import annotations

from typing import Any

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.model import Job, Run
from raftsched.cluster.domain.results import InvalidArgument, NotFound, Ok, Result
from raftsched.cluster.fsm import keys, layout
from raftsched.cluster.fsm.body import RequestRow
from raftsched.cluster.fsm.store import Table
from raftsched.cluster.fsm.tx import Tx


def _row(tx: Tx, request_id: str) -> RequestRow | None:
    raw = tx.get(Table.REQUESTS, keys.id_key(request_id))
    if raw is None:
        return None
    rid, fingerprint, kind, ref, expires = layout.decode_plain(raw)
    return rid, fingerprint, kind, ref, expires


def seen(tx: Tx, cmd: Any, request_id: str) -> Result | None:
    """The first answer to this request id, or None if it is unknown (or expired) here."""
    row = _row(tx, request_id)
    if row is None or row[4] <= tx.mem.now_ms:
        return None
    _, fingerprint, kind, ref, _ = row
    if fingerprint != c.request_fingerprint(cmd):
        return InvalidArgument(
            f"request_id {request_id!r} was already used for a different request ({kind} {ref}) in the last 24 h: "
            "use a new request_id for a new request, and the same one only to retry the same request"
        )
    record: Job | Run | None
    if kind == "job":
        record = tx.job(ref)
    elif kind == "run":
        record = tx.run(ref)
    else:
        return Ok(None)
    if record is None:
        return NotFound(f"request_id {request_id!r} was answered with {kind} {ref}, which is gone since (pruned)")
    return Ok(record)


def remember(tx: Tx, cmd: Any, request_id: str, result: Result) -> None:
    """Keep the answer of a request that succeeded, for ``REQUEST_ID_TTL_MS``."""
    if not isinstance(result, Ok):
        return
    value = result.value
    kind, ref = (
        ("job", value.job_id) if isinstance(value, Job) else ("run", value.run_id) if isinstance(value, Run) else ("none", "")
    )
    old = _row(tx, request_id)
    if old is not None:  # expired: its index row goes with it
        tx.delete(Table.REQUEST_EXPIRY, keys.timed_key(old[4], request_id))
    expires = tx.mem.now_ms + lim.REQUEST_ID_TTL_MS
    fingerprint = c.request_fingerprint(cmd)
    tx.put(Table.REQUESTS, keys.id_key(request_id), layout.encode_plain((request_id, fingerprint, kind, ref, expires)))
    tx.put(Table.REQUEST_EXPIRY, keys.timed_key(expires, request_id), b"")


def prune_requests(tx: Tx, limit: int) -> int:
    """Drop up to ``limit`` request ids whose time has passed; how many went."""
    rows = tx.scan(Table.REQUEST_EXPIRY, b"", keys.ms_bytes(tx.mem.now_ms + 1), limit)
    for key, _ in rows:
        _, request_id = keys.timed_from(key)
        tx.delete(Table.REQUEST_EXPIRY, key)
        tx.delete(Table.REQUESTS, keys.id_key(request_id))
    return len(rows)


def rows(tx: Tx) -> list[RequestRow]:
    """Every answered request (the state's blob), by id."""
    return [tuple(layout.decode_plain(raw)) for _, raw in tx.rows(Table.REQUESTS)]


def restore(tx: Tx, answered: list[RequestRow]) -> None:
    for row in answered:
        tx.put(Table.REQUESTS, keys.id_key(row[0]), layout.encode_plain(tuple(row)))
        tx.put(Table.REQUEST_EXPIRY, keys.timed_key(row[4], row[0]), b"")
