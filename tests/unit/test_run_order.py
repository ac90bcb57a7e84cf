"""The suite's start order (``tests.run_order``): named files first, in their order, each file's tests together."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.run_order import LONGEST_FIRST, longest_first

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


@dataclass
class FakeItem:
    name: str
    path: Path


def test_every_named_file_exists_once() -> None:
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    missing = [p for p in LONGEST_FIRST if not (REPO / p).is_file()]
    assert not missing, f"renamed or removed: update tests/run_order.py: {missing}"


def test_named_files_go_first_in_their_order_and_the_rest_keep_theirs() -> None:
    first, second = (REPO / p for p in LONGEST_FIRST[:2])
    other_a, other_b = REPO / "tests/unit/test_a.py", REPO / "tests/unit/test_b.py"
    items = [
        FakeItem("a1", other_a),
        FakeItem("s1", second),
        FakeItem("b1", other_b),
        FakeItem("f1", first),
        FakeItem("s2", second),
        FakeItem("a2", other_a),
        FakeItem("f2", first),
    ]
    assert [i.name for i in longest_first(items)] == ["f1", "f2", "s1", "s2", "a1", "b1", "a2"]
