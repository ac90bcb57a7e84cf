"""A map bounded by the memory its values take: what apply keeps between commands (``records.UnitOfWork``).

Each entry is put with its weight (an estimate of its bytes in memory, by the caller, who knows what it
holds). Entries are ordered oldest first (a put makes its key the newest); an entry that would take the
total past the budget first forgets the oldest entries, down to half the budget, so the newest half stays:
the specs and runs a burst just fired are still there when its runs are leased and completed. An entry
heavier than half the budget is not kept at all, and a budget of 0 keeps nothing.

A count of entries forgotten all at once bounded neither (a run's result and a job's payload may each
weigh 1 MiB) and kept none of a burst larger than the count.

A ``dict`` subclass so that reads (``in``, ``[]``, ``get``: several on every record a command touches)
stay the dict's own; every change goes through ``put``, ``forget`` or ``clear``, which keep the weights.
"""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Kept(dict[K, V]):
    __slots__ = ("_weights", "budget", "total")

    def __init__(self, budget: int) -> None:
        super().__init__()
        self._weights: dict[K, int] = {}
        self.budget = budget
        #: the weight of what is kept now
        self.total = 0

    def put(self, key: K, value: V, weight: int) -> None:
        """Keep ``value`` under ``key`` (instead of what was), as the newest entry."""
        before = self._weights.pop(key, None)
        if before is not None:
            dict.__delitem__(self, key)  # re-inserted below: the newest
            self.total -= before
        if self.total + weight > self.budget:
            self._shed()
            if weight > self.budget // 2:
                return
        dict.__setitem__(self, key, value)
        self._weights[key] = weight
        self.total += weight

    def forget(self, key: K) -> None:
        """Forget ``key`` (nothing if it is not kept)."""
        weight = self._weights.pop(key, None)
        if weight is not None:
            dict.__delitem__(self, key)
            self.total -= weight

    def clear(self) -> None:
        dict.clear(self)
        self._weights.clear()
        self.total = 0

    def _shed(self) -> None:
        """Forget the oldest entries, down to half the budget."""
        weights = self._weights
        excess = self.total - self.budget // 2
        gone: list[K] = []
        for key, weight in weights.items():
            if excess <= 0:
                break
            gone.append(key)
            excess -= weight
        for key in gone:
            dict.__delitem__(self, key)
            self.total -= weights.pop(key)

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a Kept map changes only through put, forget and clear (they keep its weights)")

    __setitem__ = __delitem__ = pop = popitem = setdefault = update = __ior__ = _refuse
