"""The cluster's membership and command format, as the replicated state records them.

pysyncobj keeps its own configuration (Raft addresses) in its log and
snapshots; this is what it does not know and every node needs: each member's
id and the addresses it advertises (gRPC, HTTP), the change in flight, and
the command format the cluster uses. Everything here changes only through
committed commands (format 2, ``raftsched.cluster.domain.member_commands``):

* ``SeedMembers``: the first membership (the config's ``[[nodes]]``), proposed
  by a leader while none is recorded; later ones change nothing.
* ``AddMember`` / ``RemoveMember`` begin a change: one at a time (another
  while one is in flight is ``FailedPrecondition`` naming it; the same one
  again answers as the first, so a retried call is harmless). An added member
  is listed at once; a removed one until the change ends. From a
  ``RemoveMember`` on, the removal is certain: the removed node stops serving
  as soon as it is out.
* ``FinishMemberChange`` (the leader, once pysyncobj's own change is in its
  log) ends it: a removed member moves to ``removed_members``.
* ``SetClusterFormat`` raises ``cluster_format``; a command of a newer format
  than it is refused (``format_gate``), identically on every node.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from raftsched.cluster.domain import command_registry
from raftsched.cluster.domain import member_commands as mc
from raftsched.cluster.domain.command_registry import command_format, handles
from raftsched.cluster.domain.errors import NewerState
from raftsched.cluster.domain.model import MemberChange
from raftsched.cluster.domain.results import AlreadyExists, FailedPrecondition, NotFound, Ok, Rejected, Result
from raftsched.cluster.domain.state_base import StateBase


class MembershipRules(StateBase):
    """Mixed into ``JobStateMachine``."""

    def format_gate(self, cmd: object) -> Rejected | None:
        """A refusal for a command newer than the cluster's format (``SetClusterFormat`` itself passes)."""
        needed = command_format(cmd)
        if needed <= self.cluster_format or isinstance(cmd, mc.SetClusterFormat):
            return None
        return FailedPrecondition(
            f"{type(cmd).__name__} needs command format {needed}, but the cluster still uses format "
            f"{self.cluster_format}: every member must run a raftsched that understands format {needed} first "
            "(the leader switches once all have reported it; raftsched cluster status shows each member's version)"
        )

    def _members_text(self) -> str:
        return ", ".join(sorted(self.roster)) or "(none recorded yet)"

    def change_in_flight(self, action: str, node_id: str) -> Rejected | None:
        """The refusal a change of ``node_id`` would get now for another change in flight, or None (read by
        a proposer first: with no quorum the state machine could not answer it)."""
        member = self.roster.get(node_id)
        change = self.member_change
        if change is not None and change.action == action and change.member.node_id == node_id:
            return None
        busy = self._change_in_flight(None if member is None else MemberChange(action, member, 0))
        return busy if isinstance(busy, Rejected) else None

    def _change_in_flight(self, wanted: MemberChange | None) -> Result | None:
        """None when no change is in flight; Ok when ``wanted`` is that change (a retry); else the refusal."""
        change = self.member_change
        if change is None:
            return None
        if wanted is not None and change.action == wanted.action and change.member == wanted.member:
            return Ok(change)
        return FailedPrecondition(
            f"a membership change is in flight ({change.describe()}): one change at a time; wait until it "
            "finishes (raftsched cluster status shows it), then retry"
        )

    @handles(mc.SeedMembers)
    def _seed_members(self, cmd: mc.SeedMembers, index: int) -> Result:
        if self.roster:
            return Ok(False)
        for attr in ("node_id", "raft", "grpc"):
            values = [getattr(m, attr) for m in cmd.members]
            if len(set(values)) != len(values) or not all(values):
                return FailedPrecondition(f"entry {index}: the seed membership repeats or lacks a member's {attr}")
        self.roster = {m.node_id: m for m in cmd.members}
        return Ok(True)

    @handles(mc.AddMember)
    def _add_member(self, cmd: mc.AddMember, index: int) -> Result:
        new = cmd.member
        if not self.roster:
            return FailedPrecondition("the cluster's membership is not recorded yet (its leader does it at start); retry shortly")
        busy = self._change_in_flight(MemberChange("add", new, 0))
        if busy is not None:
            return busy
        known = self.roster.get(new.node_id)
        if known == new:
            return Ok(None)  # already a member with these addresses: a retried AddNode
        if known is not None:
            return AlreadyExists(
                f"node {new.node_id} is already a member (raft {known.raft}, grpc {known.grpc}); to move it, "
                "remove it first, or add the new machine under another id"
            )
        for m in self.roster.values():
            for attr in ("raft", "grpc", "http"):
                if getattr(new, attr) and getattr(new, attr) == getattr(m, attr):
                    return AlreadyExists(
                        f"{attr} address {getattr(new, attr)} is already member {m.node_id}'s: give {new.node_id} its own"
                    )
        self.member_change = MemberChange("add", new, index)
        self.roster[new.node_id] = new
        return Ok(self.member_change)

    @handles(mc.RemoveMember)
    def _remove_member(self, cmd: mc.RemoveMember, index: int) -> Result:
        if not self.roster:
            return FailedPrecondition("the cluster's membership is not recorded yet (its leader does it at start); retry shortly")
        member = self.roster.get(cmd.node_id)
        if member is None:
            if cmd.node_id in self.removed_members and self.member_change is None:
                return Ok(None)  # already removed: a retried RemoveNode
            return NotFound(f"node {cmd.node_id} is not a member (members: {self._members_text()})")
        busy = self._change_in_flight(MemberChange("remove", member, 0))
        if busy is not None:
            return busy
        if len(self.roster) == 1:
            return FailedPrecondition(f"node {cmd.node_id} is the only member: a cluster cannot remove its last member")
        self.member_change = MemberChange("remove", member, index)
        return Ok(self.member_change)

    @handles(mc.FinishMemberChange)
    def _finish_member_change(self, cmd: mc.FinishMemberChange, index: int) -> Result:
        change = self.member_change
        if change is None or change.member.node_id != cmd.node_id or change.action != cmd.action:
            return Ok(False)  # a duplicate or late finish: nothing in flight matches it
        member = change.member
        if change.action == "remove":
            self.roster.pop(member.node_id, None)
            self.members.pop(member.node_id, None)
            self.member_rafts.pop(member.node_id, None)  # a later member at its address reports for itself
            self.removed_members[member.node_id] = member
        else:
            self.removed_members.pop(member.node_id, None)
        self.member_change = None
        return Ok(True)

    @handles(mc.SetClusterFormat)
    def _set_cluster_format(self, cmd: mc.SetClusterFormat, index: int) -> Result:
        if cmd.format > self.cluster_format:
            self.cluster_format = cmd.format
        return Ok(self.cluster_format)

    def forget_membership(self) -> None:
        """A restore into a new cluster: the old cluster's members, their versions and a change in flight go (the
        new cluster records its own); its command format stays. Not a command: a tool does it before any node
        of the new cluster starts (``raftsched.cluster.app.backup_restore``)."""
        self.roster, self.member_change, self.removed_members = {}, None, {}
        self.members, self.member_rafts = {}, {}

    # ------------------------------------------------------------ queries

    def is_removing(self, node_id: str) -> bool:
        """Whether ``node_id`` is being removed, or was (its node must stop serving once it is out)."""
        change = self.member_change
        return (change is not None and change.action == "remove" and change.member.node_id == node_id) or (
            node_id in self.removed_members and node_id not in self.roster
        )

    def check_format_number(self, cluster_format: int, what: str = "state") -> None:
        """Raise ValueError if a state (a snapshot) uses a command format newer than this code understands."""
        if cluster_format > command_registry.FORMAT_VERSION:
            raise NewerState(
                f"the {what}'s cluster uses command format {cluster_format}, but this node understands command "
                f"formats up to {command_registry.FORMAT_VERSION}: upgrade this node"
            )

    def _check_format(self) -> None:
        self.check_format_number(self.cluster_format)
