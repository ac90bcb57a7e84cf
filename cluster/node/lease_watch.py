"""The leader's own clock of renewals: a lease expires only when its holder has been silent for its TTL on the
leader's monotonic clock, whatever the wall clock says.

A lease's deadline is replicated and absolute (wall-clock time); the leader
proposes the expiry of a lease whose deadline has passed by its wall clock.
A wall clock that steps forward would make every deadline look passed at
once. So, beside the deadline, the leader notes on its monotonic clock when
it applied each grant and renewal (the ``leased`` and ``lease_renewed``
events of every entry it applies while it leads), and ``may_expire`` lets a
lease go only when its TTL has passed on that clock since then. A lease
this leader saw no grant or renewal of (granted under an earlier leader)
gets the grace every new leader gives (``[scheduler] lease_grace_s``) from
when this node began to lead.

``on_applied`` runs on the Raft thread; the rest on the leader loop's.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

#: events that end a lease (the run record keeps its id): its note is dropped
_ENDED = frozenset({"finished", "retry_scheduled", "lease_expired"})


class LeaseWatch:
    def __init__(self, monotonic: Callable[[], float], grace_s: float) -> None:
        self._monotonic = monotonic
        self._grace_s = grace_s
        self._lock = threading.Lock()
        #: lease id -> monotonic time this leader applied its grant or its last renewal
        self._seen: dict[str, float] = {}
        self._leading_since: float | None = None

    def lead(self, leading: bool) -> None:
        """This node begins (True) or stops (False) leading: notes start afresh."""
        with self._lock:
            self._seen = {}
            self._leading_since = self._monotonic() if leading else None

    def on_applied(self, events: list[tuple[str, Any]]) -> None:
        if self._leading_since is None or not events:
            return
        now = None
        for kind, run in events:
            if kind == "leased" or kind == "lease_renewed":
                if now is None:
                    now = self._monotonic()
                self._seen[run.lease_id] = now
            elif kind in _ENDED:
                self._seen.pop(run.lease_id, None)

    def may_expire(self, lease_id: str, ttl_ms: int) -> bool:
        """Whether this leader has seen no grant or renewal of ``lease_id`` for ``ttl_ms`` (or, for a lease it
        never saw one of, its grace has passed since it began to lead)."""
        since = self._leading_since
        if since is None:
            return False
        now = self._monotonic()
        seen = self._seen.get(lease_id)
        if seen is None:
            return now - since >= self._grace_s
        return (now - seen) * 1000.0 >= ttl_ms

    def __len__(self) -> int:
        return len(self._seen)
