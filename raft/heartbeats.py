"""The leader's AppendEntries: every append period while anything is in flight, seldom while the log is quiet.

pysyncobj's leader sends AppendEntries to every follower each ``appendEntriesPeriod`` (10 ms here: a write's
commit waits for up to one period, see ``RaftTuning``), whether or not it has anything to say. In an idle
cluster those heartbeats and their answers were about a third of each node's CPU (an idle three-node
cluster took ~10 % of a core per node, ~13 % on the leader).

``QuietHeartbeats`` (a mixin of the replica, before ``SyncObj``) keeps the period whenever something is in
flight, and sends every ``idle_period`` only while the log is quiet. Right after a send it looks: if the log
is committed to its last entry, every connected follower acknowledged that entry (so the send it just made
told each of them the final commit index), and no snapshot is being sent, the next send is ``idle_period``
away. Any tick that appends an entry (a proposal here, one a follower forwarded, a membership change) brings
the next send back to one period after the last. A follower that is behind, or has not answered yet, keeps
the period; one that reconnects answers the next heartbeat and is caught up from there as before.

Every send carries what was proposed up to it. pysyncobj's tick sends before it appends the proposals waiting in
its queue, so one queued while the tick thread was busy (a gRPC thread proposing while the tick applied the
entry that answered its last call) was appended just after the send and left one period later: under a steady
load most entries waited a whole period (~10 ms at the median) before they left. The send appends them first.
And the period is for batching what comes while something is in flight: a proposal appended when nothing was
(every entry committed and acknowledged: ``quiet``), or a whole period after the last send, goes out at once.
One client's calls one after the other had each waited for the period (~12 ms a CreateJob on an idle
cluster); now each takes a round trip. Under load something is nearly always in flight and nothing changes.

Followers learn of the leader as before: ``idle_period`` (100 ms) is a small part of the election timeout
(0.8 s at least), as etcd's 100 ms heartbeats are of its 1 s. Nothing else in raftsched waits for a
heartbeat: a read barrier is an entry, firing is a committed command, peers probe one another twice a second
on their own (``raftsched.raft.peer_probe``), and a leader steps down without a majority's answers within
``leaderFallbackTimeout`` (2 s).
"""

from __future__ import annotations

from typing import Any

from pysyncobj import SyncObj
from pysyncobj.monotonic import monotonic
from pysyncobj.syncobj import _RAFT_STATE

#: how often a quiet leader sends AppendEntries (seconds)
IDLE_PERIOD_S = 0.1


class QuietHeartbeats:
    """Mixin for ``SyncObj`` (see the module docstring). ``_idle_period``: seconds between heartbeats while quiet."""

    _idle_period: float = IDLE_PERIOD_S
    _sent_at: float = 0.0
    #: set while a send appends what is queued (pysyncobj's append sends by itself when it does not batch)
    _appending: bool = False

    def _SyncObj__sendAppendEntries(self) -> None:  # pysyncobj's private name: every send of AppendEntries
        replica: Any = self
        if not self._appending and replica._SyncObj__raftState == _RAFT_STATE.LEADER:
            self._appending = True
            try:  # what is queued goes with this send, not one period after it (see the module docstring)
                SyncObj._checkCommandsToApply(replica)
            finally:
                self._appending = False
        self._sent_at = monotonic()
        SyncObj._SyncObj__sendAppendEntries(replica)
        if self._idle_period > replica._SyncObj__conf.appendEntriesPeriod and quiet(replica):
            replica._SyncObj__newAppendEntriesTime = self._sent_at + self._idle_period

    def _checkCommandsToApply(self) -> None:
        """pysyncobj's: append (leader) or forward the proposals waiting. A leader that appended sends at once when
        nothing was in flight (``quiet`` before the append) or a period has passed since its last send; else one
        period after its last send, with whatever else is proposed by then."""
        replica: Any = self
        leader = replica._SyncObj__raftState == _RAFT_STATE.LEADER and not self._appending
        was_quiet = leader and quiet(replica)
        before = replica._SyncObj__getCurrentLogIndex()
        SyncObj._checkCommandsToApply(replica)
        if replica._SyncObj__getCurrentLogIndex() != before:
            soonest = self._sent_at + replica._SyncObj__conf.appendEntriesPeriod
            if leader and (was_quiet or monotonic() >= soonest):
                self._SyncObj__sendAppendEntries()
                return
            if replica._SyncObj__newAppendEntriesTime > soonest:
                replica._SyncObj__newAppendEntriesTime = soonest


def quiet(replica: Any) -> bool:
    """Whether a leader has nothing in flight: its log committed to the last entry, every connected follower
    holding it, and no snapshot being sent."""
    last = replica._SyncObj__getCurrentLogIndex()
    if replica._SyncObj__raftCommitIndex != last:
        return False
    if replica._SyncObj__serializer._Serializer__transmissions:
        return False
    matched = replica._SyncObj__raftMatchIndex
    connected = replica._SyncObj__connectedNodes
    return all(matched.get(node, 0) >= last for node in replica._SyncObj__otherNodes if node in connected)
