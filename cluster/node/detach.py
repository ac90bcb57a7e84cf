"""Copies of live state records for readers outside the Raft thread.

The state machine mutates its ``Job`` and ``Run`` records in place on the
Raft thread; a reader that keeps one after releasing the state lock must
hold a copy. ``detach`` is the one place that makes those copies: records
(``Job``, ``Run``, ``Grant``) at the top of a query's answer, inside the
tuple of several answers, or inside a list, come back as copies; plain
values (ids, instants, counts) come back as they are.

Lists are taken to be homogeneous (every query returns lists of one kind):
a list whose first item needs no copy is returned as it is, without a look
at every item, so the leader's large lists of ``(job_id, instant)`` cost
nothing here.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, TypeVar

from raftsched.cluster.domain.leases import Grant
from raftsched.cluster.domain.model import Job, Run

T = TypeVar("T")

_COPIERS: dict[type, Callable[[Any], Any]] = {
    Job: copy.copy,
    Run: copy.copy,
    Grant: lambda g: Grant(copy.copy(g.run), g.spec),  # a spec is frozen: shared safely
}


def detach(value: T) -> T:
    """``value`` with every live record in it replaced by a copy (see the module docstring)."""
    return _detach(value)


def _detach(value: Any) -> Any:
    kind = type(value)
    copier = _COPIERS.get(kind)
    if copier is not None:
        return copier(value)
    if kind is tuple:
        items = tuple(_detach(v) for v in value)
        return value if all(a is b for a, b in zip(items, value)) else items
    if kind is list and value:
        first = value[0]
        if _detach(first) is first:
            return value
        return [_detach(v) for v in value]
    return value
