"""Fan-out of applied run changes to WatchRuns subscribers, and a bounded history to resume from.

``publish(events, index)`` runs on the Raft tick thread right after every
apply (also one that changed no run): it hands each changed run, as the
state machine handed it over (a record the machine never touches again once
its command ended: ``raftsched.cluster.fsm.tx``), to each interested
subscriber's bounded queue, and appends the entry's changes to the history as
one ``bytes`` per entry: each run as the state machine stores it
(``raftsched.cluster.fsm.layout``), the record its command wrote where the
machine hands it over (``JobStateMachine.drain_changes``: no second
encoding), else encoded here. A reader gets a copy of the run
(``RunChange.run``); a resumed watch gets runs decoded from the history.
The history is encoded because the collector would otherwise walk it: tens
of thousands of runs and their steps, each a tracked object that lives for
seconds, sat in the youngest generation (its count is net of every object
freed, old ones included, so it stayed under its threshold while they piled
up), and every young collection walked all of them, 70-130 ms each, every
few seconds, on every node under a steady load. A subscriber that falls more than
``max_backlog`` changes behind is closed with ``overflowed`` set (its stream
ends with a clear error), so one slow watcher can never stall replication.

**Positions.** Every change is numbered ``(index, position)``: the Raft index
of the entry whose apply made it and its place among that entry's changes.
The state machine is deterministic, so a position names the same change on
every node, which is what lets a watch resume on another node
(``subscribe(..., resume_after=point)``). The history holds the last
``history`` changes, whole entries at a time (fewer when their results and
errors would pass ``history_bytes``); ``covered_from`` is the first entry index all of whose
changes this node still holds (it moves on as old changes are dropped, and
jumps when a snapshot replaces the state: ``reset``). A resume point before
it is ``OutOfRange``.

Locking: ``publish`` holds the hub's lock while it appends and queues, so a
new subscriber sees every change exactly once, either in its replay or in
its queue, and ``bookmark`` can tell, atomically, that a subscriber has
been handed everything up to the last applied entry.
"""

from __future__ import annotations

import collections
import copy
import marshal
import queue
import threading
from typing import Callable, NamedTuple

from raftsched.cluster.domain.errors import OutOfRange, Unavailable
from raftsched.cluster.domain.limits import WATCH_HISTORY, WATCH_HISTORY_BYTES
from raftsched.cluster.domain.model import Run
from raftsched.cluster.fsm.layout import MARSHAL_VERSION, run_from_tuple, run_to_tuple

#: the kinds of run change the state machine reports (``JobStateMachine.events``)
RUN_EVENT_KINDS = frozenset({"fired", "skipped", "leased", "retry_scheduled", "cancel_requested", "finished", "pruned"})

_new = tuple.__new__

Point = tuple[int, int]


class RunChange(NamedTuple):
    kind: str
    state: Run  # the run after the entry that changed it, as apply handed it over: never changed again
    observed_ms: int
    log_index: int  # the Raft index of the entry whose apply made it
    position: int  # its place among that entry's changes

    @property
    def point(self) -> Point:
        return (self.log_index, self.position)

    @property
    def run(self) -> Run:
        """The run as it was after the change (a new, detached record: a run's fields hold immutable values, so a
        shallow copy is one)."""
        return copy.copy(self.state)


class Subscription:
    def __init__(self, hub: "EventHub", accept: Callable[[Run], bool], max_backlog: int, kinds: frozenset[str] | None) -> None:
        self._hub = hub
        self.accept = accept
        self.kinds = kinds
        self.queue: queue.Queue[RunChange | None] = queue.Queue(maxsize=max_backlog)
        self.overflowed = False
        #: set when the node replaced its state from a snapshot: changes in between were never seen here
        self.gap = False

    def get(self, timeout: float) -> RunChange | None:
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def check(self) -> None:
        """Raise what ends the stream, if anything does."""
        if self.gap:
            raise Unavailable("this node caught up from a snapshot and did not see every change in between; watch again")

    def close(self) -> None:
        self._hub.unsubscribe(self)


#: an entry's changes as the history holds them: the machine's (kind, run) pairs encoded (``_encode``), and when
#: they were observed
_Held = tuple[bytes, int]


def _encode(events: list[tuple[str, Run]], records: list[bytes | None] | None) -> bytes:
    """An entry's (kind, run) pairs as one ``bytes``: each run's record as the state machine stores it (``records``:
    the one its command wrote, where it is not None)."""
    if records is None:
        records = [None] * len(events)
    return marshal.dumps(
        [
            (kind, raw if raw is not None else marshal.dumps(run_to_tuple(run), MARSHAL_VERSION))
            for (kind, run), raw in zip(events, records)
        ],
        MARSHAL_VERSION,
    )


def _live(index: int, events: list[tuple[str, Run]], now: int) -> list[RunChange]:
    """Entry ``index``'s changes, numbered by their place among them."""
    # tuple.__new__: a NamedTuple's own __new__ costs more than the copy itself
    return [_new(RunChange, (kind, run, now, index, pos)) for pos, (kind, run) in enumerate(events)]


def _changes(index: int, held: _Held) -> list[RunChange]:
    """Entry ``index``'s changes as the history holds them, decoded."""
    blob, now = held
    return _live(index, [(kind, run_from_tuple(marshal.loads(raw))) for kind, raw in marshal.loads(blob)], now)


