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

    def __init__(self, monotonic: Callable[[], float] = time.monotonic, retry_every: float = RETRY_EVERY_S) -> None:
        self._monotonic = monotonic
        self._retry_every = retry_every
        self.held: Held | None = None

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
    applied = replica._SyncObj__raftLastApplied
    if commit_index <= applied or not hold.due():
        return False
    waiting = replica._SyncObj__commandsWaitingCommit
    for entry in replica._SyncObj__getEntries(applied + 1, commit_index - applied):
        try:
            result = replica._SyncObj__doApplyCommand(entry[0])
        except EntryHeld:
            break
        except SyncObjExceptionWrongVer as exc:
            log.error(
                "entry %d switches to code version %d, which this node does not have; nothing after it is applied",
                entry[1],
                exc.ver,
            )
            break
        for term, callback in waiting.pop(entry[1], []):
            if term == entry[2]:
                callback(result, FAIL_REASON.SUCCESS)
            else:
                callback(None, FAIL_REASON.DISCARDED)
        replica._SyncObj__raftLastApplied += 1
    return not replica._SyncObj__conf.appendEntriesUseBatch
