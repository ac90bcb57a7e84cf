"""scripts/bench/micro/retention_cost.py measures completions under and over a job's history limit (importable:
``scripts/`` is on pytest's ``pythonpath``)."""

from __future__ import annotations

import gc
import re

import pytest

import retention_cost

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("store", ["memory", "lmdb"])
def test_it_reports_a_completion_under_and_over_the_limit(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_threshold()
    assert retention_cost.main(["--jobs", "2", "--limit", "100", "--store", store]) == 0
    assert gc.get_threshold() == before
    out = capsys.readouterr().out.strip()
    pattern = rf"{store} +2 jobs, history limit 100: a completion ([\d.]+) us under the limit, ([\d.]+) us over it \(node gc\)"
    m = re.fullmatch(pattern, out)
    assert m is not None and all(float(x) > 0 for x in m.groups()), out


def test_a_limit_below_the_measured_edge_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        retention_cost.main(["--limit", "10"])
    assert "--limit must be at least 100" in capsys.readouterr().err
