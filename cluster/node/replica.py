"""The replicated job state: the state machine behind Raft, with its lock and read barriers.

The one way into the state for the node's services, the leader loop and the
servicers (nobody else touches the machine, its lock or the replicator):

* ``execute(cmd)`` proposes a command from any node and returns what this
  node's state machine answered when it applied the entry: the ``Ok`` value
  (a detached copy), or raises ``RejectedError`` for a business refusal and
  ``Unavailable`` when the command did not commit in time (no leader, no
  quorum, lost forward: the outcome is then unknown, so commands are
  idempotent). Concurrent proposals are group-committed: several commands
  share one Raft entry. ``execute_each`` does the same for a batch call.
* A command newer than the cluster's command format (``SetClusterFormat``)
  is never proposed: it is refused here, as the state machine would refuse
  it, since a member that does not understand it would stop on meeting it.
* ``propose_async(cmd, done)`` proposes without waiting (the leader's
  pipelined fires and expiries); ``done(result, fail_reason)`` runs on the
  Raft thread.
* ``read(fn)`` runs ``fn(machine)`` after a *read barrier*: a committed
  no-op that concurrent readers share, so a read on any node sees every
  write acknowledged before it began (linearizable reads on followers, at
  the cost of one Raft round per batch of readers). It holds the lock the
  Raft thread holds while it applies an entry and commits it to the store,
  and reads the store in one read transaction: the in-memory indexes and
  the stored records agree. Keep such reads small.
* ``read_records(fn)`` runs ``fn(records)`` (a ``RecordReader``: jobs, runs,
  a job's runs, the active runs) after the same barrier, in one read
  transaction of the store and **without** the lock: a scan of a million
  jobs never holds up Raft. It sees whole entries only (every entry's store
  commit happens before its proposer, or a barrier, hears of it).
* Records in the answers come back detached (``raftsched.cluster.node.detach``).
* Every command carries the proposer's wall-clock time, and the state
  machine keeps the greatest it saw as its "now": nothing is proposed while
  ``stamp_refusal()`` (the clock guard: ``raftsched.cluster.node.clock_guard``) says
  this node's clock must not be trusted — the call is ``Unavailable`` with
  its reason, and a read barrier carries no time at all.
* While ``disk_refusal()`` says this node cannot write its disk (``Fitness``'
  STORAGE problem, set by the Raft adapter), nothing is proposed here: a
  write is ``Unavailable`` with the reason (clients send it to another
  node), and reads skip the barrier, which this node could not apply: they
  serve the state as of the last entry it stored. While
  ``disks_exhausted()`` says a majority of the members cannot write
  (``raftsched.cluster.node.disk_majority``), no write can commit: one is
  ``Overloaded`` (RESOURCE_EXHAUSTED) naming them, whether it was not
  proposed or did not commit.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import Overloaded, RejectedError, Unavailable, ValidationError
from raftsched.cluster.domain.results import Ok, Rejected, Result
from raftsched.cluster.fsm.machine import JobStateMachine, RunEvent
from raftsched.cluster.fsm.reader import RecordReader
from raftsched.cluster.node.clock import Clock
from raftsched.cluster.node.detach import detach
from raftsched.cluster.node.event_hub import EventHub
from raftsched.cluster.node.ports import ProposalCallback, Replicator

T = TypeVar("T")


class ReadBarrier:
    """Coalesces read barriers: every reader waits for a no-op proposed after it arrived.

    One barrier is in flight at a time. One that has not answered within ``stale_after_s`` is given up
    (its readers are told to retry) and a new one is proposed: pysyncobj never answers some proposals
    (a forwarded command whose reply was lost with a connection, or whose entry a snapshot from the leader
    covered), and one such barrier must not leave every later read on this node waiting for ever."""

    def __init__(self, propose: Callable[[Callable[[Any, int], None]], None], clock: Clock, stale_after_s: float = 2.0) -> None:
        self._propose = propose
        self._clock = clock
        self._stale_after_s = stale_after_s
        self._cond = threading.Condition()
        self._started = 0
        self._done = 0
        self._wanted = 0
        self._inflight = False
        self._inflight_since = 0.0
        self._failed: dict[int, int] = {}

    def wait(self, timeout: float) -> None:
        deadline = self._clock.monotonic() + timeout
        with self._cond:
            target = self._started + 1
            self._wanted = max(self._wanted, target)
            if not self._inflight:
                self._start()
            while self._done < target:
                self._give_up_stale()
                left = deadline - self._clock.monotonic()
                if left <= 0:
                    raise Unavailable("could not confirm the latest committed state in time (no leader or quorum?); retry")
                self._cond.wait(min(left, self._stale_after_s / 4))
            for gen in range(target, self._done + 1):
                if gen in self._failed:
                    raise Unavailable("could not reach the leader to confirm the latest state; retry")

    def _give_up_stale(self) -> None:
        if self._inflight and self._clock.monotonic() - self._inflight_since > self._stale_after_s:
            self._finish(self._started, GAVE_UP)

    def _start(self) -> None:
        self._started += 1
        gen = self._started
        self._inflight = True
        self._inflight_since = self._clock.monotonic()

        def done(_result: Any, error: int) -> None:
            with self._cond:
                if gen > self._done:  # not given up meanwhile
                    self._finish(gen, error)

        try:
            self._propose(done)
        except Exception:
            done(None, -1)

    def _finish(self, gen: int, error: int) -> None:
        """Barrier ``gen`` answered (or was given up): wake its readers, start the next one if anyone waits."""
        self._done = gen
        self._inflight = False
        if error != 0:
            self._failed[gen] = error
        for old in [g for g in self._failed if g < gen - 1000]:
            del self._failed[old]
        if self._wanted > self._started:
            self._start()
        self._cond.notify_all()


#: the error a given-up barrier counts as (pysyncobj's FAIL_REASON values are >= 0)
GAVE_UP = -2
#: the error of a proposal this node did not send (``raftsched.raft.adapter`` names it NOT_SENT)
NOT_SENT = -1


class Replica:
    def __init__(self, machine: JobStateMachine, clock: Clock, hub: EventHub, request_timeout_s: float) -> None:
        self._machine = machine
        #: held while the state machine applies (the Raft adapter takes it) and while anyone reads
        self.lock = threading.RLock()
        self._clock = clock
        self._hub = hub
        self.request_timeout_s = request_timeout_s
        self._raft: Replicator | None = None
        self._barrier: ReadBarrier | None = None
        #: called on the tick thread after every apply with the run changes it made
        self.on_applied: list[Callable[[list[RunEvent]], None]] = []
        #: why this node's clock must not stamp a command now (None: it may); the clock guard sets it
        self.stamp_refusal: Callable[[], str | None] = lambda: None
        #: why this node cannot write its disk now (None: it can); and the words while a majority of the members
        #: cannot (None: they can). The composition root sets both (see the module docstring)
        self.disk_refusal: Callable[[], str | None] = lambda: None
        self.disks_exhausted: Callable[[], str | None] = lambda: None

    def attach(self, raft: Replicator) -> None:
        self._raft = raft
        self._barrier = ReadBarrier(lambda cb: raft.propose_async(c.encode(c.Barrier(self._barrier_time())), cb), self._clock)

    def _barrier_time(self) -> int:
        """A read barrier's time: this node's clock when it may be trusted, else none (the state's "now" is the
        greatest time any command carried: 0 changes nothing)."""
        return self._clock.now_ms() if self.stamp_refusal() is None else 0

    def _clock_refusal(self) -> Unavailable | None:
        why = self.stamp_refusal()
        if why is None:
            return None
        return Unavailable(f"this node does not trust its clock now ({why}); send the call to another node, or retry")

    def _disk_error(self, failed: Exception | None = None) -> Unavailable | Overloaded | None:
        """The error of a write this node does not propose (its disk refuses writes) or that did not commit
        (``failed``): ``Overloaded`` while a majority cannot write, else ``Unavailable`` (None: propose it)."""
        exhausted = self.disks_exhausted()
        if exhausted is not None:
            return Overloaded(exhausted)
        if failed is not None:
            return Unavailable(str(failed))
        why = self.disk_refusal()
        if why is None:
            return None
        return Unavailable(f"this node cannot write its disk now ({why}); send the call to another node, or retry")

    def _replicator(self) -> Replicator:
        if self._raft is None:
            raise Unavailable("this node is still starting; retry")
        return self._raft

    def is_leader(self) -> bool:
        """Raft's hint that this node leads (two nodes may believe it for a while: decide nothing on it alone)."""
        return self._raft is not None and self._raft.is_leader()

    def after_apply(self) -> None:
        """Called on the tick thread after every apply: publish run changes, wake waiters."""
        with self.lock:
            events, records = self._machine.drain_changes()
            index = self._machine.applied_index
        self._hub.publish(events, index, records)  # also without changes: the hub counts the entries it saw
        for hook in self.on_applied:
            hook(events)

    def restored(self) -> None:
        """Called after the state was replaced from a snapshot: the event hub's history of changes no
        longer joins up with the state, so watchers resume from the new applied index."""
        self._hub.reset(self._machine.applied_index)

    # ------------------------------------------------------------ writes

    def execute(self, cmd: c.Command, timeout: float | None = None) -> Any:
        """Propose ``cmd`` and return its ``Ok`` value (detached); raise ``RejectedError`` or ``Unavailable``."""
        return self._unwrap(self._propose([cmd], timeout)[0])

    def execute_each(self, items: list[Any], build: Callable[[Any], c.Command]) -> list[Any]:
        """Batch calls: ``build`` a command from each item (an item that is already an exception,
        or whose ``build`` raises ``ValidationError``, keeps that error), propose them together and
        answer per item, in order: its ``Ok`` value (detached), or its error."""
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
        answers = self._propose(cmds) if cmds else []
        for slot, answer in zip(slots, answers):
            try:
                out[slot] = self._unwrap(answer)
            except (RejectedError, Unavailable, Overloaded) as exc:
                out[slot] = exc
        return out

    def propose_async(self, cmd: c.Command, done: ProposalCallback) -> None:
        """Propose without waiting; ``done(result, fail_reason)`` runs on the Raft thread (keep it short)."""
        refused = self._too_new(cmd)
        if refused is not None:
            done(refused, 0)
            return
        if self._clock_refusal() is not None:
            done(None, NOT_SENT)
            return
        self._replicator().propose_async(c.encode(cmd), done)

    def _too_new(self, cmd: Any) -> Rejected | None:
        """The refusal of a command newer than the cluster's command format, before it is proposed: a node
        that does not understand it would have to stop on meeting it. (The cluster's format only grows, and
        this node's applied state is at most behind the leader's: never a command the cluster refuses.)"""
        if c.command_format(cmd) == 1:
            return None
        return self._machine.format_gate(cmd)  # one int read: no lock needed

    def _propose(self, cmds: list[c.Command], timeout: float | None = None) -> list[Result | Unavailable | Overloaded]:
        """Propose several commands together (they share Raft entries); a result or ``Unavailable`` each."""
        unstamped = self._clock_refusal()
        if unstamped is not None:
            return [unstamped for _ in cmds]
        unwritten = self._disk_error()
        if unwritten is not None:
            return [unwritten for _ in cmds]
        refused = [self._too_new(cmd) for cmd in cmds]
        send = [cmd for cmd, no in zip(cmds, refused) if no is None]
        # a grant's weight keeps one entry's fencing tokens in range (see raftsched.cluster.domain.leases)
        proposals = [(c.encode(cmd), cmd.max_runs if isinstance(cmd, c.AcquireLeases) else 0) for cmd in send]
        answers = iter(self._replicator().propose_many(proposals, timeout or self.request_timeout_s) if proposals else [])
        out: list[Result | Unavailable | Overloaded] = []
        for no in refused:
            if no is not None:
                out.append(no)
                continue
            answer = next(answers)
            if isinstance(answer, Exception):
                out.append(self._disk_error(answer) or Unavailable(str(answer)))
            elif answer is None:
                out.append(Unavailable("the command was applied but produced no result on this node; check the node log"))
            else:
                out.append(answer)
        return out

    def _unwrap(self, answer: Result | Unavailable | Overloaded) -> Any:
        if isinstance(answer, (Unavailable, Overloaded)):
            raise answer
        if isinstance(answer, Rejected):
            raise RejectedError(answer)
        assert isinstance(answer, Ok)
        return detach(answer.value)  # records of the command's unit of work: the machine never touches them again

    # ------------------------------------------------------------ reads

    def _wait_barrier(self) -> None:
        if self._barrier is None:
            raise Unavailable("this node is still starting; retry")
        if self.disk_refusal() is not None:
            return  # it could not apply the barrier: what it stored last is served (see the module docstring)
        self._barrier.wait(self.request_timeout_s)

    def read(self, fn: Callable[[JobStateMachine], T], barrier: bool = True) -> T:
        """``fn(machine)`` under the lock and in one read transaction, after a read barrier unless ``barrier``
        is False (then it sees this node's applied state, possibly behind the leader). Records in the
        answer are detached copies; ``fn`` must not keep references to the machine."""
        if barrier:
            self._wait_barrier()
        with self.lock, self._machine.reading():
            return detach(fn(self._machine))

    def read_records(self, fn: Callable[[RecordReader], T], barrier: bool = True) -> T:
        """``fn(records)`` in one read transaction, without the lock (see the module docstring); after a read
        barrier unless ``barrier`` is False."""
        if barrier:
            self._wait_barrier()
        with self._machine.reading():
            return detach(fn(self._machine.view))
