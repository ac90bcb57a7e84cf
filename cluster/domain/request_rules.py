"""Request ids: the same mutating request again within 24 h returns its first answer and changes nothing.

Every mutating command may carry a ``request_id`` (command format 3 on,
``command_registry.command_format``). Through the log, so every node
decides alike:

* Before the command's handler runs, a known id whose request is the same
  (``command_registry.request_fingerprint``: op and fields, without the id,
  the proposer's quotas and the ids it makes up) answers ``Ok`` with the
  record the first answer named, as it is now; nothing else is applied.
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

from raftsched.cluster.domain import command_registry
from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain import record_codec as rc
from raftsched.cluster.domain.model import Job, Run
from raftsched.cluster.domain.results import InvalidArgument, NotFound, Ok, Result
from raftsched.cluster.domain.state_base import StateBase
from raftsched.cluster.domain.state_store import Table, iter_table


class RequestRules(StateBase):
    """Mixed into ``JobStateMachine``: ``seen_request`` before a command with an id, ``remember_request`` after."""

    def _request_row(self, request_id: str) -> tuple[str, str, str, str, int] | None:
        raw = self.store.get(Table.REQUESTS, rc.id_key(request_id))
        if raw is None:
            return None
        rid, fingerprint, kind, ref, expires = rc.decode_plain(raw)
        return rid, fingerprint, kind, ref, expires

    def seen_request(self, cmd: Any, request_id: str) -> Result | None:
        """The first answer to this request id, or None if it is unknown (or expired) here."""
        row = self._request_row(request_id)
        if row is None or row[4] <= self.now_ms:
            return None
        _, fingerprint, kind, ref, _ = row
        if fingerprint != command_registry.request_fingerprint(cmd):
            return InvalidArgument(
                f"request_id {request_id!r} was already used for a different request ({kind} {ref}) in the last 24 h: "
                "use a new request_id for a new request, and the same one only to retry the same request"
            )
        record: Job | Run | None
        if kind == "job":
            record = self.uow.job(ref)
        elif kind == "run":
            record = self.uow.run(ref)
        else:
            return Ok(None)
        if record is None:
            return NotFound(f"request_id {request_id!r} was answered with {kind} {ref}, which is gone since (pruned)")
        return Ok(record)

    def remember_request(self, cmd: Any, request_id: str, result: Result) -> None:
        """Keep the answer of a request that succeeded, for ``REQUEST_ID_TTL_MS``."""
        if not isinstance(result, Ok):
            return
        value = result.value
        kind, ref = (
            ("job", value.job_id) if isinstance(value, Job) else ("run", value.run_id) if isinstance(value, Run) else ("none", "")
        )
        old = self._request_row(request_id)
        if old is not None:  # expired: its index row goes with it
            self.store.delete(Table.REQUEST_EXPIRY, rc.timed_key(old[4], request_id))
        expires = self.now_ms + lim.REQUEST_ID_TTL_MS
        fingerprint = command_registry.request_fingerprint(cmd)
        self.store.put(Table.REQUESTS, rc.id_key(request_id), rc.encode_plain((request_id, fingerprint, kind, ref, expires)))
        self.store.put(Table.REQUEST_EXPIRY, rc.timed_key(expires, request_id), b"")

    def prune_requests(self, limit: int) -> int:
        """Drop up to ``limit`` request ids whose time has passed; how many went."""
        rows = self.store.scan(Table.REQUEST_EXPIRY, b"", rc.ms_bytes(self.now_ms + 1), limit)
        for key, _ in rows:
            _, request_id = rc.timed_from(key)
            self.store.delete(Table.REQUEST_EXPIRY, key)
            self.store.delete(Table.REQUESTS, rc.id_key(request_id))
        return len(rows)

    def request_rows(self) -> list[tuple[str, str, str, str, int]]:
        """Every answered request (``snapshot``), by id."""
        return [tuple(rc.decode_plain(raw)) for _, raw in iter_table(self.store, Table.REQUESTS)]

    def restore_requests(self, rows: list[tuple[str, str, str, str, int]]) -> None:
        for row in rows:
            self.store.put(Table.REQUESTS, rc.id_key(row[0]), rc.encode_plain(tuple(row)))
            self.store.put(Table.REQUEST_EXPIRY, rc.timed_key(row[4], row[0]), b"")

    def next_request_expiry_ms(self) -> int | None:
        rows = self.store.scan(Table.REQUEST_EXPIRY, limit=1)
        return rc.ms_from(rows[0][0]) if rows else None
