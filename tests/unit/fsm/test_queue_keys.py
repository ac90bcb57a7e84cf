"""A queue's PENDING runs of every type are the merge of its per-type indexes (``memory.QueueKeys``): an executor
that serves any type is granted the oldest runs across types, and the queue's depth and next leasable instant count
every type, with no second index kept per queue."""

from __future__ import annotations

import pytest
from sortedcontainers import SortedList

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import Every, JobSpec, RunStatus
from raftsched.cluster.fsm.memory import QueueKeys
from tests.unit.test_lease_types import T0, Harness

pytestmark = pytest.mark.unit


def test_queue_keys_merge_lists_in_key_order() -> None:
    a = SortedList([(5, "a"), (9, "c")])
    b = SortedList([(1, "z"), (7, "b"), (12, "d")])
    keys = QueueKeys([a, b])
    assert list(keys) == [(1, "z"), (5, "a"), (7, "b"), (9, "c"), (12, "d")]
    assert len(keys) == 5 and keys
    assert keys[0] == (1, "z") and keys[3] == (9, "c")
    assert list(keys.irange(maximum=(9, ""), inclusive=(True, False))) == [(1, "z"), (5, "a"), (7, "b")]
    a.clear(), b.clear()
    assert not keys and len(keys) == 0
    with pytest.raises(IndexError):
        keys[0]


def test_a_grant_of_any_type_takes_the_oldest_runs_across_types() -> None:
    h = Harness()
    h.job("sh", "shell")
    h.job("nop", "noop")
    h.job("web", "http")
    order = [("sh", T0 - 50), ("nop", T0 - 40), ("web", T0 - 30), ("sh", T0 - 20), ("nop", T0 - 10), ("web", T0)]
    runs = [h.trigger(job, at) for job, at in order]
    assert len(h.m.pending["default"]) == 6
    assert h.m.next_leasable_ms(["default"], ()) == T0 - 50
    assert h.m.queue_depths() == {"default": 6}
    assert h.acquire("ex-any", (), max_runs=4) == runs[:4]  # oldest first, whatever the type
    assert h.m.queue_depths() == {"default": 2}
    assert h.m.next_leasable_ms(["default"], ()) == T0 - 10
    assert h.acquire("ex-any", (), max_runs=4) == runs[4:]
    assert h.m.queue_depths() == {}
    assert h.m.tx.mem.queue_types == {} and h.m.tx.mem.pending_by_type == {}  # emptied lists go from both maps


def test_queues_are_kept_apart_and_a_type_change_moves_pending_runs() -> None:
    h = Harness()
    h.job("a", "shell", queue="q1")
    h.job("b", "shell", queue="q2")
    first = h.trigger("a")
    second = h.trigger("b")
    assert {q: list(keys) for q, keys in h.m.pending.items()} == {"q1": [(T0, first)], "q2": [(T0, second)]}
    h.ok(c.UpdateJob(T0, "a", JobSpec("a", Every(3_600_000), queue="q1", type="noop")))
    assert set(h.m.tx.mem.queue_types["q1"]) == {"noop"}
    assert [g.run.run_id for g in h.ok(c.AcquireLeases(T0 + 1, "ex", ("q1", "q2"), 10, ()))] == [first, second]
    assert h.m.runs[first].status is RunStatus.LEASED and h.m.pending == {}
