"""How often the leader loop looks at the due index while jobs come due one after another, and what wakes it."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.fsm import keys
from raftsched.cluster.node import leader_loop as ll
from raftsched.cluster.node.config import SchedulerConfig

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000


class Replica:
    def __init__(self) -> None:
        self.on_applied: list[Callable[[list[Any]], None]] = []
        self.proposed: list[tuple[c.Fire, Callable[[Any, int], None]]] = []

    def propose_async(self, cmd: c.Fire, done: Callable[[Any, int], None]) -> None:
        self.proposed.append((cmd, done))


class Clock:
    def now_ms(self) -> int:
        return NOW

    def monotonic(self) -> float:
        return 100.0


def _loop(**cfg: Any) -> tuple[ll.LeaderLoop, Replica, list[int]]:
    replica = Replica()
    loop = ll.LeaderLoop(replica, Clock(), dataclasses.replace(SchedulerConfig(), **cfg))  # type: ignore[arg-type]
    wakes: list[int] = []
    loop.wake = lambda: wakes.append(1)  # type: ignore[method-assign]
    return loop, replica, wakes


def _look(due: list[bytes], room: int = 8000) -> ll._Look:
    return ll._Look(room, due, keys.ms_from(due[0]) if due else None, [], {}, None, None)


def _due(*offsets_ms: int) -> list[bytes]:
    return [keys.timed_key(NOW + off, f"job-{off}") for off in offsets_ms]


def test_after_a_fire_the_loop_gathers_what_comes_due_and_a_commit_does_not_wake_it() -> None:
    loop, replica, wakes = _loop()
    pause = loop._fire_due(NOW, _look(_due(10, 20, 30)))
    assert [len(cmd.items) for cmd, _ in replica.proposed] == [3]
    assert pause == ll.FIRE_GATHER_S  # not the 2 ms it once was: a Fire of a few items each time
    replica.proposed[0][1](None, 0)
    assert wakes == []


def test_with_everything_due_on_its_way_the_loop_waits_the_gathering_pause_not_a_millisecond() -> None:
    loop, replica, _ = _loop()
    due = _due(10, 20)
    loop._fire_due(NOW, _look(due))
    assert loop._fire_due(NOW, _look(due)) == ll.FIRE_GATHER_S
    assert len(replica.proposed) == 1  # nothing proposed twice


def test_a_full_pipeline_is_woken_by_each_commit_and_a_failed_batch_always_wakes() -> None:
    loop, replica, wakes = _loop()
    loop._fire_due(NOW, _look(_due(1, 2, 3, 4, 5), room=2))
    assert [len(cmd.items) for cmd, _ in replica.proposed] == [2]
    replica.proposed[0][1](None, 0)
    assert wakes == [1]
    loop, replica, wakes = _loop()
    loop._fire_due(NOW, _look(_due(1)))
    replica.proposed[0][1](None, 3)
    assert wakes == [1]


def test_without_a_look_ahead_the_loop_does_not_wait_to_gather() -> None:
    loop, _, _ = _loop(fire_lookahead_s=0.0)
    assert loop._fire_due(NOW, _look(_due(0))) == ll.MIN_PAUSE_S
    loop, _, _ = _loop(fire_lookahead_s=0.04)
    assert loop._fire_due(NOW, _look(_due(0))) == pytest.approx(0.01)  # a quarter of the look-ahead
