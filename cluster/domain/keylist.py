"""A small sorted list of keys, for the per-job run index.

``sortedcontainers.SortedList`` is built for large lists; creating one costs
about 8 us, paid for every job's first run (a burst of 100,000 one-off jobs
creates 100,000 of them). A job's runs are few (``history_limit``, 1,000 by
default) and arrive in order of their instants, so a plain list kept sorted
with ``bisect`` is cheaper to create, append to and trim.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Any, Iterable, Iterator


class KeyList:
    __slots__ = ("_keys",)

    def __init__(self, keys: Iterable[Any] = ()) -> None:
        self._keys: list[Any] = sorted(keys)

    def add(self, key: Any) -> None:
        keys = self._keys
        if not keys or key > keys[-1]:
            keys.append(key)  # the usual case: the newest instant
        else:
            insort(keys, key)

    def discard(self, key: Any) -> None:
        keys = self._keys
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            del keys[i]

    def after(self, key: Any) -> Iterator[Any]:
        """The keys greater than ``key``, in order (a copy: safe to change the list meanwhile)."""
        return iter(self._keys[bisect_right(self._keys, key) :])

    def before(self, key: Any) -> Iterator[Any]:
        """The keys less than ``key`` (all keys when ``key`` is None), newest first (a copy, as ``after``)."""
        end = len(self._keys) if key is None else bisect_left(self._keys, key)
        return reversed(self._keys[:end])

    def slice_after(self, key: Any, limit: int) -> list[Any]:
        """At most ``limit`` keys greater than ``key`` (all keys when ``key`` is None), in order: a copy of
        only those, so a long list can be walked a chunk at a time."""
        start = 0 if key is None else bisect_right(self._keys, key)
        return self._keys[start : start + limit]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __bool__(self) -> bool:
        return bool(self._keys)

    def __repr__(self) -> str:
        return f"KeyList({self._keys!r})"
