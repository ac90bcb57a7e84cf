"""``memory.drop``: a key leaves a live index whether it is its head, inside it or not there at all."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sortedcontainers import SortedList

from raftsched.cluster.fsm.memory import drop

pytestmark = pytest.mark.unit

KEYS = st.tuples(st.integers(-(2**40), 2**40), st.text(max_size=6))


@given(st.lists(KEYS, max_size=60, unique=True), KEYS, st.randoms(use_true_random=False))
def test_drop_leaves_exactly_the_other_keys(keys: list[tuple[int, str]], other: tuple[int, str], rnd: random.Random) -> None:
    index = SortedList(keys)
    expected = sorted(keys)
    for key in rnd.sample(keys, len(keys)) + [other]:
        drop(index, key)
        if key in expected:
            expected.remove(key)
        assert list(index) == expected
        index._check()  # sortedcontainers' own invariants (its sublists and maxes)
    assert not index


def test_heads_taken_in_order_across_sublists_keep_the_index_whole() -> None:
    keys = [(7, f"r{i:06d}") for i in range(5_000)]  # several sublists: the head moves from one to the next
    index = SortedList(keys)
    for n, key in enumerate(keys, start=1):
        drop(index, key)
        if n % 997 == 0:
            index._check()
            assert index[0] == keys[n] and len(index) == len(keys) - n
    assert not index
    drop(index, keys[0])  # an empty index: nothing to do
    assert not index
