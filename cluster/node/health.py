"""Whether this node is fit to serve: it sees a Raft leader and a quorum.

``check_health(raft)`` answers now (for ``GET /healthz``); ``HealthMonitor``
polls the same answer every ``interval`` seconds on its own thread and tells
its listeners of each change (the gRPC health service flips with it, the
metrics count leader changes). Both read only pysyncobj's own view (its last
known leader and whether it is connected to a majority), never the state
machine: a poll costs a few attribute reads and takes no lock.

A node cut off from the others loses its quorum as soon as its connections
drop (a second or two after the others die), and its leader once the election
timeout passes; either makes it unfit. So does a problem ``Fitness`` holds
(``raftsched.cluster.node.fitness``: a clock off from the others, a disk that refuses
writes): the reason then names it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable, Protocol

from raftsched.cluster.node.fitness import Fitness

log = logging.getLogger("raftsched.health")

#: how often ``HealthMonitor`` looks (seconds)
POLL_INTERVAL_S = 0.2


class QuorumView(Protocol):
    """What the health check reads from Raft (``raft.RaftNode`` implements it)."""

    def leader_address(self) -> str | None: ...

    def has_quorum(self) -> bool: ...

    @property
    def term(self) -> int: ...


@dataclass(frozen=True)
class Health:
    serving: bool
    #: the leader's node id (its Raft address if it is not a known member), None: no leader known
    leader: str | None
    term: int
    #: one line for people: why the node is (not) serving
    reason: str


def check_health(raft: QuorumView, names: dict[str, str] | None = None, fitness: Fitness | None = None) -> Health:
    """This node's health now; ``names`` maps Raft addresses to node ids for the message."""
    address = raft.leader_address()
    leader = None if address is None else (names or {}).get(address, address)
    quorum = raft.has_quorum()
    term = raft.term
    if fitness is not None and not fitness.fit:
        return Health(False, leader, term, fitness.reason())
    if leader is None:
        return Health(False, None, term, "no leader known: an election may be under way, or this node is cut off from the others")
    if not quorum:
        return Health(
            False, leader, term, f"no quorum: this node reaches fewer than a majority of the members (last leader {leader})"
        )
    return Health(True, leader, term, f"ok: leader {leader}, term {term}, quorum reached")


Listener = Callable[[Health | None, Health], None]


def _seen(h: Health) -> tuple[bool, str | None, int]:
    """What a change is made of: serving, the leader, and its term (no leader: no term to tell apart)."""
    return (h.serving, h.leader, h.term if h.leader is not None else 0)


class HealthMonitor:
    """Polls ``check_health`` and calls each listener ``(before, now)`` when serving or the leader changes
    (the same leader in a new term counts: it was elected again; ``before`` is None the first time). Listeners run on the monitor's thread: keep them short."""

    def __init__(
        self,
        raft: QuorumView,
        names: dict[str, str] | None = None,
        interval: float = POLL_INTERVAL_S,
        fitness: Fitness | None = None,
    ) -> None:
        self._raft = raft
        self._names = names
        self._fitness = fitness
        self._interval = interval
        self.listeners: list[Listener] = []
        self._last: Health | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="health", daemon=True)

    @property
    def last(self) -> Health | None:
        return self._last

    def poll(self) -> Health:
        """Look once; tell the listeners if something changed (the thread calls this every interval)."""
        now = check_health(self._raft, self._names, self._fitness)
        before = self._last
        if before is None or _seen(before) != _seen(now):
            self._last = now
            if before is None or before.serving != now.serving:
                log.info("health: %s", now.reason)
            for listener in self.listeners:
                try:
                    listener(before, now)
                except Exception:  # noqa: BLE001 - one listener failing must not stop the others
                    log.exception("health listener failed")
        return now

    def start(self) -> None:
        self.poll()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - Raft shutting down under us; try again next time
                log.debug("health poll failed", exc_info=True)
