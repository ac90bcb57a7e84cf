"""Tests for scripts/bench/stats.py: the benchmark's pure statistics.

``bench`` is importable because pyproject.toml puts ``scripts/`` on pytest's ``pythonpath``.
"""

from __future__ import annotations

import random

import pytest

from bench import stats as bs

pytestmark = pytest.mark.unit


# ---------------------------------------------------------------- percentile


def test_percentile_linear_interpolation_between_ranks() -> None:
    data = [1, 2, 3, 4]
    assert bs.percentile(data, 0) == 1
    assert bs.percentile(data, 100) == 4
    assert bs.percentile(data, 50) == pytest.approx(2.5)  # rank 1.5
    assert bs.percentile(data, 25) == pytest.approx(1.75)  # rank 0.75
    assert bs.percentile(data, 99) == pytest.approx(3.97)  # rank 2.97


def test_percentile_ignores_input_order_and_handles_negatives() -> None:
    assert bs.percentile([10, -5, 0], 50) == 0
    assert bs.percentile([-30.0, -10.0], 50) == pytest.approx(-20.0)


def test_percentile_of_one_value_and_of_none() -> None:
    assert bs.percentile([7], 99) == 7.0
    assert bs.percentile([], 50) is None


@pytest.mark.parametrize("p", [-1, 100.5, float("nan")])
def test_percentile_rejects_out_of_range(p: float) -> None:
    with pytest.raises(ValueError):
        bs.percentile([1, 2], p)


def test_percentile_matches_numpy_linear_method() -> None:
    np = pytest.importorskip("numpy")
    rng = random.Random(7)
    for n in (2, 3, 10, 101, 1000):
        data = [rng.uniform(-50, 500) for _ in range(n)]
        for p in (0, 1, 10, 50, 90, 99, 99.9, 100):
            assert bs.percentile(data, p) == pytest.approx(float(np.percentile(data, p)), rel=1e-12, abs=1e-9)


def test_percentile_accepts_a_generator() -> None:
    assert bs.percentile((x for x in range(101)), 99) == pytest.approx(99.0)


def test_median() -> None:
    assert bs.median([3, 1, 2]) == 2
    assert bs.median([4, 1, 3, 2]) == pytest.approx(2.5)
    assert bs.median([]) is None


# ---------------------------------------------------------------- summarize


def test_summarize_keys_and_values() -> None:
    s = bs.summarize(range(1, 101))
    assert s["count"] == 100
    assert s["min"] == 1 and s["max"] == 100
    assert s["mean"] == pytest.approx(50.5)
    assert s["p50"] == pytest.approx(50.5)
    assert s["p99"] == pytest.approx(99.01)


def test_summarize_custom_percentiles_and_key_names() -> None:
    s = bs.summarize([1.0, 2.0], percentiles=(90, 99.9))
    assert set(s) == {"count", "min", "mean", "p90", "p99_9", "max"}


def test_summarize_empty_gives_none_not_zero() -> None:
    s = bs.summarize([])
    assert s["count"] == 0
    assert s["p50"] is None and s["p99"] is None and s["max"] is None and s["mean"] is None


def test_summarize_rounds() -> None:
    s = bs.summarize([1 / 3], ndigits=2)
    assert s["p50"] == 0.33


# ---------------------------------------------------------------- clamp, rates


def test_clamp_nonnegative() -> None:
    assert bs.clamp_nonnegative([-12.5, 0, 3.0]) == [0.0, 0, 3.0]


def test_rate() -> None:
    assert bs.rate(3000, 1.5) == pytest.approx(2000)
    assert bs.rate(10, 0) is None
    assert bs.rate(10, -1) is None


def test_in_window_is_half_open() -> None:
    assert bs.in_window([0, 1, 2, 3], 1, 3) == [1, 2]


def test_rate_in_window_ms_per_second() -> None:
    times = [1000 + i for i in range(0, 2000, 2)]  # 1000 events over 2000 ms
    assert bs.rate_in_window(times, 1000, 3000, per=1000) == pytest.approx(500.0)
    assert bs.rate_in_window(times, 1000, 2000, per=1000) == pytest.approx(500.0)
    assert bs.rate_in_window(times, 5000, 5000) is None


def test_counter_rate_uses_the_samples_bracketing_the_window() -> None:
    samples = [(0.0, 0), (1.0, 100), (2.0, 300), (3.0, 600), (4.0, 1000)]
    assert bs.counter_rate(samples, 1.0, 3.0) == pytest.approx(250.0)  # 100 -> 600 over 2 s
    assert bs.counter_rate(samples, 1.5, 3.9) == pytest.approx(250.0)  # the same two samples
    assert bs.counter_rate(samples, -1.0, 3.0) is None  # nothing known at the start
    assert bs.counter_rate(samples, 2.0, 2.5) is None  # one sample for both ends
    assert bs.counter_rate([], 0.0, 1.0) is None


