"""scripts/apply_cost.py runs every phase it reports on both stores (importable: ``scripts/`` is on pytest's
``pythonpath``)."""

from __future__ import annotations

import re

import pytest

import apply_cost

pytestmark = pytest.mark.unit


def test_it_reports_fire_grant_and_complete_for_both_stores(capsys: pytest.CaptureFixture[str]) -> None:
    assert apply_cost.main(["--jobs", "40", "--store", "both", "--format", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    pattern = r"(memory|lmdb) +40 runs, format 3: fire ([\d.]+) us/run, grant ([\d.]+) us/run, complete ([\d.]+) us/run"
    found = [re.fullmatch(pattern + r" \(best of 3\)", line) for line in lines]
    assert [m.group(1) for m in found if m] == ["memory", "lmdb"], lines
    assert all(float(x) > 0 for m in found if m for x in m.groups()[1:])
