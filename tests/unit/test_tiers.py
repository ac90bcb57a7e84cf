"""Every collected test has exactly one tier marker, matching its folder; a test without one stops the session.

The check itself is the collection hook in ``tests/conftest.py``: every session (each pass of
``scripts/test.sh`` collects the whole suite) runs it on every collected test, so no test here collects the
suite once more."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.tiers import folder_tier, tier_problems

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"


def _collect(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


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
