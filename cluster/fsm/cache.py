"""What apply keeps between commands, bounded by one budget of memory (``CACHE_BYTES``).

The one cache of the state machine (``tx``): the stored bytes of the runs
last read or written (decoded again on each read: kept as tuples they took
up to twice the memory, and the collector walked every one of their
objects) and the specs of the jobs last read or written (a
``Kept`` map each, sharing one ``Budget``), so that
a run fired, leased and completed by consecutive commands is read from the
store once, and the spec its grant and retention rules read is not decoded
again. A run is kept once written only while it is live (PENDING, LEASED):
an ended run is seldom read again, and under a backlog of live runs larger
than the budget, the runs just completed pushed out the ones about to be
leased (``raftsched.cluster.fsm.tx``). Kept values are what the store holds: every write of a record goes
through the transaction that keeps it (``tx``), and a store replaced or
cleared forgets everything (``Kept.clear``).

Each entry is put with its weight (an estimate of its bytes in memory, by
the caller, who knows what it holds: ``run_weight``, ``spec_weight``); a
spec many jobs share is counted once for all of them (``KeptSpecs``).
Entries are ordered oldest first (a put makes its key the newest); an entry
that would take the total past the budget first has every map forget its
oldest entries (each its share), down to ``1 - 1/SHED_PARTS`` of the budget
or less, as far as the entry needs: the specs and runs a burst just fired
are still there when its runs are leased and completed. Forgetting a
sixteenth at a time keeps each shedding short (a run or spec forgotten costs
a few microseconds to free: half of a full budget, ~100,000 records, held
apply for over half a second, a pause every command behind it waited out)
and keeps the cache nearly full between sheddings. An entry heavier than
half the budget is kept only if it fits as things are (it forgets nothing),
and a budget of 0 keeps nothing. (A count of entries bounded neither:
a run's result and a job's payload may each weigh 1 MiB.)

A ``dict`` subclass so that reads (``in``, ``[]``, ``get``: several on every
record a command touches) stay the dict's own; every change goes through
``put``, ``forget`` or ``clear``, which keep the weights.

Measured to pay for itself (``scripts/bench/micro/apply_cost.py --jobs 100000 --store
lmdb``): without it a grant reads and decodes every run and spec again.
"""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar

from raftsched.cluster.domain.model import JobSpec

K = TypeVar("K")
V = TypeVar("V")

#: the memory kept records may take: ~110,000 runs and as many specs of the usual size (fewer as runs' histories
#: and results grow, and as payloads do)
CACHE_BYTES = 224 << 20
#: a shedding forgets at least ``1/SHED_PARTS`` of the budget
SHED_PARTS = 16
#: what a kept run takes beyond its stored bytes: the bytes object, its key and its slots in the maps (measured on
#: an LMDB store, the memory freed by forgetting 2,000 kept runs of one-off jobs: 354 bytes each fired, 570
#: leased, 808 waiting for a retry, against 237, 329 and 567 stored; an ended run is no longer kept once written,
#: a run waiting for its retry is)
RUN_OVERHEAD = 200
#: what a kept spec takes beyond its name and payload: the spec, its stored fields, their numbers and strings
#: (measured, the memory freed by forgetting 20,000 kept specs of one-off jobs: ~1,140 bytes each)
SPEC_OVERHEAD = 1150


#: what a kept spec of a shared form takes on its own: its job id and its slots in the maps (measured, the memory
#: freed by forgetting 2,000 such entries: ~170 bytes each); the spec, its stored fields and the pair of them an
#: entry holds are the form's, counted once for all the jobs that share it (``KeptSpecs``)
SPEC_ENTRY = 200


def run_weight(stored_bytes: int) -> int:
    """The bytes of memory a kept run is counted for, from the bytes it is stored as (0: a missing row)."""
    return RUN_OVERHEAD + stored_bytes


def spec_weight(spec: JobSpec) -> int:
    """The bytes of memory a kept spec is counted for: an estimate, cheap enough to take on every keep."""
    return SPEC_OVERHEAD + len(spec.name) + len(spec.payload)


