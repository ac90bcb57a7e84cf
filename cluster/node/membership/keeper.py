"""The membership keeper: one thread per node that carries membership changes through and keeps
the data dir's record of the members.

Every ``STEP_S`` it reads the replicated membership (``MembershipView``) and:

* **every node**: hands a changed set of (settled) members to ``persist``
  (the data dir's record, read at the next start); holds its own elections
  while it is being removed, or while it has joined and is still catching up
  (``hold_until_index``: a new member must not campaign, and raise the term,
  before it has the log);
* **a node being removed**: if it leads, hands leadership over (pysyncobj's
  TimeoutNow transfer, asked again every ``TRANSFER_EVERY_S`` until another
  node leads) and never campaigns again; once it is out — no leader heard for
  ``removed_after_s`` (``RaftMembership.quiet_for``: the leader drops a
  removed node at once) while the removal is committed — it calls ``on_removed``
  (the node stops serving and exits 0). The removal is certain from the
  committed ``RemoveMember`` on: a leader always finishes it;
* **the leader** (after its start-up barrier, ``leading``):
  1. switches the cluster's command format up (``SetClusterFormat``) once
     every member of the Raft configuration has reported, with its
     ``NodeInfo``, that it understands the newer one;
  2. seeds the membership (``SeedMembers``: the config's ``[[nodes]]``) while
     none is recorded;
  3. finishes the change in flight: makes pysyncobj's change (for a removal,
     once the node leaving has the log up to a barrier committed after the
     ``RemoveMember``, so it learns it is leaving, or after
     ``LEAVER_CATCH_UP_S``), then commits ``FinishMemberChange``. One change
     at a time: pysyncobj's next change is only made after the previous one
     finished.

A step that fails (no quorum, a lost leadership) is simply tried again. One
whose record of the members the data dir's disk refuses (full, failing) is
tried again too, said once every ``DISK_SAID_EVERY_S`` rather than at every
step: the node's health already names the disk.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.commands import wire
from raftsched.cluster.domain.errors import RaftschedError
from raftsched.cluster.domain.model import Member, MemberChange
from raftsched.cluster.node.clock import Clock
from raftsched.cluster.node.membership.service import MembershipView, read_view
from raftsched.cluster.node.ports import RaftMembership, RaftStatus
from raftsched.cluster.node.replica import Replica

log = logging.getLogger("raftsched.membership")

STEP_S = 0.2
#: how often a data dir that refuses the record of the members is said so in the log (seconds)
DISK_SAID_EVERY_S = 30.0
TRANSFER_EVERY_S = 1.0
#: pysyncobj's change not answered after this long is made again (its answer may have been lost)
RAFT_CHANGE_TIMEOUT_S = 10.0
#: the leader waits at most this long for a leaving node to get the log that tells it it leaves
LEAVER_CATCH_UP_S = 5.0


class MembershipKeeper:
    def __init__(
        self,
        replica: Replica,
        raft: RaftMembership,
        status: RaftStatus,
        clock: Clock,
        node_id: str,
        seed: tuple[Member, ...],
        leading: Callable[[], bool],
        persist: Callable[[tuple[Member, ...]], None],
        on_removed: Callable[[str], None],
        removed_after_s: float = 3.5,
        hold_until_index: int = 0,
    ) -> None:
        self._replica, self._raft, self._status, self._clock = replica, raft, status, clock
        self._node_id, self._seed, self._leading = node_id, seed, leading
        self._persist, self._on_removed = persist, on_removed
        self._removed_after_s = removed_after_s
        self._hold_until = hold_until_index
        self._persisted: tuple[Member, ...] | None = None
        self._transfer_asked = -TRANSFER_EVERY_S
        #: (action, address, since) of pysyncobj's change in flight (its callback clears it)
        self._raft_change: tuple[str, str, float] | None = None
        self._leaver: tuple[int, int, float] | None = None  # (change index, barrier index, since) of a removal
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="membership", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        said = -DISK_SAID_EVERY_S
        while not self._stop.wait(STEP_S):
            try:
                self.step()
            except RaftschedError as exc:
                log.info("membership: %s; trying again", exc)
            except OSError as exc:  # the record of the members in the data dir: its disk refuses writes
                if self._clock.monotonic() - said >= DISK_SAID_EVERY_S:
                    said = self._clock.monotonic()
                    log.warning("membership: cannot record the members in the data dir (%s); trying again", exc)
            except Exception:
                log.exception("membership step failed; trying again")

    def step(self) -> None:
        view = self._replica.read(read_view, barrier=False)
        settled = view.settled()
        if settled and settled != self._persisted:
            self._persist(settled)
            self._persisted = settled
        removing = view.is_removing(self._node_id)
        self._raft.hold_elections(removing or self._status.applied_index < self._hold_until)
        if removing:
            self._leave(view)
        elif self._leading() and self._status.is_leader():
            self._lead(view)

    # ------------------------------------------------------------ leaving

    def _leave(self, view: MembershipView) -> None:
        now = self._clock.monotonic()
        if self._status.is_leader():
            if now - self._transfer_asked >= TRANSFER_EVERY_S:
                self._transfer_asked = now
                log.info("this node is being removed: handing leadership over")
                self._raft.transfer_leadership()
            return
        if self._raft.quiet_for() >= self._removed_after_s:
            member = view.member(self._node_id)
            where = f" (raft {member.raft})" if member else ""
            self._on_removed(f"node {self._node_id}{where} was removed from the cluster by RemoveNode")
            self._stop.set()

    # ------------------------------------------------------------ leading

    def _lead(self, view: MembershipView) -> None:
        members = self._raft.members()
        if self._switch_format(view, members):
            return
        if view.cluster_format < c.format_of(c.SeedMembers):
            return
        if not view.roster:
            if self._seed:
                self._replica.execute(c.SeedMembers(self._clock.now_ms(), self._seed))
                log.info("membership recorded: %s", ", ".join(m.node_id for m in self._seed))
            return
        if view.change is not None:
            self._finish(view.change, members)

    def _switch_format(self, view: MembershipView, members: list[str]) -> bool:
        target = next_cluster_format(view, members)
        if target is None:
            return False
        log.info("every member understands command format %d: switching the cluster to it", target)
        self._replica.execute(c.SetClusterFormat(self._clock.now_ms(), target))
        return True

    def _finish(self, change: MemberChange, members: list[str]) -> None:
        address = change.member.raft
        if self._raft_change is not None and self._clock.monotonic() - self._raft_change[2] < RAFT_CHANGE_TIMEOUT_S:
            return  # pysyncobj's change is on its way: its callback clears this
        wanted_in = change.action == "add"
        if (address in members) == wanted_in:
            self._replica.execute(c.FinishMemberChange(self._clock.now_ms(), change.member.node_id, change.action))
            self._leaver = None
            log.info("membership change finished: %s", change.describe())
            return
        if not wanted_in and not self._leaver_caught_up(change):
            return
        self._raft_change = (change.action, address, self._clock.monotonic())

        def done(ok: bool, reason: str) -> None:
            self._raft_change = None
            if not ok:
                log.info("Raft's membership change for %s not made (%s); trying again", change.describe(), reason)

        log.info("making Raft's membership change: %s", change.describe())
        self._raft.change(wanted_in, address, done)

    def _leaver_caught_up(self, change: MemberChange) -> bool:
        """Whether the node leaving has the log up to a barrier committed after its removal began (or it
        is unreachable, or ``LEAVER_CATCH_UP_S`` passed): then it learns, from its own state, that it leaves."""
        now = self._clock.monotonic()
        if self._leaver is None or self._leaver[0] != change.begun_at:
            barrier = self._replica.execute(c.Barrier(self._clock.now_ms()))
            self._leaver = (change.begun_at, int(barrier), now)
        _, barrier_index, since = self._leaver
        address = change.member.raft
        if not self._status.is_connected(address) or now - since >= LEAVER_CATCH_UP_S:
            return True
        return self._raft.match_index(address) >= barrier_index


def next_cluster_format(view: MembershipView, raft_members: list[str]) -> int | None:
    """The command format the cluster may switch to now, or None: the newest every member of the Raft
    configuration reported (by its Raft address) that it understands, if newer than the cluster's."""
    by_raft: dict[str, int] = {}
    for node, raft in view.rafts.items():
        fmt = view.versions.get(node, ("", 0))[1]
        by_raft[raft] = max(by_raft.get(raft, 0), fmt)
    if not raft_members or any(a not in by_raft for a in raft_members):
        return None
    target = min(min(by_raft[a] for a in raft_members), wire.FORMAT_VERSION)
    return target if target > view.cluster_format else None
