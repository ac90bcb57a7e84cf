"""Fan-out of applied run changes to WatchRuns subscribers.

``publish`` runs on the Raft tick thread right after an apply: it only
copies the changed runs and appends them to each subscriber's bounded
queue. A subscriber that falls more than ``max_backlog`` events behind is
closed with ``overflowed`` set (its stream ends with a clear error), so one
slow watcher can never stall replication.
"""

from __future__ import annotations

import copy
import queue
import threading
from dataclasses import dataclass
from typing import Callable

from cluster.domain.model import Run

#: the kinds of run change the state machine reports (``JobStateMachine.events``)
RUN_EVENT_KINDS = frozenset({"fired", "skipped", "leased", "retry_scheduled", "cancel_requested", "finished", "pruned"})


@dataclass(frozen=True, slots=True)
class RunChange:
    kind: str
    run: Run
    observed_ms: int


class Subscription:
    def __init__(self, hub: "EventHub", accept: Callable[[Run], bool], max_backlog: int, kinds: frozenset[str] | None) -> None:
        self._hub = hub
        self.accept = accept
        self.kinds = kinds
        self.queue: queue.Queue[RunChange | None] = queue.Queue(maxsize=max_backlog)
        self.overflowed = False

    def get(self, timeout: float) -> RunChange | None:
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self._hub.unsubscribe(self)


class EventHub:
    def __init__(self, now_ms: Callable[[], int], max_backlog: int = 100_000) -> None:
        self._now_ms = now_ms
        self._max_backlog = max_backlog
        self._subs: list[Subscription] = []
        self._lock = threading.Lock()

    def subscribe(self, accept: Callable[[Run], bool], kinds: frozenset[str] | None = None) -> Subscription:
        """Changes of runs ``accept`` takes, of the given ``kinds`` (None: all)."""
        sub = Subscription(self, accept, self._max_backlog, kinds)
        with self._lock:
            self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    @property
    def has_subscribers(self) -> bool:
        return bool(self._subs)

    def publish(self, events: list[tuple[str, Run]]) -> None:
        with self._lock:
            subs = list(self._subs)
        if not subs or not events:
            return
        now = self._now_ms()
        for kind, run in events:
            if kind not in RUN_EVENT_KINDS:  # the machine's events for the metrics only (``lease_expired``)
                continue
            interested = [s for s in subs if not s.overflowed and (s.kinds is None or kind in s.kinds) and s.accept(run)]
            if not interested:
                continue
            change = RunChange(kind, copy.copy(run), now)
            for sub in interested:
                try:
                    sub.queue.put_nowait(change)
                except queue.Full:
                    sub.overflowed = True
                    self.unsubscribe(sub)