def test_sampled_counter_readings() -> None:
    samples = [(0.0, 0), (0.5, 10), (1.2, 40), (2.6, 100)]
    assert bs.counter_at(samples, -1) is None
    assert bs.counter_at(samples, 1.0) == 10 and bs.counter_at(samples, 1.2) == 40
    assert bs.counter_reached(samples, 40) == 1.2 and bs.counter_reached(samples, 41) == 2.6
    assert bs.counter_reached(samples, 101) is None
    # [0,1): 0 -> 10; [1,2): 10 -> 40; [2,3): 40 -> 100
    assert bs.counter_per_bucket(samples, 0.0, 1.0, 3.0) == [10, 30, 60]


def test_steady_rate_trims_ramp_and_tail() -> None:
    # a slow ramp (10/s for 1 s), a steady 100/s for 10 s, a slow tail
    ramp = [i * 0.1 for i in range(10)]
    steady = [1.0 + i * 0.01 for i in range(1000)]
    tail = [11.0 + i * 0.1 for i in range(10)]
    whole = ramp + steady + tail
    assert bs.steady_rate(whole, warmup=1.0, cooldown=1.0) == pytest.approx(100.0, rel=0.02)
    assert bs.steady_rate([1.0]) is None
    assert bs.steady_rate([1.0, 2.0], warmup=5) is None


# ---------------------------------------------------------------- histograms


def test_histogram_fills_gaps_with_zeros_and_drops_early_times() -> None:
    assert bs.histogram([0.1, 0.2, 2.5, -1.0], origin=0.0, bucket=1.0) == [2, 0, 1]


def test_histogram_with_end_has_fixed_length() -> None:
    assert bs.histogram([0.5, 9.0], origin=0.0, bucket=1.0, end=3.0) == [1, 0, 0]
    assert bs.histogram([], origin=0.0, bucket=1.0, end=2.5) == [0, 0, 0]
    assert bs.histogram([], origin=0.0) == []


def test_histogram_rejects_bad_bucket() -> None:
    with pytest.raises(ValueError):
        bs.histogram([1], 0, 0)


def test_per_second_in_milliseconds() -> None:
    origin = 1_700_000_000_000
    times = [origin + 10, origin + 999, origin + 1000, origin + 3500]
    assert bs.per_second(times, origin) == [2, 1, 0, 1]
    assert bs.per_second(times, origin, origin + 2000) == [2, 1]


def test_histogram_counts_add_up() -> None:
    rng = random.Random(1)
    times = [rng.uniform(0, 100) for _ in range(5000)]
    assert sum(bs.histogram(times, 0.0, 0.7)) == 5000


# ---------------------------------------------------------------- phases, failover, verdicts


def test_phase_spread_even_and_bunched() -> None:
    even = bs.phase_spread([i for i in range(0, 10_000, 5)], period=1000, buckets=10)
    assert even["count"] == 2000
    assert even["buckets"] == [200] * 10
    assert even["peak_ratio"] == pytest.approx(1.0)
    bunched = bs.phase_spread([5_000 + i % 50 for i in range(100)], period=1000, buckets=10)
    assert bunched["peak_ratio"] == pytest.approx(10.0)
    assert bs.phase_spread([], 1000)["peak_ratio"] is None


def test_first_after_picks_earliest_observation_of_a_later_fire() -> None:
    kill = 1000.0
    events = [(900.0, 950.0), (1200.0, 2500.0), (1100.0, 2400.0), (990.0, 1500.0)]
    assert bs.first_after(events, kill) == 2400.0
    assert bs.first_after([(1.0, 2.0)], kill) is None


@pytest.mark.parametrize(
    "value,target,higher,expected",
    [
        (3100.0, 3000, True, "pass"),
        (3000.0, 3000, True, "pass"),
        (2999.0, 3000, True, "fail"),
        (40.0, 50, False, "pass"),
        (50.0, 50, False, "pass"),
        (51.0, 50, False, "fail"),
        (None, 50, False, "n/a"),
        (float("nan"), 50, False, "n/a"),
    ],
)
def test_verdict(value: float | None, target: float, higher: bool, expected: str) -> None:
    assert bs.verdict(value, target, higher) == expected


def test_dedupe_earliest_keeps_first_observation_per_key() -> None:
    samples = [("r1", 105.0, 5.0), ("r1", 125.0, 25.0), ("r2", 300.0, 1.0), ("r1", 101.0, 1.0)]
    assert bs.dedupe_earliest(samples) == {"r1": (101.0, 1.0), "r2": (300.0, 1.0)}
