"""Every collected test has exactly one tier marker, matching its folder; a test without one stops the session."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.tiers import TIERS, folder_tier, tier_problems

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"


def _collect(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def _collected(out: str) -> int:
    """How many tests pytest collected, from its last line ("N tests collected ..." or "S/N tests collected ...")."""
    m = re.search(r"(\d+) tests? collected|no tests collected \((\d+) deselected\)", out)
    assert m, out[-2000:]
    return int(m.group(1) or m.group(2))


def test_the_whole_suite_collects_and_every_test_has_a_tier() -> None:
    whole = _collect(str(TESTS))
    assert whole.returncode == 0, whole.stdout[-3000:] + whole.stderr[-3000:]
    ids = [line for line in whole.stdout.splitlines() if "::" in line]
    assert len(ids) == _collected(whole.stdout) > 0
    per_tier = {tier: sum(i.startswith(f"tests/{tier}/") for i in ids) for tier in TIERS}
    # every test has its folder's tier marker and no other: the collection hook stops a session otherwise (exit 4,
    # ``test_an_untiered_test_stops_the_session_with_its_name``), and this one ended with 0
    assert all(per_tier.values()) and sum(per_tier.values()) == len(ids), per_tier
    print("tests per tier:", per_tier)


def test_an_untiered_test_stops_the_session_with_its_name(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n")
    (tmp_path / "test_forgotten.py").write_text("def test_without_a_tier() -> None:\n    assert 1 + 1 == 2\n")
    out = _collect("-m", "unit", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 4, out.stdout + out.stderr  # a usage error, not "0 selected"
    text = out.stdout + out.stderr
    assert "test_forgotten.py::test_without_a_tier: no tier marker" in text, text


@dataclass
class FakeMark:
    name: str


@dataclass
class FakeItem:
    nodeid: str
    path: Path
    marks: list[str] = field(default_factory=list)

    def iter_markers(self, name: str | None = None) -> list[FakeMark]:
        return [FakeMark(m) for m in self.marks if name in (None, m)]


def test_tier_problems_name_each_offending_test() -> None:
    items = [
        FakeItem("tests/unit/test_a.py::ok", TESTS / "unit" / "test_a.py", ["unit", "parametrize"]),
        FakeItem("tests/unit/test_b.py::none", TESTS / "unit" / "test_b.py", ["parametrize"]),
        FakeItem("tests/unit/test_c.py::two", TESTS / "unit" / "test_c.py", ["unit", "fault"]),
        FakeItem("tests/fault/test_d.py::wrong", TESTS / "fault" / "test_d.py", ["unit"]),
        FakeItem("elsewhere/test_e.py::outside", REPO / "elsewhere" / "test_e.py", ["contract"]),
    ]
    problems = tier_problems(items)
    assert len(problems) == 4, problems
    assert problems[0].startswith("tests/unit/test_b.py::none: no tier marker")
    assert problems[1].startswith("tests/unit/test_c.py::two: several tier markers ['fault', 'unit']")
    assert problems[2].startswith("tests/fault/test_d.py::wrong: marked 'unit' but lives in tests/fault/")
    assert problems[3].startswith("elsewhere/test_e.py::outside: not inside a tier folder: move it to tests/contract/")
    assert folder_tier(TESTS / "contract" / "x.py") == "contract" and folder_tier(TESTS / "helpers.py") is None
