"""The clock-offset guard, the leader's clock of renewals and stepping aside, on fake clocks and readings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from raftsched.cluster.node.clock import FakeClock
from raftsched.cluster.node.clock_guard import ClockGuard, span_words
from raftsched.cluster.node.fitness import CLOCK, STORAGE, Fitness, FitnessView, StepAside
from raftsched.cluster.node.lease_watch import LeaseWatch

pytestmark = pytest.mark.unit

PEERS = ["127.0.0.1:7002", "127.0.0.1:7003"]
NAMES = {"127.0.0.1:7002": "n2", "127.0.0.1:7003": "n3"}


@dataclass(frozen=True)
class Reading:
    offset_ms: float
    error_ms: float
    at: float


class SteppingClock(FakeClock):
    """A fake clock whose wall time can jump while its monotonic time does not."""

    def __init__(self) -> None:
        super().__init__()
        self.wall_shift = 0

    def now_ms(self) -> int:
        return super().now_ms() + self.wall_shift


def _guard(readings: dict[str, Reading], clock: FakeClock | None = None, peers: list[str] = PEERS) -> tuple[ClockGuard, Fitness]:
    fitness = Fitness()
    guard = ClockGuard(fitness, clock or FakeClock(), lambda: readings, lambda: peers, 500, lambda a: NAMES.get(a, a))
    return guard, fitness


def test_a_clock_is_unconfirmed_until_readings_show_a_majority_agreeing() -> None:
    clock = FakeClock()
    readings: dict[str, Reading] = {}
    guard, fitness = _guard(readings, clock)
    assert guard.stamp_refusal() is not None and not fitness.ok(CLOCK)
    guard.update()
    assert "clock not confirmed: no recent reading of n2, n3" in (guard.stamp_refusal() or "")
    readings["127.0.0.1:7002"] = Reading(+120.0, 1.0, clock.monotonic())
    guard.update()
    assert guard.stamp_refusal() is None and fitness.ok(CLOCK)  # itself and n2: two of three


def test_a_clock_off_from_a_majority_says_by_how_much_and_recovers_by_itself() -> None:
    clock = FakeClock()
    now = clock.monotonic()
    readings = {a: Reading(-300_200.0, 0.5, now) for a in PEERS}  # both peers 300.2 s behind this node
    guard, fitness = _guard(readings, clock)
    guard.update()
    assert guard.stamp_refusal() == "clock offset +300.2 s from n2, n3 (max 500 ms)"
    assert fitness.reason() == "clock offset +300.2 s from n2, n3 (max 500 ms)"
    readings.update({a: Reading(30.0, 0.5, now) for a in PEERS})
    guard.update()
    assert guard.stamp_refusal() is None and fitness.fit


def test_one_bad_peer_of_three_does_not_make_the_others_unfit_but_is_seen() -> None:
    clock = FakeClock()
    now = clock.monotonic()
    guard, fitness = _guard({PEERS[0]: Reading(10.0, 1.0, now), PEERS[1]: Reading(300_000.0, 1.0, now)}, clock)
    guard.update()
    assert fitness.fit
    offsets = guard.offsets()
    assert offsets[PEERS[1]].measured and offsets[PEERS[1]].offset_ms == 300_000.0


def test_stale_readings_count_for_nothing() -> None:
    clock = FakeClock()
    readings = {a: Reading(0.0, 1.0, clock.monotonic()) for a in PEERS}
    guard, fitness = _guard(readings, clock)
    guard.update()
    assert fitness.fit
    clock.advance(3_500)
    guard.update()
    assert not fitness.ok(CLOCK)
    assert not guard.offsets()[PEERS[0]].measured


def test_a_step_of_the_wall_clock_stops_stamping_at_once_until_readings_after_it_confirm_it() -> None:
    clock = SteppingClock()
    readings = {a: Reading(0.0, 1.0, clock.monotonic()) for a in PEERS}
    guard, fitness = _guard(readings, clock)
    guard.update()
    assert guard.stamp_refusal() is None
    clock.advance(100)
    clock.wall_shift = 300_000  # an NTP step, a VM resumed: the monotonic clock did not move
    refusal = guard.stamp_refusal()
    assert refusal is not None and refusal.startswith("clock stepped by +300.0 s against the monotonic clock")
    guard.update()  # the readings predate the step: they confirm nothing
    assert guard.stamp_refusal() is not None
    clock.advance(600)
    readings.update({a: Reading(-300_000.0, 1.0, clock.monotonic()) for a in PEERS})  # after it: the peers disagree
    guard.update()
    assert "clock offset +300.0 s from n2, n3" in (guard.stamp_refusal() or "")
    clock.wall_shift = 0  # stepped back: readings after that agree again
    assert guard.stamp_refusal() is not None
    clock.advance(600)
    readings.update({a: Reading(5.0, 1.0, clock.monotonic()) for a in PEERS})
    guard.update()
    assert guard.stamp_refusal() is None and fitness.fit


def test_a_slow_drift_is_not_a_step() -> None:
    clock = SteppingClock()
    guard, _ = _guard({a: Reading(0.0, 1.0, 0.0) for a in PEERS}, clock, peers=[])
    guard.update()
    for _ in range(100):
        clock.advance(1000)
        clock.wall_shift += 40  # 4 % fast: far more than any NTP slew, still under the step bound per look
        assert guard.stamp_refusal() is None


def test_span_words() -> None:
    assert span_words(300_200) == "+300.2 s"
    assert span_words(-612.4) == "-612 ms"


class Membership:
    def __init__(self) -> None:
        self.held: dict[str, bool] = {}
        self.transfers: list[str | None] = []
        self.matched = {"127.0.0.1:7002": 10, "127.0.0.1:7003": 12}

    def hold_elections(self, hold: bool, reason: str = "membership") -> None:
        self.held[reason] = hold

    def transfer_leadership(self, to: str | None = None) -> None:
        self.transfers.append(to)

    def match_index(self, address: str) -> int:
        return self.matched.get(address, 0)


def test_an_unfit_node_holds_elections_and_as_leader_hands_over_to_a_fit_follower() -> None:
    clock = FakeClock()
    fitness = Fitness()
    raft = Membership()
    leading = [True]
    reports: dict[str, tuple[float, dict[str, Any]]] = {
        "127.0.0.1:7002": (clock.monotonic(), {"clock_ok": True, "storage_ok": True, "unfit": ""}),
        "127.0.0.1:7003": (clock.monotonic(), {"clock_ok": True, "storage_ok": False, "unfit": "disk full: /x"}),
    }
    aside = StepAside(fitness, lambda: leading[0], raft, lambda: PEERS, lambda: reports, clock.monotonic)
    aside.step()
    assert raft.held == {} and raft.transfers == []  # fit: nothing to do
    fitness.set(STORAGE, "disk full: /data/n1/raft.lmdb")
    aside.step()
    assert raft.held == {"unfit": True}
    assert raft.transfers == ["127.0.0.1:7002"]  # n3 is more caught up, but its disk is full
    aside.step()
    assert raft.transfers == ["127.0.0.1:7002"]  # asked again only after a while
    clock.advance(600)
    aside.step()
    assert len(raft.transfers) == 2
    fitness.set(STORAGE, None)
    aside.step()
    assert raft.held == {"unfit": False}


def test_the_fitness_view_shows_each_member_as_it_reported_itself() -> None:
    clock = FakeClock()
    fitness = Fitness()
    fitness.set(CLOCK, "clock offset +1.0 s from n2, n3 (max 500 ms)")
    reports = {"127.0.0.1:7002": (clock.monotonic(), {"clock_ok": True, "storage_ok": False, "unfit": "disk full: /d"})}
    from raftsched.cluster.node.clock_guard import PeerOffset

    offsets = {"127.0.0.1:7002": PeerOffset(-1000.0, True), "127.0.0.1:7003": PeerOffset(0.0, False)}
    view = FitnessView("127.0.0.1:7001", fitness, lambda: offsets, lambda: reports, clock.monotonic)
    me, n2, n3 = (view.of(a) for a in ("127.0.0.1:7001", *PEERS))
    assert (me.clock_ok, me.storage_ok, me.unfit) == (False, True, "clock offset +1.0 s from n2, n3 (max 500 ms)")
    assert (n2.offset_ms, n2.measured, n2.clock_ok, n2.storage_ok, n2.unfit) == (-1000.0, True, True, False, "disk full: /d")
    assert (n3.measured, n3.clock_ok, n3.storage_ok) == (False, False, False)  # not heard from: unknown
    clock.advance(3_500)
    assert view.of(PEERS[0]).clock_ok is False  # a stale report says nothing


@dataclass
class Run:
    lease_id: str


def test_a_renewed_lease_never_expires_by_the_wall_clock_alone() -> None:
    clock = FakeClock()
    watch = LeaseWatch(clock.monotonic, grace_s=2.0)
    assert not watch.may_expire("old", 1000)  # not leading
    watch.lead(True)
    assert not watch.may_expire("old", 1000)  # inherited: the grace first
    clock.advance(2_000)
    assert watch.may_expire("old", 1000)
    watch.on_applied([("leased", Run("a"))])
    clock.advance(900)
    assert not watch.may_expire("a", 1000)
    watch.on_applied([("lease_renewed", Run("a"))])
    clock.advance(900)
    assert not watch.may_expire("a", 1000)  # renewed 0.9 s ago, whatever the deadline says
    clock.advance(100)
    assert watch.may_expire("a", 1000)
    watch.on_applied([("finished", Run("a"))])
    assert len(watch) == 0
    watch.lead(False)
    assert not watch.may_expire("a", 1000)