#: what an entry costs the history besides its encoded changes (counted roughly)
_ENTRY_COST = 128


class EventHub:
    def __init__(
        self,
        now_ms: Callable[[], int],
        max_backlog: int = 100_000,
        history: int = WATCH_HISTORY,
        history_bytes: int = WATCH_HISTORY_BYTES,
    ) -> None:
        self._now_ms = now_ms
        self._max_backlog = max_backlog
        self._subs: list[Subscription] = []
        self._lock = threading.Lock()
        #: per applied entry that changed runs: (its index, its changes, how many, their rough weight in bytes); the
        #: changes are kept encoded with when they were observed (``_Held``), and become ``RunChange``s only for a
        #: reader (``_changes``): most entries leave the history unread
        self._history: collections.deque[tuple[int, _Held, int, int]] = collections.deque()
        self._max_changes = max(1, history)
        self._max_bytes = history_bytes
        self._count = 0
        self._bytes = 0
        #: the first entry index all of whose changes are still held (or still to come)
        self.covered_from = 1
        #: the last entry published, and how many changes it made
        self._last: Point = (0, 0)

    def subscribe(
        self, accept: Callable[[Run], bool], kinds: frozenset[str] | None = None, resume_after: Point | None = None
    ) -> tuple[Subscription, list[RunChange]]:
        """Changes of runs ``accept`` takes, of the given ``kinds`` (None: all), from now on; with
        ``resume_after``, also the held changes after that point (returned, in order).
        ``OutOfRange`` when the point is older than the history."""
        sub = Subscription(self, accept, self._max_backlog, kinds)
        held: list[tuple[int, _Held]] = []
        with self._lock:  # held changes and queued ones meet exactly here: none is missed or sent twice
            if resume_after is not None:
                if resume_after[0] < self.covered_from:
                    raise OutOfRange(
                        f"resume point {resume_after[0]}.{resume_after[1]} is older than this node's history of run "
                        f"changes (it holds entries from index {self.covered_from}): watch again without it"
                    )
                held = [(index, pairs) for index, pairs, _, _ in self._history if index >= resume_after[0]]
            self._subs.append(sub)
        # filtered outside the lock (the Raft thread publishes under it); the changes never change
        replay = [ch for index, pairs in held for ch in _changes(index, pairs) if ch.point > (resume_after or (0, 0))]
        return sub, [ch for ch in replay if self._wants(sub, ch.kind, ch.run)]

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def bookmark(self, sub: Subscription) -> Point | None:
        """The point up to which ``sub`` has been handed every change (past every change of the
        last applied entry), or None while changes wait in its queue."""
        with self._lock:
            return self._last if sub.queue.empty() else None

    @property
    def has_subscribers(self) -> bool:
        return bool(self._subs)

    @staticmethod
    def _wants(sub: Subscription, kind: str, run: Run) -> bool:
        return not sub.overflowed and (sub.kinds is None or kind in sub.kinds) and sub.accept(run)

    def publish(self, events: list[tuple[str, Run]], index: int, records: list[bytes | None] | None = None) -> None:
        """The run changes entry ``index`` made (called after every applied entry, in order); ``records``: for each
        event, its run's record as its command wrote it, or None (``JobStateMachine.drain_changes``)."""
        with self._lock:
            # the machine's events for the metrics only (``lease_expired``) are not run changes
            if any(e[0] not in RUN_EVENT_KINDS for e in events):
                kept = [i for i, e in enumerate(events) if e[0] in RUN_EVENT_KINDS]
                events = [events[i] for i in kept]
                records = [records[i] for i in kept] if records is not None else None
            self._last = (index, len(events))
            if not events:
                return
            now = self._now_ms()
            blob = _encode(events, records)
            self._remember(index, (blob, now), len(events), _ENTRY_COST + len(blob))
            if self._subs:
                self._deliver(_live(index, events, now), events)

    def _deliver(self, changes: list[RunChange], events: list[tuple[str, Run]]) -> None:
        for change, (kind, run) in zip(changes, events):
            for sub in self._subs:
                if self._wants(sub, kind, run):
                    try:
                        sub.queue.put_nowait(change)
                    except queue.Full:
                        sub.overflowed = True
        self._subs = [s for s in self._subs if not s.overflowed]

    def _remember(self, index: int, held: _Held, count: int, weight: int) -> None:
        """Keep an entry's ``count`` changes; drop the oldest entries over either bound (the history then starts
        later). The newest entry is always kept."""
        history = self._history
        history.append((index, held, count, weight))
        self._count += count
        self._bytes += weight
        while len(history) > 1 and (self._count > self._max_changes or self._bytes > self._max_bytes):
            old_index, _, old_count, old_weight = history.popleft()
            self._count -= old_count
            self._bytes -= old_weight
            self.covered_from = max(self.covered_from, old_index + 1)

    def reset(self, applied_index: int) -> None:
        """The state was replaced by a snapshot at ``applied_index``: forget the history, and end
        every open stream (it missed the changes the snapshot stands for)."""
        with self._lock:
            self._history.clear()
            self._count = self._bytes = 0
            self.covered_from = applied_index + 1
            self._last = (applied_index, 0)
            for sub in self._subs:
                sub.gap = True
            self._subs = []
