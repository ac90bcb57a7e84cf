"""scripts/bench/micro/grant_cost.py measures what priorities and concurrency keys cost a grant on one replica
(importable: ``scripts/`` is on pytest's ``pythonpath``)."""

from __future__ import annotations

import re

import pytest

import grant_cost

pytestmark = pytest.mark.unit


def test_it_reports_plain_and_shaped_grants_of_two_machines(capsys: pytest.CaptureFixture[str]) -> None:
    assert grant_cost.main(["--jobs", "60", "--store", "memory", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    plain = re.search(r"plain .* ([\d.]+) us/run", out)
    shaped = re.search(r"shaped .* ([\d.]+) us/run", out)
    assert plain is not None and shaped is not None and float(plain.group(1)) > 0 and float(shaped.group(1)) > 0, out


@pytest.mark.parametrize("store", ["memory", "lmdb"])
def test_its_windows_grant_and_complete_both_backlogs_in_one_machine(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every window grants its share (a backlog that runs dry stops it) and every lease is completed SUCCEEDED
    (the script checks both), and the figures are read back."""
    assert grant_cost.main(["--windows", "--jobs", "80", "--store", store]) == 0
    out = capsys.readouterr().out
    m = re.search(
        r"plain +([\d.]+) us/grant, +([\d.]+) us/completion\n +shaped +([\d.]+) us/grant, +([\d.]+) us/completion\n"
        r" +ratio plain/shaped ([\d.]+)",
        out,
    )
    assert m is not None, out
    plain, plain_done, shaped, shaped_done, ratio = map(float, m.groups())
    assert plain > 0 and shaped > 0 and plain_done > 0 and shaped_done > 0
    assert ratio == pytest.approx(plain / shaped, abs=0.001)


@pytest.mark.parametrize("fmt", [5, 6])
def test_its_windows_run_on_the_format_asked_for(fmt: int, capsys: pytest.CaptureFixture[str]) -> None:
    """``--format 5`` keeps every run under its id, as before the grant-order layout; 6 (the default) keeps the
    shaped runs in grant order: both grant and complete every run."""
    assert grant_cost.main(["--windows", "--jobs", "40", "--store", "memory", "--format", str(fmt)]) == 0
    assert re.search(r"ratio plain/shaped [\d.]+", capsys.readouterr().out)


def test_the_window_jobs_are_named_as_a_node_names_them_and_alike_within_a_kind() -> None:
    import random

    rnd = random.Random(1)
    a = grant_cost._window_spec(True, grant_cost.SHAPED_QUEUES[0], rnd)
    b = grant_cost._window_spec(True, grant_cost.SHAPED_QUEUES[0], rnd)
    assert a.name == b.name == "bench-shaped" and 0 <= a.priority <= 9 and a.concurrency_key.startswith("k")
    plain = grant_cost._window_spec(False, grant_cost.PLAIN_QUEUES[1], rnd)
    assert plain.priority == 0 and not plain.concurrency_key and plain.queue == grant_cost.PLAIN_QUEUES[1]


def test_ordered_ids_sort_as_a_grant_takes_the_runs_and_plain_ids_as_they_were_created() -> None:
    import random

    rnd = random.Random(3)
    specs = [grant_cost._window_spec(True, grant_cost.SHAPED_QUEUES[0], rnd) for _ in range(200)]
    made = [(grant_cost.window_job_id(1000 + i, spec, True, rnd), spec.priority, i) for i, spec in enumerate(specs)]
    assert [(-p, i) for _, p, i in sorted(made)] == sorted((-p, i) for _, p, i in made)  # priority first, then age
    plain = [grant_cost.window_job_id(1000 + i, specs[i], False, rnd) for i in range(200)]
    assert plain == sorted(plain)


def test_ordered_windows_report_and_need_windows(capsys: pytest.CaptureFixture[str]) -> None:
    assert grant_cost.main(["--windows", "--ordered", "--jobs", "80", "--store", "lmdb"]) == 0
    out = capsys.readouterr().out
    assert "shaped ids in grant order" in out and re.search(r"ratio plain/shaped [\d.]+", out), out
    with pytest.raises(SystemExit) as exit_:
        grant_cost.main(["--ordered"])
    assert exit_.value.code == 2 and "--ordered goes with --windows" in capsys.readouterr().err


def test_windows_rounds_report_each_ratio_and_the_median_round(capsys: pytest.CaptureFixture[str]) -> None:
    assert grant_cost.main(["--windows", "--rounds", "3", "--jobs", "60", "--store", "memory"]) == 0
    out = capsys.readouterr().out
    each = re.search(r"round by round: plain/shaped ([\d.]+), ([\d.]+), ([\d.]+)", out)
    m = re.search(
        r"median of 3 rounds.*\n +plain +([\d.]+) us/grant, .*\n +shaped +([\d.]+) us/grant, .*\n +ratio plain/shaped ([\d.]+)",
        out,
    )
    assert each is not None and m is not None, out
    ratios = sorted(map(float, each.groups()))
    plain, shaped, ratio = map(float, m.groups())
    assert ratio == pytest.approx(ratios[1], abs=0.001) and ratio == pytest.approx(plain / shaped, abs=0.002), out


def test_rounds_below_one_are_refused() -> None:
    with pytest.raises(SystemExit):
        grant_cost.main(["--windows", "--rounds", "0"])
