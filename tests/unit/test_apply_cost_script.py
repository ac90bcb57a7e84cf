"""scripts/apply_cost.py runs every phase it reports on both stores (importable: ``scripts/`` is on pytest's
``pythonpath``)."""

from __future__ import annotations

import gc
import re

import pytest

import apply_cost

pytestmark = pytest.mark.unit


def test_it_reports_fire_grant_and_complete_for_both_stores(capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_threshold()
    assert apply_cost.main(["--jobs", "40", "--store", "both", "--format", "3"]) == 0
    assert gc.get_threshold() == before  # a node's thresholds only while it measures
    lines = capsys.readouterr().out.splitlines()
    pattern = r"(memory|lmdb) +40 runs, format 3: fire ([\d.]+) us/run, grant ([\d.]+) us/run, complete ([\d.]+) us/run"
    found = [re.fullmatch(pattern + r" \(best of 3, node gc\)", line) for line in lines]
    assert [m.group(1) for m in found if m] == ["memory", "lmdb"], lines
    assert all(float(x) > 0 for m in found if m for x in m.groups()[1:])


def test_it_measures_with_a_nodes_collector_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    from cluster.app.node_main import GC_THRESHOLDS

    seen: list[tuple[int, ...]] = []
    monkeypatch.setattr(apply_cost, "_one_round", lambda *a: seen.append(gc.get_threshold()) or (1.0, 1.0, 1.0))
    apply_cost.main(["--jobs", "1", "--store", "memory"])
    apply_cost.main(["--jobs", "1", "--store", "memory", "--gc", "default"])
    assert seen[0] == GC_THRESHOLDS and seen[-1] == gc.get_threshold()
