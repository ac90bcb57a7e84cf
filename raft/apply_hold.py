"""Committed entries applied in order, and the one held back while the state machine's store cannot take it.

pysyncobj 0.3.17's ``SyncObj.__applyLogEntries`` (tick thread, every tick)
applies every committed entry it has not applied yet: it takes the entry's
waiting callbacks, applies it, calls them back, and counts it applied. An
apply that raises leaves it in the middle: the callbacks it took are lost
(their callers never hear back), the rest of the tick (sending, proposals,
the network poll) is skipped, and the next tick tries the same entry again
at once — a spin that also stops this node's Raft.

``apply_committed`` replaces it (``raftsched.raft.adapter._Replica`` names it
``_SyncObj__applyLogEntries``, the mangled name pysyncobj calls) and adds one
rule: an apply that raises ``EntryHeld`` — the store refused the entry (a
full or failing disk: ``raftsched.raft.adapter``) — ends the loop *before* the entry
counts as applied and before its callbacks are taken, and ``ApplyHold``
keeps it until its next try is due (``RETRY_EVERY_S`` later). Nothing after
it is applied meanwhile, nothing is skipped, and the tick goes on as usual
(messages, probes, the network). A held entry is tried again as itself
(same index, same callbacks), however long it waits. A version entry this
code does not support (pysyncobj's ``setCodeVersion``, never used by
raftsched) also stops the loop there, where pysyncobj would count the next
entry in its place.

A second rule bounds a tick's work: entries are read ``APPLY_CHUNK`` at a
time and the loop ends once it has applied for ``APPLY_BUDGET_S`` (after the
entry in hand: an entry is never split); the rest waits for the next tick,
a few milliseconds later. pysyncobj would apply every committed entry in one
tick, and a tick that applies for seconds (a burst of completions: 12,800 in
one go cost a leader about two seconds) neither sends heartbeats nor reads
its peers' answers meanwhile: its followers call an election, and the
leader, finding no answer newer than ``leader_fallback_timeout`` at the start
of its next tick, steps down. Bounded, the tick goes on to its sending and
its network poll in between.

Who calls: pysyncobj, on the tick thread; ``ApplyHold`` is touched only there.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from pysyncobj import FAIL_REASON
from pysyncobj.syncobj import SyncObjExceptionWrongVer

from raftsched.raft.disk_trouble import RETRY_EVERY_S
from raftsched.raft.errors import RaftError

log = logging.getLogger("raftsched.raft")

#: the longest one tick applies committed entries before it sends, polls and comes back for the rest (a fraction of
#: the election timeout: ``raftsched.raft.settings``' raft_min_timeout)
APPLY_BUDGET_S = 0.1
#: committed entries read from the log at a time (a node catching up reads the next ones only when it gets to them)
APPLY_CHUNK = 256


class EntryHeld(RaftError):
    """The entry cannot be stored now; it is held (``ApplyHold``) and applied later. Raised through pysyncobj."""


@dataclass
class Held:
    index: int
    #: what the entry's apply returned, when the store kept its writes and only their commit waits (else None:
    #: the machine was rolled back and the entry is applied again)
    result: Any
    kept: bool
    retry_at: float


class ApplyHold:
    """The entry held back, if any, and when to try it again."""

    def __init__(
        self,
        monotonic: Callable[[], float] = time.monotonic,
        retry_every: float = RETRY_EVERY_S,
        budget_s: float = APPLY_BUDGET_S,
    ) -> None:
        self._monotonic = monotonic
        self._retry_every = retry_every
        #: how long one tick may apply (``APPLY_BUDGET_S``)
        self.budget_s = budget_s
        self.held: Held | None = None

    def now(self) -> float:
        return self._monotonic()

    def hold(self, index: int, result: Any, kept: bool) -> None:
        self.held = Held(index, result if kept else None, kept, self._monotonic() + self._retry_every)

    def due(self) -> bool:
        """Whether entries may be applied now: none is held, or the held one's next try is due."""
        held = self.held
        return held is None or self._monotonic() >= held.retry_at

    def kept(self, index: int) -> Held | None:
        """The held entry ``index`` if its writes are kept (only their commit is tried again)."""
        held = self.held
        return held if held is not None and held.index == index and held.kept else None

    def release(self) -> None:
        self.held = None


def apply_committed(replica: Any, hold: ApplyHold) -> bool:
    """pysyncobj's ``__applyLogEntries`` for ``replica`` (see the module docstring). Whether AppendEntries should be
    sent at once (pysyncobj's answer: only without ``appendEntriesUseBatch``)."""
    commit_index = replica._SyncObj__raftCommitIndex
    if commit_index <= replica._SyncObj__raftLastApplied or not hold.due():
        return False
    waiting = replica._SyncObj__commandsWaitingCommit
    until = hold.now() + hold.budget_s
    while replica._SyncObj__raftLastApplied < commit_index:
        applied = replica._SyncObj__raftLastApplied
        entries = replica._SyncObj__getEntries(applied + 1, min(APPLY_CHUNK, commit_index - applied))
        if not entries:
            break
        for entry in entries:
            if not _apply_entry(replica, waiting, entry):
                return not replica._SyncObj__conf.appendEntriesUseBatch
            if hold.now() >= until:
                return not replica._SyncObj__conf.appendEntriesUseBatch  # the rest at the next tick
    return not replica._SyncObj__conf.appendEntriesUseBatch


def _apply_entry(replica: Any, waiting: dict[int, list[Any]], entry: Any) -> bool:
    """Apply one committed entry and answer its proposers; False if it is held back or cannot be applied here (the
    loop stops before it)."""
    try:
        result = replica._SyncObj__doApplyCommand(entry[0])
    except EntryHeld:
        return False
    except SyncObjExceptionWrongVer as exc:
        log.error(
            "entry %d switches to code version %d, which this node does not have; nothing after it is applied",
            entry[1],
            exc.ver,
        )
        return False
    for term, callback in waiting.pop(entry[1], []):
        if term == entry[2]:
            callback(result, FAIL_REASON.SUCCESS)
        else:
            callback(None, FAIL_REASON.DISCARDED)
    replica._SyncObj__raftLastApplied += 1
    return True
