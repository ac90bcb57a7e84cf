"""cluster.domain.keylist.KeyList behaves like a sorted list of unique keys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster.domain.keylist import KeyList

pytestmark = pytest.mark.unit

keys = st.tuples(st.integers(0, 50), st.sampled_from(["a", "b", "c"]))


@given(st.lists(st.tuples(st.booleans(), keys), max_size=80), keys)
def test_keylist_matches_a_sorted_model(ops: list[tuple[bool, tuple[int, str]]], probe: tuple[int, str]) -> None:
    kl, model = KeyList(), set()
    for add, key in ops:
        if add and key not in model:  # the index never holds a key twice
            kl.add(key)
            model.add(key)
        elif not add:
            kl.discard(key)  # a missing key is ignored
            model.discard(key)
        assert list(kl) == sorted(model)
    assert len(kl) == len(model) and bool(kl) == bool(model)
    assert list(kl.after(probe)) == [k for k in sorted(model) if k > probe]
    assert list(kl.before(probe)) == [k for k in sorted(model, reverse=True) if k < probe]
    assert list(kl.before(None)) == sorted(model, reverse=True)
    assert list(KeyList(model)) == sorted(model)


def test_after_is_a_copy() -> None:
    kl = KeyList([(1, "a"), (2, "a"), (3, "a")])
    seen = []
    for key in kl.after((1, "a")):
        seen.append(key)
        kl.discard(key)
    assert seen == [(2, "a"), (3, "a")] and list(kl) == [(1, "a")]
