"""Membership as the node serves it: what GetClusterStatus lists, and AddNode / RemoveNode.

``MembershipView`` is one consistent read of the replicated membership
(``raftsched.cluster.fsm.membership``): the members with their addresses,
the change in flight, the command format, and what each node reported of
its version. ``MembershipService`` begins a change with a committed command
(one at a time: another while one is in flight is FAILED_PRECONDITION) and
waits until the leader has finished it (``keeper``
does pysyncobj's part on whichever node leads), so AddNode answers once the
member is committed. A retried call is the same change, never a second one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Callable

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import RejectedError, Unavailable
from raftsched.cluster.domain.model import Member, MemberChange
from raftsched.cluster.domain.results import FailedPrecondition
from raftsched.cluster.domain.validation import validate_member, validate_node_id
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.clock import Clock
from raftsched.cluster.node.replica import Replica

#: how often a waiting AddNode / RemoveNode looks at the state
POLL_S = 0.1


@dataclass(frozen=True)
class MembershipView:
    #: the members recorded in the replicated state (empty until the first leader seeds them)
    roster: tuple[Member, ...]
    change: MemberChange | None
    cluster_format: int
    #: node id -> (raftsched version, command format) as each node last reported
    versions: dict[str, tuple[str, int]]
    #: node id -> the Raft address it reported from
    rafts: dict[str, str]
    removed: tuple[Member, ...]

    def is_removing(self, node_id: str) -> bool:
        change = self.change
        removing = change is not None and change.action == "remove" and change.member.node_id == node_id
        return removing or (any(m.node_id == node_id for m in self.removed) and not self.member(node_id))

    def member(self, node_id: str) -> Member | None:
        return next((m for m in self.roster if m.node_id == node_id), None)

    def settled(self) -> tuple[Member, ...]:
        """The members whose addition has finished (a member being added is left out until it has)."""
        change = self.change
        if change is None or change.action != "add":
            return self.roster
        return tuple(m for m in self.roster if m.node_id != change.member.node_id)


def read_view(m: JobStateMachine) -> MembershipView:
    return MembershipView(
        tuple(sorted(m.roster.values())),
        m.member_change,
        m.cluster_format,
        dict(m.members),
        dict(m.member_rafts),
        tuple(sorted(m.removed_members.values())),
    )


class MembershipService:
    """AddNode and RemoveNode: begin the change with a committed command, then wait until it is finished."""

    def __init__(self, replica: Replica, clock: Clock, self_id: str, first_members: tuple[str, ...] = ()) -> None:
        self._replica = replica
        self._clock = clock
        self._self_id = self_id
        #: the members this node started with (who should have reported a version before any is recorded)
        self._first_members = first_members
        #: set when this node found itself removed (it answers its own RemoveNode, then stops)
        self.removed = threading.Event()

    def view(self) -> MembershipView:
        """This node's applied view (no barrier: answered even without a leader)."""
        return self._replica.read(read_view, barrier=False)

    def _recorded(self, wait_s: float) -> None:
        """A cluster just started records its first membership within a moment: wait for it, not refuse;
        refuse, naming them, while members have not reported a version that understands membership."""
        deadline = self._clock.monotonic() + min(wait_s, 10.0)
        while not self.view().roster and self._clock.monotonic() < deadline:
            self.removed.wait(POLL_S)
        view = self.view()
        needed = c.format_of(c.AddMember)
        if view.cluster_format >= needed:
            return
        members = [m.node_id for m in view.roster] or list(self._first_members)
        behind = [n for n in members if view.versions.get(n, ("", 0))[1] < needed]
        raise RejectedError(
            FailedPrecondition(
                f"membership changes need command format {needed}, and the cluster still uses format {view.cluster_format}: "
                f"{', '.join(behind) or 'some members'} have not reported running a raftsched that understands it. Start "
                "them with this version (a member that is gone for good: start a new machine in its place with its id, "
                "addresses and an empty data dir, once, so it reports), then retry"
            )
        )

    def _not_busy(self, action: str, node_id: str) -> None:
        """FAILED_PRECONDITION at once while another change is in flight (as the state machine would answer,
        and also when the cluster cannot commit anything, e.g. an addition still waiting for its member)."""
        refused = self._replica.read(lambda m: m.change_in_flight(action, node_id), barrier=False)
        if refused is not None:
            raise RejectedError(refused)

    def add(self, member: Member, wait_s: float) -> MembershipView:
        validate_member(member)
        self._recorded(wait_s)
        self._not_busy("add", member.node_id)
        self._replica.execute(c.AddMember(self._clock.now_ms(), member))
        return self._wait(
            lambda v: v.member(member.node_id) == member and not _in_flight(v, member.node_id), wait_s, "adding", member
        )

    def remove(self, node_id: str, wait_s: float) -> MembershipView:
        validate_node_id(node_id)
        self._recorded(wait_s)
        self._not_busy("remove", node_id)
        change = self._replica.execute(c.RemoveMember(self._clock.now_ms(), node_id))
        member = change.member if isinstance(change, MemberChange) else Member(node_id, "", "")
        if node_id == self._self_id:
            # this node never hears the change finish (the leader drops it first): it answers once it is out,
            # with the membership as it now is without it
            view = self._wait(lambda v: self.removed.is_set() or v.member(node_id) is None, wait_s, "removing", member)
            return replace(view, roster=tuple(m for m in view.roster if m.node_id != node_id), change=None)
        return self._wait(lambda v: v.member(node_id) is None, wait_s, "removing", member)

    def _wait(self, done: Callable[[MembershipView], bool], wait_s: float, verb: str, member: Member) -> MembershipView:
        deadline = self._clock.monotonic() + wait_s
        while True:
            view = self.view()
            if done(view):
                return view
            if self._clock.monotonic() >= deadline:
                raise Unavailable(
                    f"{verb} {member.node_id} is committed and still in progress (the leader finishes it; adding a "
                    "member to a cluster that needs it for a quorum waits until it runs: start it with --join). "
                    "raftsched cluster status shows the change until it is done; the same call again waits for it"
                )
            self.removed.wait(POLL_S)


def _in_flight(view: MembershipView, node_id: str) -> bool:
    return view.change is not None and view.change.member.node_id == node_id
