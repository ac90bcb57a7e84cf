"""pysyncobj's dynamic membership, leadership transfer and a hold on elections, for one replica.

What it relies on in pysyncobj 0.3.17 (read from its source; re-check on an upgrade):

* ``dynamicMembershipChange=True`` (``raftsched.raft.adapter.build_conf``): a change is
  a log entry (``addNodeToCluster`` / ``removeNodeFromCluster``, pickled
  ``['add'|'rem', address, node]``) that every replica applies to its
  configuration *as soon as it is in its log*, committed or not, and undoes
  if the log is truncated; quorums are counted on the new configuration from
  then on (single-server changes, the Raft dissertation's section 4.1). The
  callback fires with SUCCESS once the entry is committed and applied here.
  A leader refuses a change (REQUEST_DENIED) before its own no-op entry is
  applied, for an address already (not) in its configuration, and to remove
  itself. pysyncobj means to allow one change at a time but never sets the
  index it checks (``__changeClusterIDx``): the caller must wait for one
  change to commit before the next, and raftsched does (one change in flight
  in the replicated state, the next only after it finished).
* A removed node is dropped by the leader the moment the change is in the
  leader's log, and the others refuse its connections (it announces an
  address they no longer know), so it never hears of its removal through
  Raft: the node layer learns it from the replicated state before the change
  (``raftsched.cluster.fsm.membership``) and then from losing its leader.
* ``transferLeadership(node=None)`` (Raft's TimeoutNow): the leader asks its
  most caught-up connected follower to start an election at once; a follower
  that is not fully caught up is refused (REQUEST_DENIED). Under load the
  leader's log moves on between most ticks, so one try is often refused:
  ``transfer_leadership`` tries again on every tick for up to
  ``TRANSFER_TRIES_S``, and starts the transfer at the first tick a follower
  has the whole log. Best effort: the caller checks who leads afterwards and
  asks again.
* ``_SyncObj__raftElectionDeadline``: a follower starts an election when it
  passes, and pysyncobj moves it to ``now + [min, max] timeout`` on every
  AppendEntries from its leader. ``hold_elections`` pushes it to ``now +
  min timeout`` on every tick, so a node that is leaving (or a new member
  still catching up) never campaigns; it still votes. ``restart_election_timer``
  pushes it once (after a snapshot install stalled the tick thread). While held, a deadline
  found beyond the one we set means a leader was heard (``quiet_for``).
* ``otherNodes``, ``selfNode`` and ``getStatus()['match_idx_server_<address>']``
  (a leader's view of how far each follower's log matches).

Calls that touch pysyncobj's transport run on its tick thread (``on_tick``,
registered with ``addOnTickCallback``).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Callable

from pysyncobj import FAIL_REASON

log = logging.getLogger("raftsched.raft")

#: ``callback(ok, reason)`` of a membership change: ok once it is committed and applied on this node
ChangeCallback = Callable[[bool, str], None]
_REASONS = {v: k for k, v in vars(FAIL_REASON).items() if isinstance(v, int)}
#: how long a refused leadership transfer is tried again, once a tick (the caller asks again about once a second)
TRANSFER_TRIES_S = 0.9


class RaftMembership:
    def __init__(self, replica: Any, election_timeout_s: float) -> None:
        self._replica = replica
        self._timeout = election_timeout_s
        self._hold = False
        #: why elections are held (``hold_elections``): held while any reason stands
        self._hold_reasons: set[str] = set()
        self._set_deadline = 0.0
        self._heard = time.monotonic()
        self._calls: collections.deque[Callable[[], None]] = collections.deque()
        self._lock = threading.Lock()
        replica.addOnTickCallback(self.on_tick)

    def on_tick(self) -> None:
        """pysyncobj's tick thread, every tick: keep elections on hold, run queued calls."""
        if self._hold and not self._replica._isLeader():
            now = time.monotonic()
            if self._replica._SyncObj__raftElectionDeadline > self._set_deadline:
                self._heard = now  # AppendEntries from a leader moved it since the last tick
            self._set_deadline = now + self._timeout
            self._replica._SyncObj__raftElectionDeadline = self._set_deadline
        if not self._calls:
            return
        with self._lock:  # the calls queued until now; what they queue again runs on the next tick
            calls, self._calls = self._calls, collections.deque()
        for call in calls:
            try:
                call()
            except Exception:
                log.exception("membership call on the Raft thread failed")

    def members(self) -> list[str]:
        """The Raft addresses of the configuration this replica uses now (itself first)."""
        for _ in range(10):
            try:
                others = sorted(str(n.id) for n in self._replica.otherNodes)
                return [str(self._replica.selfNode.id), *others]
            except RuntimeError:  # the tick thread changed the set while it was copied
                time.sleep(0.001)
        raise RuntimeError("could not read the Raft configuration")

    def change(self, add: bool, address: str, callback: ChangeCallback) -> None:
        """Propose pysyncobj's change adding (or removing) ``address``; ``callback`` runs on the tick thread."""

        def done(_result: Any, error: int) -> None:
            callback(error == FAIL_REASON.SUCCESS, _REASONS.get(error, str(error)))

        if add:
            self._replica.addNodeToCluster(address, callback=done)
        else:
            self._replica.removeNodeFromCluster(address, callback=done)

    def transfer_leadership(self, to: str | None = None, tries_s: float = TRANSFER_TRIES_S) -> None:
        """Ask ``to`` (a member's Raft address; None: the most caught-up follower) to take over (only on the leader,
        and only a follower whose log is complete can: refused, it is asked again on every tick for up to
        ``tries_s``; best effort: check who leads later)."""
        until = time.monotonic() + tries_s
        refused = [0]

        def call() -> None:
            def done(_result: Any, error: int) -> None:
                if error == FAIL_REASON.SUCCESS:
                    if refused[0]:
                        log.info("leadership transfer started after %d refusals (no follower had the whole log)", refused[0])
                    return
                if error == FAIL_REASON.REQUEST_DENIED and time.monotonic() < until and self._replica._isLeader():
                    refused[0] += 1
                    with self._lock:
                        self._calls.append(call)  # the next tick: a follower may have caught up by then
                    return
                log.info("leadership transfer not started (%s); will ask again", _REASONS.get(error, error))

            self._replica.transferLeadership(to, done)

        with self._lock:
            self._calls.append(call)

    def hold_elections(self, hold: bool, reason: str = "membership") -> None:
        """While held for any ``reason``, this replica never starts an election (it still votes and follows)."""
        if hold:
            self._hold_reasons.add(reason)
        else:
            self._hold_reasons.discard(reason)
        held = bool(self._hold_reasons)
        if held and not self._hold:
            self._heard = time.monotonic()
        self._hold = held

    def restart_election_timer(self) -> None:
        """Tick thread: this follower waits a whole election timeout from now before it may campaign (after a
        long stall of its own, such as installing a snapshot, its leader is still there)."""
        deadline = time.monotonic() + self._timeout
        if self._replica._SyncObj__raftElectionDeadline < deadline:
            self._replica._SyncObj__raftElectionDeadline = deadline

    def quiet_for(self) -> float:
        """While elections are held: seconds since a leader was last heard (0 when not held or leading)."""
        if not self._hold or self._replica._isLeader():
            return 0.0
        return max(0.0, time.monotonic() - self._heard)

    def match_index(self, address: str) -> int:
        """How far ``address``'s log is known to match the leader's (0 if unknown or not leader)."""
        try:
            return int(self._replica.getStatus().get(f"match_idx_server_{address}", 0))
        except RuntimeError:
            return 0
