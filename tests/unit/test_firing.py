"""Tests for raftsched.cluster.domain.schedule.firing.plan: misfire policies, catchup window, lookahead, decision budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched.cluster.domain.model import After, At, Cron, Every, MisfirePolicy
from raftsched.cluster.domain.schedule import next_fire
from raftsched.cluster.domain.schedule.firing import (
    _COUNT_CAP,
    DECISION_BUDGET,
    Decision,
    FireAt,
    Skip,
    Window,
    plan,
    skip_through,
)

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SEC = 1_000
MIN = 60 * SEC
DAY = 24 * 60 * MIN

ALL, ONCE, SKIP = MisfirePolicy.FIRE_ALL, MisfirePolicy.FIRE_ONCE, MisfirePolicy.SKIP


def win(now: int, policy: MisfirePolicy = ALL, look: int = 0, thr: int = 500, catchup: int = DAY) -> Window:
    return Window(now_ms=now, lookahead_ms=look, misfire_threshold_ms=thr, catchup_window_ms=catchup, policy=policy)


def fired(decisions: list[Decision]) -> list[int]:
    return [d.instant_ms for d in decisions if isinstance(d, FireAt)]


def skipped(decisions: list[Decision]) -> list[Skip]:
    return [d for d in decisions if isinstance(d, Skip)]


# ------------------------------------------------------------------ on time, lookahead


@pytest.mark.parametrize("policy", list(MisfirePolicy))
@pytest.mark.parametrize(
    "now, look, expected, nxt",
    [
        (999, 0, [], 1_000),  # not due yet
        (1_000, 0, [1_000], 2_000),  # exactly on time
        (1_500, 0, [1_000], 2_000),  # late by the threshold: still on time
        (900, 100, [1_000], 2_000),  # lookahead reaches it
        (899, 100, [], 1_000),  # lookahead falls 1 ms short
        (1_000, 2_500, [1_000, 2_000, 3_000], 4_000),  # lookahead covers several instants
    ],
)
def test_on_time_and_lookahead(policy: MisfirePolicy, now: int, look: int, expected: list[int], nxt: int) -> None:
    decisions, next_ms = plan(Every(1_000), 0, 1_000, win(now, policy, look=look, thr=500))
    assert decisions == [FireAt(i) for i in expected]
    assert next_ms == nxt


def test_one_ms_past_the_threshold_is_missed() -> None:
    decisions, _ = plan(Every(1_000), 0, 1_000, win(1_501, SKIP, thr=500))
    reason = "missed by 501 ms (more than the misfire threshold); misfire policy SKIP"
    assert decisions == [Skip(1_000, 1_000, 1, reason)]


# ------------------------------------------------------------------ misfire policies


def test_fire_all_fires_every_missed_instant() -> None:
    decisions, nxt = plan(Every(1_000), 0, 1_000, win(5_000, ALL))
    assert decisions == [FireAt(i) for i in (1_000, 2_000, 3_000, 4_000, 5_000)]
    assert nxt == 6_000


def test_fire_once_fires_the_latest_missed_instant_and_coalesces_the_rest() -> None:
    decisions, nxt = plan(Every(1_000), 0, 1_000, win(5_000, ONCE))
    # 1..4 s were missed (5 s is on time): only 4 s of them fires
    assert fired(decisions) == [4_000, 5_000]
    assert [(s.instant_ms, s.last_ms, s.count) for s in skipped(decisions)] == [
        (1_000, 1_000, 1),
        (2_000, 2_000, 1),
        (3_000, 3_000, 1),
    ]
    assert all("coalesced" in s.reason for s in skipped(decisions))
    assert nxt == 6_000


def test_fire_once_when_every_due_instant_was_missed() -> None:
    decisions, nxt = plan(Every(1_000), 0, 1_000, win(5_200, ONCE, thr=100))
    assert fired(decisions) == [5_000]
    assert [s.instant_ms for s in skipped(decisions)] == [1_000, 2_000, 3_000, 4_000]
    assert nxt == 6_000


def test_fire_once_of_a_one_shot_fires_it() -> None:
    decisions, nxt = plan(At(1_000), 0, 1_000, win(60_000, ONCE))
    assert decisions == [FireAt(1_000)] and nxt is None


def test_skip_policy_skips_missed_instants_and_fires_on_time_ones() -> None:
    decisions, nxt = plan(Every(1_000), 0, 1_000, win(5_000, SKIP))
    assert fired(decisions) == [5_000]
    assert [(s.instant_ms, s.count) for s in skipped(decisions)] == [(1_000, 1), (2_000, 1), (3_000, 1), (4_000, 1)]
    assert skipped(decisions)[0].reason == "missed by 4000 ms (more than the misfire threshold); misfire policy SKIP"
    assert nxt == 6_000


@pytest.mark.parametrize("schedule", [At(10_000), After(10_000)])
def test_one_shots_end_after_their_instant(schedule: At | After) -> None:
    assert plan(schedule, 0, 10_000, win(10_000)) == ([FireAt(10_000)], None)
    assert plan(schedule, 0, 10_000, win(9_000)) == ([], 10_000)


# ------------------------------------------------------------------ catchup window


@pytest.mark.parametrize(
    "policy, fires",
    [
        (ALL, [90_000 + k * 1_000 for k in range(11)]),
        (ONCE, [99_000, 100_000]),
        (SKIP, [100_000]),
    ],
)
def test_catchup_window_skips_older_instants_in_one_record(policy: MisfirePolicy, fires: list[int]) -> None:
    decisions, nxt = plan(Every(1_000), 0, 1_000, win(100_000, policy, catchup=10_000))
    first = decisions[0]
    assert isinstance(first, Skip)
    # instants before now - window = 90 s are too old; 90 s itself is merely missed
    assert (first.instant_ms, first.last_ms, first.count) == (1_000, 89_000, 89)
    assert first.reason == "missed by more than the catchup window (10000 ms)"
    assert fired(decisions) == fires
    assert nxt == 101_000


@pytest.mark.parametrize(
    "anchor, every, now, catchup",
    [
        (50, 300, 10_000, 1_000),
        (0, 100, 365 * DAY, 1_000),  # a year of 100 ms instants: counted, not walked
        (7, 1_000_003, 10**12, 5_000_000),
        (T0, 3_600_000, T0 + 1000 * DAY + 123, DAY),
    ],
)
def test_every_skip_count_is_arithmetic_and_exact(anchor: int, every: int, now: int, catchup: int) -> None:
    first = anchor + every
    decisions, _ = plan(Every(every), anchor, first, win(now, catchup=catchup, thr=0))
    skip = decisions[0]
    assert isinstance(skip, Skip)
    edge = now - catchup
    count = len(range(first, edge, every))
    assert skip.count == count
    assert skip.last_ms == first + (count - 1) * every < edge <= skip.last_ms + every
    following = decisions[1] if len(decisions) > 1 else None
    if following is not None:
        assert following == FireAt(skip.last_ms + every)


def test_cron_skip_counts_instants_one_by_one() -> None:
    decisions, nxt = plan(Cron("* * * * *"), T0, T0 + MIN, win(T0 + 60 * MIN, catchup=10 * MIN, thr=0))
    first = decisions[0]
    assert isinstance(first, Skip)
    assert (first.instant_ms, first.last_ms, first.count) == (T0 + MIN, T0 + 49 * MIN, 49)
    assert fired(decisions) == [T0 + k * MIN for k in range(50, 61)]
    assert nxt == T0 + 61 * MIN


def test_cron_skip_over_too_many_instants_jumps_to_the_window() -> None:
    cron = Cron("* * * * * *")  # every second (seconds are croniter's last field)
    now = T0 + 2 * 3600 * SEC
    decisions, nxt = plan(cron, T0, T0 + SEC, win(now, catchup=MIN, thr=0))
    first = decisions[0]
    assert isinstance(first, Skip)
    # 7,139 instants are too old: the first _COUNT_CAP are counted one by one, the rest jumped over
    assert (first.instant_ms, first.count, first.last_ms) == (T0 + SEC, _COUNT_CAP, T0 + _COUNT_CAP * SEC)
    # nothing at or after the window's edge is lost: it is all fired
    assert fired(decisions) == [now - MIN + k * SEC for k in range(61)]
    assert nxt == now + SEC


def test_a_one_shot_older_than_the_window_is_skipped_and_ends() -> None:
    decisions, nxt = plan(At(1_000), 0, 1_000, win(1_000 + 2 * DAY))
    assert decisions == [Skip(1_000, 1_000, 1, f"missed by more than the catchup window ({DAY} ms)")]
    assert nxt is None


def test_a_window_shorter_than_the_threshold_never_skips_an_on_time_instant() -> None:
    decisions, nxt = plan(Every(1_000), 0, 1_000, win(1_300, catchup=0, thr=500))
    assert decisions == [FireAt(1_000)] and nxt == 2_000
    decisions, _ = plan(Every(1_000), 0, 1_000, win(1_501, catchup=0, thr=500))
    assert isinstance(decisions[0], Skip) and "catchup window (0 ms)" in decisions[0].reason


# ------------------------------------------------------------------ skip_through


@pytest.mark.parametrize(
    "every, anchor, first, until",
    [(1_000, 0, 1_000, 1_000), (1_000, 0, 1_000, 1_999), (1_000, 0, 1_000, 5_000), (300, 7, 607, 10**13)],
)
def test_skip_through_every_is_exact(every: int, anchor: int, first: int, until: int) -> None:
    skip, nxt = skip_through(Every(every), anchor, first, until, "why")
    count = len(range(first, until + 1, every))
    assert skip == Skip(first, first + (count - 1) * every, count, "why")
    assert nxt == skip.last_ms + every > until


def test_skip_through_cron_counts_then_jumps() -> None:
    skip, nxt = skip_through(Cron("*/10 * * * *"), 0, T0 + 10 * MIN, T0 + 60 * MIN, "why")
    assert (skip.instant_ms, skip.last_ms, skip.count) == (T0 + 10 * MIN, T0 + 60 * MIN, 6)
    assert nxt == T0 + 70 * MIN
    skip, nxt = skip_through(Cron("* * * * *"), 0, T0 + MIN, T0 + 30 * DAY, "why")
    assert skip.count == _COUNT_CAP and skip.last_ms == T0 + _COUNT_CAP * MIN
    assert nxt == T0 + 30 * DAY + MIN  # nothing up to `until` is ever fired


# ------------------------------------------------------------------ decision budget


@pytest.mark.parametrize("policy", list(MisfirePolicy))
def test_a_plan_stops_at_the_decision_budget_and_resumes_without_gaps(policy: MisfirePolicy) -> None:
    total = DECISION_BUDGET + 300
    now = total * 100
    w = win(now, policy, thr=0)
    decisions, nxt = plan(Every(100), 0, 100, w)
    assert len(decisions) == DECISION_BUDGET
    assert nxt == (DECISION_BUDGET + 1) * 100
    assert nxt is not None
    rest, end = plan(Every(100), 0, nxt, w)
    assert len(rest) == 300 and end == now + 100
    covered = [d.instant_ms for d in decisions + rest]
    assert covered == [k * 100 for k in range(1, total + 1)]


def test_a_too_old_skip_is_one_decision_of_the_budget() -> None:
    decisions, nxt = plan(Every(100), 0, 100, win(10**9, catchup=50 * 100, thr=0))
    assert len(decisions) == 1 + 51
    assert nxt == 10**9 + 100


# ------------------------------------------------------------------ reference model


def _reference(every: int, anchor: int, w: Window) -> tuple[list[tuple[int, str]], int]:
    """Classify each instant one by one, straight from the rules in the module docstring."""
    out: list[tuple[int, str]] = []
    i = anchor + every
    while i <= w.now_ms + w.lookahead_ms:
        late = w.now_ms - i
        if late <= w.misfire_threshold_ms:
            out.append((i, "fire"))
        elif late > w.catchup_window_ms:
            out.append((i, "old"))
        elif w.policy is ALL:
            out.append((i, "fire"))
        elif w.policy is ONCE:
            out.append((i, "fire" if w.now_ms - (i + every) <= w.misfire_threshold_ms else "skip"))
        else:
            out.append((i, "skip"))
        i += every
    return out, i


def _expand(every: int, decisions: list[Decision]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for d in decisions:
        if isinstance(d, FireAt):
            out.append((d.instant_ms, "fire"))
        else:
            kind = "old" if "catchup window" in d.reason else "skip"
            assert d.last_ms == d.instant_ms + (d.count - 1) * every
            out.extend((d.instant_ms + k * every, kind) for k in range(d.count))
    return out


@settings(max_examples=200, deadline=None)
@given(
    every=st.integers(100, 5_000),
    anchor=st.integers(0, 10**6),
    offset=st.integers(-10_000, 400_000),
    look=st.integers(0, 3_000),
    thr=st.integers(0, 20_000),
    catchup=st.integers(0, 50_000),  # at most ~500 decisions: the budget is tested above
    policy=st.sampled_from(list(MisfirePolicy)),
)
def test_every_plan_matches_the_reference_rules(
    every: int, anchor: int, offset: int, look: int, thr: int, catchup: int, policy: MisfirePolicy
) -> None:
    now = anchor + every + offset
    w = win(now, policy, look=look, thr=thr, catchup=catchup)
    decisions, nxt = plan(Every(every), anchor, anchor + every, w)
    expected, expected_next = _reference(every, anchor, w)
    assert len(decisions) <= DECISION_BUDGET
    assert _expand(every, decisions) == expected
    assert nxt == expected_next
    if expected:
        assert nxt == next_fire(Every(every), expected[-1][0], anchor)
