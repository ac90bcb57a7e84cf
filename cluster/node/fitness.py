"""Whether this node is fit to act on time and on disk, and what it does while it is not.

``Fitness`` holds the problems that keep this node from firing, granting or
expiring leases and from leading, by kind: ``CLOCK`` (its wall clock is off
from a majority of the members, or stepped and is not confirmed yet:
``raftsched.cluster.node.clock_guard``) and ``STORAGE`` (its disk refuses writes).
Whoever finds a problem sets it, and clears it when it is gone; everyone
else reads:

* the health check (``raftsched.cluster.node.health``): NOT_SERVING, ``/healthz`` 503,
  with the problem's words;
* the leader loop and the lease service: nothing is fired, granted or
  expired while unfit;
* ``report()``: what this node tells its peers of itself in every Raft probe
  (``raftsched.raft.peer_probe``), so that ``GetClusterStatus`` on any node shows
  each member's ``clock_ok`` and ``storage_ok``, and a leader that must step
  aside picks a fit successor;
* ``StepAside``: while unfit this node never campaigns, and as leader it
  hands leadership to a fit, caught-up follower within about a second.

Any thread may call any method.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

log = logging.getLogger("raftsched.fitness")

CLOCK = "clock"
STORAGE = "storage"
#: what a probe report says of a fit node (``Fitness.report``)
REPORT_CLOCK_OK, REPORT_STORAGE_OK, REPORT_UNFIT = "clock_ok", "storage_ok", "unfit"
#: a peer's report older than this (seconds) says nothing any more
REPORT_FRESH_S = 3.0


class Fitness:
    def __init__(self) -> None:
        self._problems: dict[str, str] = {}
        self._quiet: set[str] = set()
        self._lock = threading.Lock()

    def set(self, kind: str, reason: str | None, quiet: bool = False) -> None:
        """``reason`` is the problem of this ``kind`` now (None: there is none). ``quiet``: not worth a warning
        (the state a node starts in, until it has measured anything); its end is not either."""
        with self._lock:
            before = self._problems.get(kind)
            if reason == before:
                return
            problems = dict(self._problems)
            if reason is None:
                problems.pop(kind, None)
            else:
                problems[kind] = reason
            self._problems = problems
            was_quiet = kind in self._quiet
            if quiet and reason is not None:
                self._quiet.add(kind)
            else:
                self._quiet.discard(kind)
        if quiet or (reason is None and was_quiet):
            log.info("%s: %s", kind, reason or "ok")
        elif reason is None:
            log.warning("%s ok again (was: %s)", kind, before)
        elif before is None or was_quiet:
            log.error("unfit to lead, fire or grant: %s", reason)

    def problems(self) -> dict[str, str]:
        return self._problems

    @property
    def fit(self) -> bool:
        return not self._problems

    def ok(self, kind: str) -> bool:
        return kind not in self._problems

    def reason(self) -> str:
        """The problems in words (empty when fit)."""
        return "; ".join(self._problems[k] for k in sorted(self._problems))

    def report(self) -> dict[str, Any]:
        """What this node says of itself to its peers (plain values: it travels in Raft probes)."""
        problems = self._problems
        return {REPORT_CLOCK_OK: CLOCK not in problems, REPORT_STORAGE_OK: STORAGE not in problems, REPORT_UNFIT: self.reason()}


class LeadershipControl(Protocol):
    """What stepping aside needs from Raft (``raftsched.raft.membership.RaftMembership``)."""

    def hold_elections(self, hold: bool, reason: str = ...) -> None: ...

    def transfer_leadership(self, to: str | None = None) -> None: ...

    def match_index(self, address: str) -> int: ...


#: how often a leader that must step aside asks again (a transfer is denied while no follower is caught up)
TRANSFER_EVERY_S = 0.5


class StepAside:
    """While ``fitness`` is not fit: hold elections (this node never campaigns; it still votes and follows), and as
    leader hand leadership to a follower whose last report says it is fit, the most caught-up first.

    ``peers()`` gives the other members' Raft addresses, ``reports()`` what each last said of itself (by Raft
    address: ``(monotonic time heard, report)``). ``step`` runs every fraction of a second on a thread of the
    node's (``FitnessLoop``)."""

    def __init__(
        self,
        fitness: Fitness,
        is_leader: Callable[[], bool],
        raft: LeadershipControl,
        peers: Callable[[], list[str]],
        reports: Callable[[], dict[str, tuple[float, dict[str, Any]]]],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fitness = fitness
        self._is_leader = is_leader
        self._raft = raft
        self._peers = peers
        self._reports = reports
        self._monotonic = monotonic
        self._asked = -1e9
        self._held = False

    def step(self) -> None:
        unfit = not self._fitness.fit
        if unfit != self._held:
            self._held = unfit
            self._raft.hold_elections(unfit, "unfit")
        if not unfit or not self._is_leader():
            return
        now = self._monotonic()
        if now - self._asked < TRANSFER_EVERY_S:
            return
        self._asked = now
        target = self.successor()
        log.warning(
            "this leader is unfit (%s): handing leadership to %s", self._fitness.reason(), target or "the most caught-up follower"
        )
        self._raft.transfer_leadership(target)

    def successor(self) -> str | None:
        """The fit follower to hand over to (the most caught-up of them), or None when no report says one is fit."""
        now = self._monotonic()
        reports = self._reports()
        fit = []
        for address in self._peers():
            heard = reports.get(address)
            if heard is None or now - heard[0] > REPORT_FRESH_S:
                continue
            report = heard[1]
            if report.get(REPORT_CLOCK_OK) is True and report.get(REPORT_STORAGE_OK) is True:
                fit.append((self._raft.match_index(address), address))
        return max(fit)[1] if fit else None


class FitnessLoop:
    """Runs ``steps`` (the clock guard's update, ``StepAside.step``, ...) every ``interval`` seconds on a thread."""

    def __init__(self, steps: list[Callable[[], None]], interval: float = 0.2) -> None:
        self.steps = steps
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fitness", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            for step in self.steps:
                try:
                    step()
                except Exception:  # noqa: BLE001 - one failing check must not stop the others
                    log.exception("fitness step failed")


@dataclass(frozen=True)
class MemberFitness:
    """A member as this node sees it: its clock against this node's, and what it last said of itself."""

    #: its wall clock minus this node's (ms); 0 when not measured
    offset_ms: float
    measured: bool
    clock_ok: bool
    storage_ok: bool
    #: why it is unfit, in its own words ("" when fit or unknown)
    unfit: str


class FitnessView:
    """Every member's fitness for ``GetClusterStatus`` and the metrics: this node's own, and each peer's from its
    last probe report (fresh ones only; a peer not heard from lately is neither ok nor measured)."""

    def __init__(
        self,
        self_address: str,
        fitness: Fitness,
        offsets: Callable[[], dict[str, Any]],
        reports: Callable[[], dict[str, tuple[float, dict[str, Any]]]],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._self = self_address
        self._fitness = fitness
        self._offsets = offsets
        self._reports = reports
        self._monotonic = monotonic

    @property
    def fitness(self) -> Fitness:
        return self._fitness

    def offsets(self) -> dict[str, Any]:
        """The peers' clock offsets by Raft address (``raftsched.cluster.node.clock_guard.PeerOffset``)."""
        return self._offsets()

    def of(self, address: str) -> MemberFitness:
        if address == self._self:
            f = self._fitness
            return MemberFitness(0.0, True, f.ok(CLOCK), f.ok(STORAGE), f.reason())
        offset = self._offsets().get(address)
        measured = offset is not None and bool(offset.measured)
        offset_ms = float(offset.offset_ms) if offset is not None and measured else 0.0
        heard = self._reports().get(address)
        if heard is None or self._monotonic() - heard[0] > REPORT_FRESH_S:
            return MemberFitness(offset_ms, measured, False, False, "")
        report = heard[1]
        return MemberFitness(
            offset_ms,
            measured,
            report.get(REPORT_CLOCK_OK) is True,
            report.get(REPORT_STORAGE_OK) is True,
            str(report.get(REPORT_UNFIT, "")),
        )
