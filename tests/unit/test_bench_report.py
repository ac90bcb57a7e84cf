"""The benchmark's table judges a row on every target it has (``bench.report``)."""

from __future__ import annotations

import pytest

from bench import report

pytestmark = pytest.mark.unit


def _row(results: dict[str, object], key: str) -> tuple[str, str, str, str]:
    return next(r for r in report._rows(results, {}) if r[0] == key)


@pytest.mark.parametrize(
    ("median", "worst", "verdict"),
    [(1.0, 2.0, "pass"), (1.3, 2.0, "fail"), (1.0, 3.5, "fail"), (None, None, "n/a")],
)
def test_failover_resume_is_judged_on_its_median_and_its_worst(median: float | None, worst: float | None, verdict: str) -> None:
    results = {"failover_resume_s": {"median": median, "max": worst, "count": 10}}
    _, _, target, got = _row(results, "failover_resume_s")
    assert target == "<= 1.2 (median), <= 3 (max)"
    assert got == verdict


def test_time_to_a_new_leader_is_judged_on_its_worst() -> None:
    _, shown, target, got = _row({"failover_leader_s": {"median": 1.0, "max": 5.2, "count": 10}}, "failover_leader_s")
    assert (shown, target, got) == ("median 1, max 5.2", "<= 5 (max)", "fail")
    assert "failover_leader_s" in report.RESULT_KEYS


@pytest.mark.parametrize(("ratio", "verdict"), [(0.99, "pass"), (0.85, "fail"), (None, "n/a")])
def test_the_workers_runs_per_second_are_judged_against_the_executors(ratio: float | None, verdict: str) -> None:
    assert not any(r[0] == "worker_vs_executor" for r in report._rows({}, {}))  # shown only when measured
    results = {"worker_vs_executor": {"executor": 2700.0, "worker": None if ratio is None else 2700.0 * ratio, "ratio": ratio}}
    _, _, target, got = _row(results, "worker_vs_executor")
    assert (target, got) == (">= 0.9 (ratio)", verdict)


def test_the_benchmarks_worker_does_nothing_for_the_noop_type() -> None:
    from bench import noop_worker
    from bench.scenarios import SCENARIOS

    assert noop_worker.worker.tasks == ["noop"]
    assert noop_worker.noop(b"", None) is None  # type: ignore[arg-type, func-returns-value]
    assert "worker_vs_executor" in dict(SCENARIOS)
