"""The clock-offset guard: this node acts on its wall clock only while a majority of the members agree with it.

Every command a node proposes carries its wall-clock time, and the state
machine keeps the greatest time any command carried as "now": what is due,
leasable or expired is judged by it. So a single node whose clock ran ahead
would make every replica fire early and expire leases that are being renewed
— the leader by firing, any node by stamping any command. The guard stops
that at the source, as CockroachDB's ``--max-offset`` does:

* **Offsets.** Every node measures every peer's wall clock against its own
  over their Raft link at least once a second (``raftsched.raft.peer_probe``:
  NTP-style, the error half the round trip). A reading older than
  ``FRESH_S`` counts for nothing.
* **Agreement.** This node's clock is ok while it agrees within
  ``max_clock_offset`` with a majority of the members, counting itself:
  with fresh readings of enough peers whose offset is at most the maximum.
  A node that cannot confirm its clock (its peers unreachable, or their
  clocks off) is not ok: it never fires early on a guess.
* **Steps.** ``stamp_refusal`` compares the wall clock with the monotonic
  clock every time it is asked (before every proposal, fire, grant and
  expiry): a jump larger than ``max_clock_offset`` since the last look (an
  NTP step, a VM resumed) makes the clock unconfirmed at once, until
  readings taken after the jump show a majority agreeing again.
* **While not ok**, ``Fitness`` holds a ``CLOCK`` problem (health
  NOT_SERVING with the reason, no campaigning, leadership handed away:
  ``raftsched.cluster.node.fitness``) and this node proposes nothing stamped with its
  clock: ``stamp_refusal`` says why, and writes sent to it are
  ``UNAVAILABLE`` (clients go to another node). It recovers by itself when
  its clock does.

``stamp_refusal`` and ``offsets`` may be called from any thread; ``update``
runs on the fitness loop (``raftsched.cluster.node.fitness.FitnessLoop``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol

from raftsched.cluster.node.clock import Clock
from raftsched.cluster.node.fitness import CLOCK, Fitness

#: a reading older than this (seconds) says nothing about a peer's clock any more
FRESH_S = 3.0


class Reading(Protocol):
    """One measurement of a peer's clock (``raftsched.raft.peer_probe.PeerReading``)."""

    @property
    def offset_ms(self) -> float: ...

    @property
    def error_ms(self) -> float: ...

    @property
    def at(self) -> float: ...


@dataclass(frozen=True)
class PeerOffset:
    """A peer's clock as this node last measured it: ``offset_ms`` = the peer's clock minus this node's."""

    offset_ms: float
    measured: bool


def span_words(ms: float) -> str:
    """``+300.2 s``, ``-612 ms``: a signed span for people."""
    sign = "+" if ms >= 0 else "-"
    ms = abs(ms)
    return f"{sign}{ms / 1000:.1f} s" if ms >= 1000 else f"{sign}{ms:.0f} ms"


class ClockGuard:
    def __init__(
        self,
        fitness: Fitness,
        clock: Clock,
        readings: Callable[[], Mapping[str, Reading]],
        peers: Callable[[], list[str]],
        max_offset_ms: int,
        name_of: Callable[[str], str] = str,
    ) -> None:
        """``readings()``: the last reading of each peer, by Raft address; ``peers()``: the other members' Raft
        addresses now; ``name_of(address)``: the node id to name a peer by."""
        self._fitness = fitness
        self._clock = clock
        self._readings = readings
        self._peers = peers
        self.max_offset_ms = max_offset_ms
        self._name_of = name_of
        self._lock = threading.Lock()
        self._base: float | None = None  # wall minus monotonic (ms) at the last look
        #: monotonic time of an unconfirmed step of the wall clock, and its size (ms)
        self._stepped_at: float | None = None
        self._step_ms = 0.0
        self._verdict: str | None = "clock not confirmed yet: no reading of the peers' clocks so far"
        self._fitness.set(CLOCK, self._verdict, quiet=True)

    # ---------------------------------------------------------- any thread

    def stamp_refusal(self) -> str | None:
        """Why this node must not act on its wall clock now (propose a command stamped with it, fire, grant or
        expire), or None when it may. Looks for a step of the wall clock first."""
        self._look_for_step()
        if self._stepped_at is not None or self._verdict is not None:
            return self._fitness.problems().get(CLOCK) or self._verdict
        return None

    def offsets(self) -> dict[str, PeerOffset]:
        """Each peer's clock as measured now (fresh readings only; ``measured`` False: unknown)."""
        now = self._clock.monotonic()
        readings = self._readings()
        out = {}
        for address in self._peers():
            r = readings.get(address)
            fresh = r is not None and now - r.at <= FRESH_S
            out[address] = PeerOffset(r.offset_ms if r is not None and fresh else 0.0, fresh)
        return out

    # ---------------------------------------------------------- the fitness loop

    def update(self) -> None:
        """Judge the clock from the readings (and confirm or keep a step); set or clear the ``CLOCK`` problem."""
        self._look_for_step()
        with self._lock:
            stepped_at, step_ms = self._stepped_at, self._step_ms
        now = self._clock.monotonic()
        since = stepped_at if stepped_at is not None else now - FRESH_S
        verdict = self._judge(since)
        if stepped_at is not None:
            if verdict is None:
                with self._lock:
                    if self._stepped_at == stepped_at:
                        self._stepped_at, self._step_ms = None, 0.0
            else:
                verdict = (
                    f"clock stepped by {span_words(step_ms)} against the monotonic clock: not firing, granting or "
                    f"expiring leases until the peers confirm it ({verdict})"
                )
        self._verdict = verdict
        self._fitness.set(CLOCK, verdict, quiet=not self._readings())  # nothing measured yet: starting, not failing

    def _judge(self, since: float) -> str | None:
        """None when readings taken after ``since`` show a majority agreeing, else why not."""
        peers = self._peers()
        majority = (len(peers) + 1) // 2 + 1
        readings = self._readings()
        agree = 1  # this node agrees with itself
        off: list[tuple[str, float]] = []
        unknown: list[str] = []
        for address in peers:
            r = readings.get(address)
            if r is None or r.at - 2 * r.error_ms / 1000.0 < since:  # its probe left before ``since``
                unknown.append(address)
            elif abs(r.offset_ms) <= self.max_offset_ms:
                agree += 1
            else:
                off.append((address, r.offset_ms))
        if agree >= majority:
            return None
        limit = span_words(self.max_offset_ms).lstrip("+")
        if off:
            mean = sum(-o for _, o in off) / len(off)  # this node's clock minus theirs
            names = ", ".join(self._name_of(a) for a, _ in off)
            text = f"clock offset {span_words(mean)} from {names} (max {limit})"
            if unknown:
                text += f"; no recent reading of {', '.join(self._name_of(a) for a in unknown)}"
            return text
        return (
            f"clock not confirmed: no recent reading of {', '.join(self._name_of(a) for a in unknown)}, and a majority "
            f"of the members must agree within {limit}"
        )

    def _look_for_step(self) -> None:
        wall = self._clock.now_ms()
        mono = self._clock.monotonic()
        skew = wall - mono * 1000.0
        with self._lock:
            base, self._base = self._base, skew
            if base is None:
                return
            jump = skew - base
            if abs(jump) <= self.max_offset_ms:
                return
            self._stepped_at = mono
            self._step_ms += jump
            step_ms = self._step_ms
        reason = (
            f"clock stepped by {span_words(step_ms)} against the monotonic clock: not firing, granting or expiring "
            "leases until the peers confirm it"
        )
        self._verdict = reason
        self._fitness.set(CLOCK, reason)
