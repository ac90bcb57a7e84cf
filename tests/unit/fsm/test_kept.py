"""``Kept``: the map bounded by bytes that apply keeps specs and runs in between commands."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raftsched.cluster.fsm.cache import Kept

pytestmark = pytest.mark.unit


def test_it_forgets_the_oldest_entries_down_to_what_makes_room_and_at_least_a_sixteenth_of_its_budget() -> None:
    kept: Kept[str, int] = Kept(100)
    for k in range(10):
        kept.put(f"k{k}", k, 10)
    assert len(kept) == 10 and kept.total == 100
    kept.put("k10", 10, 10)  # 110 > 100: the oldest go until 90 are left (room for it), then it joins
    assert list(kept) == [f"k{k}" for k in range(1, 11)] and kept.total == 100
    assert "k0" not in kept and kept.get("k0") is None and kept["k10"] == 10
    big: Kept[str, int] = Kept(1600)
    for k in range(100):
        big.put(f"k{k}", k, 16)
    big.put("k100", 100, 1)  # 1601 > 1600: at least a sixteenth (100) goes, the oldest first
    assert big.total == 1600 - 7 * 16 + 1 and list(big)[0] == "k7" and "k6" not in big


def test_a_put_replaces_the_value_and_makes_it_the_newest() -> None:
    kept: Kept[str, str] = Kept(100)
    kept.put("a", "first", 40)
    kept.put("b", "b", 40)
    kept.put("a", "second", 30)
    assert list(kept) == ["b", "a"] and kept["a"] == "second" and kept.total == 70
    kept.put("c", "c", 40)  # 110: b, the oldest, goes (room for c: at most 60 stay)
    assert list(kept) == ["a", "c"] and kept.total == 70


def test_an_entry_heavier_than_half_the_budget_is_kept_only_if_it_fits_and_a_budget_of_zero_keeps_nothing() -> None:
    kept: Kept[str, bytes] = Kept(100)
    kept.put("small", b"", 10)
    kept.put("big", b"x" * 60, 60)  # fits (70 <= 100): kept
    assert "big" in kept and kept.total == 70
    kept.put("huge", b"", 101)  # never kept: nothing is forgotten for it
    assert "huge" not in kept and list(kept) == ["small", "big"] and kept.total == 70
    kept.put("small", b"", 51)  # what a key held goes when its new value is too heavy to keep
    assert list(kept) == ["big"] and kept.total == 60
    nothing: Kept[str, int] = Kept(0)
    nothing.put("a", 1, 1)
    assert len(nothing) == 0 and nothing.total == 0


def test_a_value_of_none_is_kept_as_a_value() -> None:
    kept: Kept[str, None] = Kept(100)
    kept.put("gone", None, 1)
    assert "gone" in kept and kept["gone"] is None
    kept.forget("gone")
    kept.forget("never")
    assert "gone" not in kept and kept.total == 0


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 70), st.booleans()), max_size=60))
def test_the_total_is_the_sum_of_what_is_kept_and_never_over_the_budget(ops: list[tuple[str, int, bool]]) -> None:
    kept: Kept[str, int] = Kept(100)
    model: dict[str, int] = {}
    for key, weight, drop in ops:
        if drop:
            kept.forget(key)
            model.pop(key, None)
            continue
        kept.put(key, weight, weight)
        if key in kept:
            model[key] = weight
        else:  # not kept: too heavy; whatever it replaced is gone too
            model.pop(key, None)
        model = {k: v for k, v in model.items() if k in kept}  # what shedding forgot
        assert kept.total == sum(model.values()) <= 100
        assert all(kept[k] == v for k, v in model.items())


def test_it_cannot_be_changed_behind_its_weights() -> None:
    kept: Kept[str, int] = Kept(100)
    kept.put("a", 1, 10)
    for change in (
        lambda: kept.__setitem__("b", 2),
        lambda: kept.__delitem__("a"),
        lambda: kept.pop("a"),
        lambda: kept.popitem(),
        lambda: kept.setdefault("b", 2),
        lambda: kept.update({"b": 2}),
    ):
        with pytest.raises(TypeError, match="only through put, forget and clear"):
            change()
    assert dict(kept) == {"a": 1} and kept.total == 10