class Budget:
    """The bytes the kept maps that share it may take together (``CACHE_BYTES``): when a put would pass it, every
    one of them forgets its oldest entries, down to its share of what makes room (``shed``)."""

    __slots__ = ("limit", "total", "_maps")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        #: the weight of everything kept now, in every map
        self.total = 0
        self._maps: list[Kept[Any, Any]] = []

    def join(self, kept: Kept[Any, Any]) -> None:
        self._maps.append(kept)

    def shed(self, need: int = 0) -> None:
        """Every map forgets its oldest entries, down to its share of ``1 - 1/SHED_PARTS`` of the budget, or of
        less, so that ``need`` more bytes fit."""
        keep, whole = min(self.limit - self.limit // SHED_PARTS, self.limit - need), self.total
        for kept in self._maps:
            kept.shed_to(kept.total * keep // whole if whole else 0)

    def clear(self) -> None:
        for kept in self._maps:
            kept.clear()


class Kept(dict[K, V]):
    """One kind of kept value (runs' stored bytes, jobs' specs), within a ``Budget`` it may share (an int: its own)."""

    __slots__ = ("_weights", "_budget", "total")

    def __init__(self, budget: Budget | int) -> None:
        super().__init__()
        self._weights: dict[K, int] = {}
        self._budget = budget if isinstance(budget, Budget) else Budget(budget)
        self._budget.join(self)
        #: the weight of what this map keeps now
        self.total = 0

    @property
    def budget(self) -> int:
        return self._budget.limit

    def put(self, key: K, value: V, weight: int) -> None:
        """Keep ``value`` under ``key`` (instead of what was), as the newest entry."""
        budget = self._budget
        before = self._weights.pop(key, None)
        if before is not None:
            dict.__delitem__(self, key)  # re-inserted below: the newest
            self.total -= before
            budget.total -= before
        if budget.total + weight > budget.limit:
            if weight > budget.limit // 2:
                return  # not kept, and nothing forgotten for it
            budget.shed(weight)
        dict.__setitem__(self, key, value)
        self._weights[key] = weight
        self.total += weight
        budget.total += weight

    #: ``put`` as this class defines it, for a subclass that defines its own ``put`` (one call on the hottest path)
    _keep = put

    def forget(self, key: K) -> None:
        """Forget ``key`` (nothing if it is not kept)."""
        weight = self._weights.pop(key, None)
        if weight is not None:
            dict.__delitem__(self, key)
            self.total -= weight
            self._budget.total -= weight

    def weight(self, key: K) -> int:
        """What ``key``'s entry is counted for (0: not kept)."""
        return self._weights.get(key, 0)

    def clear(self) -> None:
        dict.clear(self)
        self._weights.clear()
        self._budget.total -= self.total
        self.total = 0

    def shed_to(self, target: int) -> None:
        """Forget the oldest entries, down to ``target``."""
        for key in self._oldest(self.total - target):
            self.forget(key)

    def _oldest(self, excess: int) -> list[K]:
        """The oldest keys whose entries, forgotten, free at least ``excess`` (all of them if they do not)."""
        gone: list[K] = []
        for key, weight in self._weights.items():
            if excess <= 0:
                break
            gone.append(key)
            excess -= weight
        return gone

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a Kept map changes only through put, forget and clear (they keep its weights)")

    __setitem__ = __delitem__ = pop = popitem = setdefault = update = __ior__ = _refuse


class KeptSpecs(Kept[str, tuple[tuple[Any, ...], JobSpec]]):
    """The jobs' kept specs, each as (its stored fields, its spec), counted for the memory they take.

    Most jobs share a spec with many others (one shape, one name): the decoder hands each of them the same
    interned spec and stored fields (``layout.Decoder``: read back, or written from the second job of a form on),
    so what each such job adds is an entry
    (``SPEC_ENTRY``). ``put_shared`` counts such an entry at that, and its form's weight (``spec_weight``, less
    an entry) once, for as long as any kept entry holds the form; a spec of its own (``put``) is counted in
    full, as a form of one entry would be. Counted that way, 200,000 jobs of 20,000 forms take ~60 MiB of the
    budget rather than ~230 MiB (more than all of it), and the runs their grants read stay kept."""

    __slots__ = ("_forms", "_shared")

    def __init__(self, budget: Budget | int) -> None:
        super().__init__(budget)
        #: id of a shared spec -> [kept entries that hold it, its form's weight, the (stored fields, spec) pair
        #: every entry of the form holds: one object for all of them, not one per job for the collector to walk]
        self._forms: dict[int, list[Any]] = {}
        #: key of an entry put by ``put_shared`` -> the id of its spec
        self._shared: dict[str, int] = {}

    def put_shared(self, key: str, part: tuple[Any, ...], spec: JobSpec) -> None:
        """Keep an interned spec (with its interned stored fields) under ``key``: the entry is counted at
        ``SPEC_ENTRY``, the form once."""
        self._drop_form_of(key)
        ident = id(spec)
        form = self._forms.get(ident)
        if form is None:
            form = self._forms[ident] = [0, max(0, spec_weight(spec) - SPEC_ENTRY), (part, spec)]
            self.total += form[1]
            self._budget.total += form[1]
        form[0] += 1
        self._shared[key] = ident
        pair = form[2]
        self._keep(key, pair if pair[0] is part else (part, spec), SPEC_ENTRY)
        if key not in self:  # not kept after all (a budget of 0)
            self._drop_form_of(key)

    def put(self, key: str, value: tuple[tuple[Any, ...], JobSpec], weight: int) -> None:
        self._drop_form_of(key)
        self._keep(key, value, weight)

    def forget(self, key: str) -> None:
        self._drop_form_of(key)
        super().forget(key)

    def clear(self) -> None:
        super().clear()  # the forms' weights are in ``total``: gone with it
        self._forms.clear()
        self._shared.clear()

    def _oldest(self, excess: int) -> list[str]:
        """``Kept._oldest``, counting a form's weight as freed with the last of its chosen holders."""
        weights, forms, shared = self._weights, self._forms, self._shared
        gone: list[str] = []
        left: dict[int, int] = {}  # a form -> its holders after the entries chosen so far go
        for key, weight in weights.items():
            if excess <= 0:
                break
            gone.append(key)
            excess -= weight
            ident = shared.get(key)
            if ident is not None:
                holders = left[ident] = left.get(ident, forms[ident][0]) - 1
                if not holders:
                    excess -= forms[ident][1]  # the last entry of its form: the form goes with it
        return gone

    def _drop_form_of(self, key: str) -> None:
        """The entry under ``key`` goes (or is replaced): if it holds a shared form, the form loses a holder."""
        ident = self._shared.pop(key, None)
        if ident is None:
            return
        form = self._forms[ident]
        form[0] -= 1
        if form[0] <= 0:
            del self._forms[ident]
            self.total -= form[1]
            self._budget.total -= form[1]
