"""The side-by-side benchmark (``bench.compare``): running order, the figures it compares, and which way a ratio
points. The benchmarks themselves are not run here: ``_run`` is replaced by one that writes a bench.json."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from bench import compare as cm

pytestmark = pytest.mark.unit

A, T = cm.AGAINST, cm.THIS


def test_runs_alternate_so_that_a_drift_weighs_on_both_sides() -> None:
    assert cm.order(1) == [A, T]
    assert cm.order(2) == [A, T, T, A]
    assert cm.order(3) == [A, T, T, A, A, T]


def test_flatten_keeps_numbers_and_derives_what_is_compared_across_runs() -> None:
    doc = {
        "machine": {"cores": 2},
        "create_jobs_per_s": 450.0,
        "grpc_noop_calls_per_s": 1800.0,
        "burst_fire_s": 16,
        "e2e_runs_per_s": None,
        "verdicts": {"create_jobs_per_s": "fail"},
        "due_to_leased_ms": {"count": 100, "p50": 4.0, "p99": 23.0},
        "node_cpu_s": {"n1": 80.0, "n2": 60.0, "n3": 50.0},
        "node_rss_mb": {"n1": 480.0, "n2": 500.0, "n3": 505.0},
        "steady_cpu_us_per_run": {"leader": 700.0, "follower n1": 400.0, "follower n3": 420.0},
        "flag": True,
    }
    assert cm.flatten(doc) == {
        "create_jobs_per_s": 450.0,
        "grpc_noop_calls_per_s": 1800.0,
        "burst_fire_s": 16.0,
        "due_to_leased_ms.p50": 4.0,
        "due_to_leased_ms.p99": 23.0,
        "create_call_ratio": 0.25,
        "node_cpu_s.total": 190.0,
        "node_rss_mb.max": 505.0,
        "steady_cpu_us_per_run.leader": 700.0,
        "steady_cpu_us_per_run.followers": 410.0,
    }


@pytest.mark.parametrize(
    ("key", "higher"),
    [
        ("create_jobs_per_s", True),
        ("create_call_ratio", True),
        ("burst_fire_s", False),
        ("due_to_leased_ms.p99", False),
        ("node_cpu_s.total", False),
        ("steady_cpu_us_per_run.leader", False),
        ("something_else", None),
    ],
)
def test_which_way_is_better(key: str, higher: bool | None) -> None:
    assert cm.higher_is_better(key) is higher


def test_ratios_of_medians_point_above_one_when_this_checkout_does_better() -> None:
    runs = [
        (A, {"e2e_runs_per_s": 1700.0, "burst_fire_s": 7.5, "other": 2.0, "only_a": 1.0}),
        (T, {"e2e_runs_per_s": 1500.0, "burst_fire_s": 15.0, "other": 3.0, "only_this": 4.0}),
        (T, {"e2e_runs_per_s": 1400.0, "burst_fire_s": 17.0, "other": 3.0}),
        (A, {"e2e_runs_per_s": 1800.0, "burst_fire_s": 7.5, "other": 2.0, "only_a": 1.0}),
    ]
    got = {key: (a, b, ratio) for key, a, b, ratio in cm.rows(runs)}
    assert set(got) == {"e2e_runs_per_s", "burst_fire_s", "other"}  # a figure one side never reported is left out
    assert got["e2e_runs_per_s"] == ([1700.0, 1800.0], [1500.0, 1400.0], pytest.approx(1450.0 / 1750.0))
    assert got["burst_fire_s"][2] == pytest.approx(7.5 / 16.0)  # lower is better: against/this
    assert got["other"][2] == pytest.approx(1.5)  # no known direction: this/against
    text = cm.table("f91d6df", cm.rows(runs))
    lines = {line.split()[0]: line for line in text.splitlines()[2:]}
    assert "direction unknown" in lines["other"] and "unknown" not in lines["burst_fire_s"]
    assert f"{cm.MISSING}: " not in text  # every run reported what is shown: no footnote


def test_a_run_that_did_not_report_a_figure_shows_as_missing_and_the_others_make_the_median() -> None:
    # a steady run whose cluster fell behind reports no steady figures: the comparison still shows the figure
    runs = [
        (A, {"steady_runs_per_s": 1800.0}),
        (T, {"steady_runs_per_s": 980.0}),
        (T, {}),
        (A, {"steady_runs_per_s": 1900.0}),
    ]
    ((key, a, b, ratio),) = cm.rows(runs)
    assert (key, a, b) == ("steady_runs_per_s", [1800.0, 1900.0], [980.0, None])
    assert ratio == pytest.approx(980.0 / 1850.0)
    text = cm.table("f91d6df", cm.rows(runs))
    row = next(line for line in text.splitlines() if line.startswith("steady_runs_per_s"))
    assert f"980.0, {cm.MISSING}" in row
    assert text.splitlines()[-1].startswith(f"{cm.MISSING}: a run that did not report the figure")


def test_main_runs_both_sides_alternated_and_writes_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    against = tmp_path / "against"
    (against / ".venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, against / ".venv" / "bin" / "python")
    figures = {A: [1000.0, 1100.0], T: [900.0, 950.0]}
    calls: list[tuple[str, list[str]]] = []

    def fake_run(cmd: list[str], cwd: Path, log: Path, timeout: float) -> None:
        side = A if Path(cwd) == against.resolve() else T
        calls.append((side, cmd))
        folder = Path(cmd[cmd.index("--out") + 1])
        folder.mkdir(parents=True)
        value = figures[side][sum(1 for s, _ in calls if s == side) - 1]
        (folder / "bench.json").write_text(json.dumps({"machine": {}, "e2e_runs_per_s": value}))

    monkeypatch.setattr(cm, "_run", fake_run)
    out = tmp_path / "out"
    code = cm.main(
        ["--against", "abc123", "--against-dir", str(against), "--out", str(out), "--", "--quick", "--scenarios", "burst"]
    )
    assert code == 0
    assert [side for side, _ in calls] == [A, T, T, A]
    assert all(cmd[1:4] == ["scripts/bench.py", "--quick", "--scenarios"] for _, cmd in calls)
    text = (out / "compare.txt").read_text()
    line = next(line for line in text.splitlines() if line.startswith("e2e_runs_per_s"))
    assert "1,000.0, 1,100.0" in line and "900.0, 950.0" in line and line.rstrip().endswith(f"{925.0 / 1050.0:.3f}")


def test_bench_arguments_may_not_name_the_output_folder(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        cm.main(["--against", "abc123", "--against-dir", str(tmp_path), "--", "--out", "x"])


def test_same_bench_runs_this_harness_on_both_sides_with_the_other_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    against = tmp_path / "against"
    (against / ".venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, against / ".venv" / "bin" / "python")
    calls: list[tuple[Path, list[str]]] = []

    def fake_run(cmd: list[str], cwd: Path, log: Path, timeout: float) -> None:
        calls.append((Path(cwd), cmd))
        folder = Path(cmd[cmd.index("--out") + 1])
        folder.mkdir(parents=True)
        (folder / "bench.json").write_text(json.dumps({"machine": {}, "steady_runs_per_s": 100.0 + len(calls)}))

    monkeypatch.setattr(cm, "_run", fake_run)
    out = tmp_path / "out"
    args = ["--against", "abc123", "--against-dir", str(against), "--out", str(out), "--same-bench", "--rounds", "1"]
    assert cm.main([*args, "--", "--quick", "--scenarios", "steady"]) == 0
    repo = Path(cm.__file__).resolve().parents[2]
    (cwd_a, cmd_a), (cwd_t, cmd_t) = calls
    # both under this checkout's interpreter and bench.py, from this checkout; only the against side names its nodes
    assert cwd_a == cwd_t == repo
    assert cmd_a[0] == cmd_t[0] == sys.executable
    assert cmd_a[cmd_a.index("--nodes-from") + 1] == str(against.resolve())
    assert "--nodes-from" not in cmd_t
    assert cmd_a[1:4] == cmd_t[1:4] == ["scripts/bench.py", "--quick", "--scenarios"]


def test_without_same_bench_each_side_runs_its_own_bench(tmp_path: Path) -> None:
    against, python = tmp_path / "against", tmp_path / "against" / ".venv" / "bin" / "python"
    repo = Path(cm.__file__).resolve().parents[2]
    cmd, cwd = cm.side_command(A, ["--quick"], tmp_path / "o", repo, against, python, same_bench=False)
    assert (cmd[0], cwd) == (str(python), against) and "--nodes-from" not in cmd
    cmd, cwd = cm.side_command(T, ["--quick"], tmp_path / "o", repo, against, python, same_bench=True)
    assert (cmd[0], cwd) == (sys.executable, repo) and "--nodes-from" not in cmd


def test_the_comparison_names_the_other_nodes_itself(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        cm.main(["--against", "abc123", "--against-dir", str(tmp_path), "--", "--nodes-from", "x"])
