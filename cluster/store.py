"""The replicated job store: the state machine behind Raft, with a lock and read barriers.

* ``submit(cmd)`` proposes a command from any node and returns the result
  this node computed when it applied the entry; ``Unavailable`` when it did
  not commit in time (no leader, no quorum, lost forward).
* ``read(fn)`` runs ``fn(machine)`` under the lock after a *read barrier*:
  a committed no-op that concurrent readers share, so a read on any node
  sees every write acknowledged before it began (linearizable reads on
  followers, at the cost of one Raft round per batch of readers).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Protocol, TypeVar

from cluster import commands as c
from cluster.clock import Clock
from cluster.events import EventHub
from cluster.results import Result, Unavailable
from cluster.state import JobStateMachine, RunEvent
from raft.adapter import ProposalError

T = TypeVar("T")


class Replicator(Protocol):
    """What the store needs from Raft (``raft.RaftNode`` or an in-memory fake)."""

    def propose(self, data: bytes, timeout: float) -> Any: ...

    def propose_async(self, data: bytes, callback: Callable[[Any, int], None]) -> None: ...

    def is_leader(self) -> bool: ...


class ReadBarrier:
    """Coalesces read barriers: every reader waits for a no-op proposed after it arrived."""

    def __init__(self, propose: Callable[[Callable[[Any, int], None]], None], clock: Clock) -> None:
        self._propose = propose
        self._clock = clock
        self._cond = threading.Condition()
        self._started = 0
        self._done = 0
        self._wanted = 0
        self._inflight = False
        self._failed: dict[int, int] = {}

    def wait(self, timeout: float) -> None:
        deadline = self._clock.monotonic() + timeout
        with self._cond:
            target = self._started + 1
            self._wanted = max(self._wanted, target)
            if not self._inflight:
                self._start()
            while self._done < target:
                left = deadline - self._clock.monotonic()
                if left <= 0:
                    raise Unavailable("could not confirm the latest committed state in time (no leader or quorum?); retry")
                self._cond.wait(left)
            for gen in range(target, self._done + 1):
                if gen in self._failed:
                    raise Unavailable("could not reach the leader to confirm the latest state; retry")

    def _start(self) -> None:
        self._started += 1
        gen = self._started
        self._inflight = True

        def done(_result: Any, error: int) -> None:
            with self._cond:
                self._done = gen
                self._inflight = False
                if error != 0:
                    self._failed[gen] = error
                for old in [g for g in self._failed if g < gen - 1000]:
                    del self._failed[old]
                if self._wanted > self._started:
                    self._start()
                self._cond.notify_all()

        try:
            self._propose(done)
        except Exception:
            done(None, -1)


class JobStore:
    def __init__(self, machine: JobStateMachine, clock: Clock, hub: EventHub, request_timeout_s: float) -> None:
        self.machine = machine
        self.lock = threading.RLock()
        self.clock = clock
        self.hub = hub
        self.request_timeout_s = request_timeout_s
        self._raft: Replicator | None = None
        self._barrier: ReadBarrier | None = None
        #: called on the tick thread after every apply with the run changes it made
        self.on_applied: list[Callable[[list[RunEvent]], None]] = []

    def attach(self, raft: Replicator) -> None:
        self._raft = raft
        self._barrier = ReadBarrier(lambda cb: raft.propose_async(c.encode(c.Barrier(self.clock.now_ms())), cb), self.clock)

    @property
    def raft(self) -> Replicator:
        if self._raft is None:
            raise Unavailable("this node is still starting; retry")
        return self._raft

    def after_apply(self) -> None:
        """Called on the tick thread after every apply: publish run changes, wake waiters."""
        with self.lock:
            events = self.machine.drain_events()
        if events:
            self.hub.publish(events)
        for hook in self.on_applied:
            hook(events)

    def submit(self, cmd: c.Command, timeout: float | None = None) -> Result:
        try:
            result: Result = self.raft.propose(c.encode(cmd), timeout or self.request_timeout_s)
        except ProposalError as exc:
            raise Unavailable(str(exc)) from exc
        if result is None:
            raise Unavailable("the command was applied but produced no result on this node; check the node log")
        return result

    def read(self, fn: Callable[[JobStateMachine], T], barrier: bool = True) -> T:
        if barrier:
            if self._barrier is None:
                raise Unavailable("this node is still starting; retry")
            self._barrier.wait(self.request_timeout_s)
        with self.lock:
            return fn(self.machine)
