"""The replicated job store: the state machine behind Raft, with a lock and read barriers.

* ``submit(cmd)`` proposes a command from any node and returns the result
  this node computed when it applied the entry; ``Unavailable`` when it did
  not commit in time (no leader, no quorum, lost forward). Concurrent
  submits are group-committed: several commands share one Raft entry.
* ``read(fn)`` runs ``fn(machine)`` under the lock after a *read barrier*:
  a committed no-op that concurrent readers share, so a read on any node
  sees every write acknowledged before it began (linearizable reads on
  followers, at the cost of one Raft round per batch of readers).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Protocol, TypeVar

from cluster.domain import commands as c
from cluster.domain.results import Result, Unavailable, ValidationError, value_or_error
from cluster.domain.state import JobStateMachine, RunEvent
from cluster.node.clock import Clock
from cluster.node.event_hub import EventHub
from raft.adapter import ProposalError

T = TypeVar("T")


class Replicator(Protocol):
    """What the store needs from Raft (``raft.RaftNode`` or an in-memory fake)."""

    def propose(self, data: bytes, timeout: float, weight: int = 0) -> Any: ...

    def propose_many(self, proposals: list[tuple[bytes, int]], timeout: float) -> list[Any]: ...

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


class ReplicatedState:
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
        answer = self.submit_many([cmd], timeout)[0]
        if isinstance(answer, Unavailable):
            raise answer
        return answer

    def submit_many(self, cmds: list[c.Command], timeout: float | None = None) -> list[Result | Unavailable]:
        """Propose several commands together (they share Raft entries); a result or ``Unavailable`` each."""
        # a grant's weight keeps one entry's fencing tokens in range (see cluster.domain.lease_rules)
        proposals = [(c.encode(cmd), cmd.max_runs if isinstance(cmd, c.AcquireLeases) else 0) for cmd in cmds]
        out: list[Result | Unavailable] = []
        for answer in self.raft.propose_many(proposals, timeout or self.request_timeout_s):
            if isinstance(answer, ProposalError):
                out.append(Unavailable(str(answer)))
            elif answer is None:
                out.append(Unavailable("the command was applied but produced no result on this node; check the node log"))
            else:
                out.append(answer)
        return out

    def submit_each(self, items: list[Any], build: Callable[[Any], c.Command]) -> list[Any]:
        """Batch calls: ``build`` a command from each item (an item that is already an exception,
        or whose ``build`` raises ``ValidationError``, keeps that error), propose them together and
        answer per item: a copy of its ``Ok`` value, or its error."""
        out: list[Any] = [None] * len(items)
        cmds: list[c.Command] = []
        slots: list[int] = []
        for i, item in enumerate(items):
            try:
                if isinstance(item, Exception):
                    raise item
                cmds.append(build(item))
                slots.append(i)
            except ValidationError as exc:
                out[i] = exc
        answers = self.submit_many(cmds) if cmds else []
        with self.lock:
            for slot, answer in zip(slots, answers):
                out[slot] = value_or_error(answer)
        return out

    def read(self, fn: Callable[[JobStateMachine], T], barrier: bool = True) -> T:
        if barrier:
            if self._barrier is None:
                raise Unavailable("this node is still starting; retry")
            self._barrier.wait(self.request_timeout_s)
        with self.lock:
            return fn(self.machine)
