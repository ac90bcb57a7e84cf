"""Leadership and timing as the liveness tests and the soak script see them, by a correct clock (this process's).

- ``named_leader`` / ``wait_agreed``: the leader a set of nodes name, once they all name the same one (each
  node asked with a short timeout, so a frozen or dead node only costs that timeout; leave such a node out
  of ``nodes``); ``wait_agreed`` also says how long it took.
- ``EventClock``: follows ``WatchRuns`` of a queue on several nodes at once and notes, on this process's wall
  clock, when each run was first seen fired and each lease first seen granted (a change is applied before
  any node streams it, so the moment it is seen is never earlier than the moment it happened).
- ``attempt_leases``: the leases of runs as their replicated attempt records tell them (granted at
  ``leased_at``, ended at ``finished_at``), for the history checker's "one holder at a time" when no single
  node lives through a whole test to watch its leases.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable

import grpc

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.history import LeaseRecord

#: how long one GetClusterStatus may take before its node counts as naming no leader
STATUS_TIMEOUT_S = 0.5


def named_leader(cluster: LocalCluster, nodes: Iterable[str], among: Iterable[str] | None = None) -> str | None:
    """The leader every one of ``nodes`` names, when they all name the same one and it is one of ``among``
    (default: of ``nodes``); else None."""
    nodes = list(nodes)
    allowed = set(nodes if among is None else among)
    named = set()
    for node_id in nodes:
        status = cluster.status(node_id, STATUS_TIMEOUT_S)
        named.add(status.leader_id if status is not None else None)
        if len(named) > 1:
            return None
    (leader,) = named
    return leader if leader in allowed else None


def wait_agreed(
    cluster: LocalCluster, nodes: Iterable[str], timeout: float, among: Iterable[str] | None = None, since: float | None = None
) -> tuple[str | None, float]:
    """Wait up to ``timeout`` s for ``nodes`` to agree on a leader among ``among``; (the leader or None, seconds
    from ``since`` (monotonic; default now) to the first look that saw them agree, or to giving up)."""
    nodes = list(nodes)
    start = time.monotonic() if since is None else since
    deadline = time.monotonic() + timeout
    while True:
        leader = named_leader(cluster, nodes, among)
        if leader is not None:
            return leader, time.monotonic() - start
        if time.monotonic() >= deadline:
            return None, time.monotonic() - start
        time.sleep(0.05)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Seen:
    """A change first seen at ``seen_ms`` (this process's wall clock) on node ``node``."""

    run_id: str
    job_id: str
    scheduled_ms: int
    #: the leader's own stamp: when the fire was proposed (``fired_at``) or the lease granted (the attempt's
    #: ``leased_at``)
    stamped_ms: int
    attempt: int
    seen_ms: int
    node: str


class EventClock:
    """First sightings of fires and lease grants of ``queue`` on the given nodes; a context manager.

    Each node's stream runs in a thread; a stream that breaks (its node killed or frozen) is opened again
    every ``retry_s`` until the clock is closed: a change is still seen first on whichever node streams it
    first."""

    def __init__(self, addresses: dict[str, str], queue: str, retry_s: float = 0.3) -> None:
        self.queue = queue
        self._retry_s = retry_s
        self._lock = threading.Lock()
        self.fired: dict[str, Seen] = {}
        #: (run id, attempt) -> its grant
        self.leased: dict[tuple[str, int], Seen] = {}
        self._stop = threading.Event()
        self._calls: dict[str, Any] = {}
        self._threads = [
            threading.Thread(target=self._follow, args=(node, address), name=f"event-clock-{node}", daemon=True)
            for node, address in addresses.items()
        ]
        for t in self._threads:
            t.start()

    def __enter__(self) -> "EventClock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            calls = list(self._calls.values())
        for call in calls:
            call.cancel()
        for t in self._threads:
            t.join(10)

    def _follow(self, node: str, address: str) -> None:
        while not self._stop.is_set():
            try:
                with Client([address], deadline_s=5) as client:
                    stream: Any = client.watch_runs(queue=self.queue, kinds=["fired", "leased"])  # a gRPC call: cancel()
                    with self._lock:
                        self._calls[node] = stream
                    if self._stop.is_set():
                        stream.cancel()
                    for event in stream:
                        self._on(node, event, now_ms())
            except grpc.RpcError:
                pass
            self._stop.wait(self._retry_s)

    def _on(self, node: str, event: pb.RunEvent, seen: int) -> None:
        run = event.run
        if event.kind == "fired":
            key: object = run.run_id
            table: dict = self.fired
            stamped = cv.ts_ms(run.fired_at)
        elif event.kind == "leased":
            key, table = (run.run_id, run.attempt), self.leased
            attempts = [a for a in run.attempts if a.attempt == run.attempt]
            stamped = cv.ts_ms(attempts[0].leased_at) if attempts else 0
        else:
            return
        with self._lock:
            if key not in table or table[key].seen_ms > seen:
                table[key] = Seen(run.run_id, run.job_id, cv.ts_ms(run.scheduled_time), stamped, run.attempt, seen, node)

    def sightings(self) -> tuple[list[Seen], list[Seen]]:
        """(fires, grants) seen so far."""
        with self._lock:
            return list(self.fired.values()), list(self.leased.values())


def attempt_leases(runs: Iterable[pb.Run]) -> list[LeaseRecord]:
    """Each attempt of ``runs`` as a lease held from its ``leased_at`` to its ``finished_at`` (None while it runs),
    in milliseconds of the state's clock (the greatest time any command carried: it never goes back)."""
    leases = []
    for run in runs:
        for a in run.attempts:
            if not a.lease_id:
                continue
            end = cv.ts_ms(a.finished_at) if a.HasField("finished_at") else None
            leases.append(LeaseRecord(run.run_id, a.attempt, a.fencing_token, a.executor_id, cv.ts_ms(a.leased_at), end))
    return leases
