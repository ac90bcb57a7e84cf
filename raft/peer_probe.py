"""Probes between peers over the Raft connections: a keepalive, each peer's clock offset, and what each
node says of itself.

Every node sends each peer it is connected to a probe twice a second (``PROBE_INTERVAL_S``) and answers
each probe it gets at once, on the same Raft connection (authenticated by the cluster's secret like any
Raft message). So:

* no link between two live nodes is ever idle: ``raftsched.raft.connection`` drops one that read nothing for its
  timeout, and a frozen or vanished peer is found by that bound, not by TCP;
* each answer measures the peer's wall clock against this node's, NTP-style: the probe carries this
  node's wall time ``t0`` and monotonic time ``m0``, the answer the peer's wall time ``t1``; when it comes
  back at monotonic ``m2`` the round trip is ``m2 - m0`` and the peer's clock is ahead of ours by
  ``t1 - t0 - (m2 - m0) / 2``, give or take half the round trip (the error). A step of this node's wall
  clock between sending and receiving changes nothing: only ``t0`` is a wall time of ours;
* each probe and answer carries the sender's ``report()``: a small dict of plain values the layer above
  fills (its clock and its disk, say), so every node knows how its peers see themselves. The Raft
  adapter adds ``DISK`` of its own (``own``): why this node cannot write its log or state now, if it
  cannot; a leader does not hold its snapshot back for a follower that says so (``disk_stuck``).

Probes are messages of types pysyncobj does not know: they are answered and consumed here, in the
transport's message hook (``raftsched.raft.pysyncobj_patches``), before pysyncobj sees them; a node of an older
version ignores them (pysyncobj ignores types it does not know), it just never answers. They are sent
only to peers pysyncobj counts as connected (the handshake and the node's address came first) and never
wait for the Raft log to be committed: they promise nothing about it.

Everything here runs on the node's tick thread except ``readings`` and ``reports``, which any thread may
call (they copy dicts that the tick thread replaces, never mutates in place).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

PROBE = "raftsched.probe"
ANSWER = "raftsched.probe_answer"
#: the report key the Raft adapter fills: why this node cannot write its disk (absent while it can)
DISK = "raft_disk"
#: a report older than this (seconds) says nothing any more about a peer's disk
FRESH_S = 3.0
#: how often each peer is probed (seconds); the contract asks for at least once a second
PROBE_INTERVAL_S = 0.5


@dataclass(frozen=True)
class PeerReading:
    """One answered probe: ``offset_ms`` is the peer's wall clock minus this node's, ``error_ms`` half the
    round trip, ``at`` this node's monotonic time when the answer came."""

    offset_ms: float
    error_ms: float
    at: float


Report = dict[str, Any]


class PeerProbes:
    def __init__(
        self,
        report: Callable[[], Report] = dict,
        interval: float = PROBE_INTERVAL_S,
        wall_ns: Callable[[], int] = time.time_ns,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        #: what this node says of itself in every probe and answer (set by the layer above)
        self.report = report
        #: what the Raft adapter adds to it (``DISK``)
        self.own: Callable[[], Report] = dict
        self._interval = interval
        self._wall_ns = wall_ns
        self._monotonic = monotonic
        self._sent: dict[Any, float] = {}
        self._readings: dict[str, PeerReading] = {}
        self._reports: dict[str, tuple[float, Report]] = {}

    # ---------------------------------------------------------- any thread

    def readings(self) -> dict[str, PeerReading]:
        """The last answered probe of each peer, by its Raft address."""
        return dict(self._readings)

    def reports(self) -> dict[str, tuple[float, Report]]:
        """What each peer last said of itself, by Raft address, with this node's monotonic time of hearing it."""
        return dict(self._reports)

    def disk_stuck(self, address: str) -> bool:
        """Whether ``address`` said lately that it cannot write its disk (``DISK``)."""
        heard = self._reports.get(address)
        return heard is not None and self._monotonic() - heard[0] <= FRESH_S and bool(heard[1].get(DISK))

    # ---------------------------------------------------------- tick thread

    def tick(self, connections: dict[Any, Any], connected: Callable[[Any], bool], connected_state: int) -> None:
        """Probe every peer that is connected and was not probed for ``interval`` (``connections``: pysyncobj's
        node -> connection map; ``connected(node)``: whether pysyncobj counts it)."""
        now = self._monotonic()
        for node, conn in list(connections.items()):
            if conn.state != connected_state or not connected(node):
                self._sent.pop(node, None)
                continue
            if now - self._sent.get(node, -1e9) < self._interval:
                continue
            self._sent[node] = now
            conn.send({"type": PROBE, "t0": self._wall_ns(), "m0": now, "r": self._own_report()})

    def on_message(self, node: Any, message: Any, connection: Any, connected_state: int) -> bool:
        """Consume a probe (answer it) or an answer (record it); False for any other message."""
        if type(message) is not dict:
            return False
        kind = message.get("type")
        if kind == PROBE:
            if connection is not None and connection.state == connected_state:
                connection.send({"type": ANSWER, "t0": message.get("t0"), "m0": message.get("m0"), "t1": self._wall_ns(),
                                 "r": self._own_report()})  # fmt: skip
            self._heard(node, message.get("r"))
            return True
        if kind == ANSWER:
            self._answered(node, message)
            return True
        return False

    def forget(self, node: Any) -> None:
        """``node`` left the configuration: its readings go with it."""
        self._sent.pop(node, None)
        address = _address(node)
        self._readings = {a: r for a, r in self._readings.items() if a != address}
        self._reports = {a: r for a, r in self._reports.items() if a != address}

    def _own_report(self) -> Report:
        try:
            return {**self.report(), **self.own()}
        except Exception:  # noqa: BLE001 - a probe must go out whatever the layer above does
            return {}

    def _heard(self, node: Any, report: Any) -> None:
        if isinstance(report, dict):
            reports = dict(self._reports)
            reports[_address(node)] = (self._monotonic(), report)
            self._reports = reports

    def _answered(self, node: Any, message: dict[str, Any]) -> None:
        now = self._monotonic()
        t0, m0, t1 = message.get("t0"), message.get("m0"), message.get("t1")
        if not (isinstance(t0, int) and isinstance(t1, int) and isinstance(m0, float)) or not 0 <= now - m0 < 60:
            return  # not an answer to a probe of ours (or one from before a long stall)
        rtt_ms = (now - m0) * 1000.0
        offset_ms = (t1 - t0) / 1e6 - rtt_ms / 2
        readings = dict(self._readings)
        readings[_address(node)] = PeerReading(offset_ms, rtt_ms / 2, now)
        self._readings = readings
        self._heard(node, message.get("r"))


def _address(node: Any) -> str:
    return str(getattr(node, "id", node))
