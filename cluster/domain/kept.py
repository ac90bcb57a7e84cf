"""A map bounded by the memory its values take: what apply keeps between commands (``records.UnitOfWork``).

Each entry is put with its weight (an estimate of its bytes in memory, by the caller, who knows what it
holds). Entries are ordered oldest first (a put makes its key the newest); an entry that would take the
total past the budget first forgets the oldest entries, down to half the budget, so the newest half stays:
the specs and runs a burst just fired are still there when its runs are leased and completed. An entry
heavier than half the budget is not kept at all, and a budget of 0 keeps nothing.

A count of entries forgotten all at once bounded neither (a run's result and a job's payload may each
weigh 1 MiB) and kept none of a burst larger than the count.
"""

from __future__ import annotations

from typing import Generic, Iterator, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Kept(Generic[K, V]):
    __slots__ = ("_values", "_weights", "budget", "total")

    def __init__(self, budget: int) -> None:
        self._values: dict[K, V] = {}
        self._weights: dict[K, int] = {}
        self.budget = budget
        #: the weight of what is kept now
        self.total = 0

    def __contains__(self, key: K) -> bool:
        return key in self._values

    def __getitem__(self, key: K) -> V:
        return self._values[key]

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[K]:
        return iter(self._values)

    def get(self, key: K) -> V | None:
        return self._values.get(key)

    def put(self, key: K, value: V, weight: int) -> None:
        """Keep ``value`` under ``key`` (instead of what was), as the newest entry."""
        values = self._values
        if key in values:
            self.pop(key)
        if self.total + weight > self.budget:
            self._shed()
            if weight > self.budget // 2:
                return
        values[key] = value
        self._weights[key] = weight
        self.total += weight

    def pop(self, key: K) -> None:
        """Forget ``key`` (nothing if it is not kept)."""
        if self._values.pop(key, _ABSENT) is not _ABSENT:
            self.total -= self._weights.pop(key)

    def clear(self) -> None:
        self._values.clear()
        self._weights.clear()
        self.total = 0

    def _shed(self) -> None:
        """Forget the oldest entries, down to half the budget."""
        values, weights = self._values, self._weights
        excess = self.total - self.budget // 2
        gone: list[K] = []
        for key, weight in weights.items():
            if excess <= 0:
                break
            gone.append(key)
            excess -= weight
        for key in gone:
            del values[key]
            self.total -= weights.pop(key)


_ABSENT = object()
