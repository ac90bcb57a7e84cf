"""Read barriers (``raftsched.cluster.node.replica.ReadBarrier``): readers share one barrier in flight, and a
barrier that never answers is given up, so it cannot leave every later read of the node waiting."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest

from raftsched.cluster.domain.errors import Unavailable
from raftsched.cluster.node.clock import SystemClock
from raftsched.cluster.node.replica import ReadBarrier

pytestmark = pytest.mark.unit

Done = Callable[[Any, int], None]


class Proposals:
    """Records each barrier's callback; answers at once unless told to keep it."""

    def __init__(self) -> None:
        self.callbacks: list[Done] = []
        self.keep = False

    def __call__(self, done: Done) -> None:
        self.callbacks.append(done)
        if not self.keep:
            done(None, 0)


def test_readers_arriving_together_share_one_barrier() -> None:
    proposals = Proposals()
    proposals.keep = True
    barrier = ReadBarrier(proposals, SystemClock())
    errors: list[BaseException] = []

    def read() -> None:
        try:
            barrier.wait(5)
        except BaseException as exc:  # reported below
            errors.append(exc)

    first = threading.Thread(target=read)
    first.start()
    while not proposals.callbacks:
        time.sleep(0.01)
    later = [threading.Thread(target=read) for _ in range(5)]
    for t in later:
        t.start()
    time.sleep(0.1)
    proposals.callbacks[0](None, 0)  # the first reader's barrier: the later ones need one proposed after them
    while len(proposals.callbacks) < 2:
        time.sleep(0.01)
    proposals.callbacks[1](None, 0)
    for t in [first, *later]:
        t.join(5)
    assert errors == [] and len(proposals.callbacks) == 2


def test_a_barrier_that_never_answers_is_given_up_and_the_next_read_goes_through() -> None:
    proposals = Proposals()
    proposals.keep = True  # pysyncobj lost this one (its reply went with a connection, or a snapshot covered it)
    barrier = ReadBarrier(proposals, SystemClock(), stale_after_s=0.2)
    began = time.monotonic()
    with pytest.raises(Unavailable, match="retry"):
        barrier.wait(5)
    assert time.monotonic() - began < 2  # told to retry once given up, not at the reader's deadline
    proposals.keep = False
    barrier.wait(5)  # a new barrier is proposed and answers
    assert len(proposals.callbacks) == 2


def test_a_late_answer_of_a_given_up_barrier_is_not_taken_for_the_next_one() -> None:
    proposals = Proposals()
    proposals.keep = True
    barrier = ReadBarrier(proposals, SystemClock(), stale_after_s=1.0)
    with pytest.raises(Unavailable):
        barrier.wait(5)
    result: list[str] = []

    def read() -> None:
        try:
            barrier.wait(5)
            result.append("read")
        except Unavailable:
            result.append("unavailable")

    t = threading.Thread(target=read)
    t.start()
    while len(proposals.callbacks) < 2:
        time.sleep(0.01)
    proposals.callbacks[0](None, 0)  # the given-up barrier answers after all: the waiting reader needs the new one
    t.join(0.2)
    assert result == []  # still waiting: the old answer does not confirm a state after this reader arrived
    proposals.callbacks[1](None, 0)
    t.join(5)
    assert result == ["read"]
