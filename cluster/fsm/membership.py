"""The cluster's membership and command format, as the replicated state records them.

pysyncobj keeps its own configuration (Raft addresses) in its log and
snapshots; this is what it does not know and every node needs: each member's
id and the addresses it advertises (gRPC, HTTP), the version and command
format each node runs (``NodeInfo``), the change in flight, and the command
format the cluster uses. Everything here changes only through committed
commands (format 2: ``raftsched.cluster.domain.commands``), and lives in the
machine's small state (``memory``):

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
"""

from __future__ import annotations

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import NewerState
from raftsched.cluster.domain.model import MemberChange
from raftsched.cluster.domain.results import AlreadyExists, FailedPrecondition, NotFound, Ok, Rejected, Result
from raftsched.cluster.fsm.memory import Memory
from raftsched.cluster.fsm.tx import Tx

# ------------------------------------------------------------ rules read before a command


def format_gate(mem: Memory, cmd: object) -> Rejected | None:
    """A refusal for a command newer than the cluster's format (``SetClusterFormat`` itself passes)."""
    needed = c.command_format(cmd)
    if needed <= mem.cluster_format or isinstance(cmd, c.SetClusterFormat):
        return None
    return FailedPrecondition(
        f"{type(cmd).__name__} needs command format {needed}, but the cluster still uses format "
        f"{mem.cluster_format}: every member must run a raftsched that understands format {needed} first "
        "(the leader switches once all have reported it; raftsched cluster status shows each member's version)"
    )


def change_in_flight(mem: Memory, action: str, node_id: str) -> Rejected | None:
    """The refusal a change of ``node_id`` would get now for another change in flight, or None (read by a proposer
    first: with no quorum the state machine could not answer it)."""
    member = mem.roster.get(node_id)
    change = mem.member_change
    if change is not None and change.action == action and change.member.node_id == node_id:
        return None
    busy = _change_in_flight(mem, None if member is None else MemberChange(action, member, 0))
    return busy if isinstance(busy, Rejected) else None


def _change_in_flight(mem: Memory, wanted: MemberChange | None) -> Result | None:
    """None when no change is in flight; Ok when ``wanted`` is that change (a retry); else the refusal."""
    change = mem.member_change
    if change is None:
        return None
    if wanted is not None and change.action == wanted.action and change.member == wanted.member:
        return Ok(change)
    return FailedPrecondition(
        f"a membership change is in flight ({change.describe()}): one change at a time; wait until it "
        "finishes (raftsched cluster status shows it), then retry"
    )


def is_removing(mem: Memory, node_id: str) -> bool:
    """Whether ``node_id`` is being removed, or was (its node must stop serving once it is out)."""
    change = mem.member_change
    return (change is not None and change.action == "remove" and change.member.node_id == node_id) or (
        node_id in mem.removed_members and node_id not in mem.roster
    )


def check_format_number(cluster_format: int, what: str = "state") -> None:
    """Raise ``NewerState`` (a ValueError) if a state (a snapshot) uses a command format newer than this code
    understands."""
    if cluster_format > c.wire.FORMAT_VERSION:
        raise NewerState(
            f"the {what}'s cluster uses command format {cluster_format}, but this node understands command "
            f"formats up to {c.wire.FORMAT_VERSION}: upgrade this node"
        )


def forget(mem: Memory) -> None:
    """A restore into a new cluster: the old cluster's members, their versions and a change in flight go (the new
    cluster records its own); its command format stays."""
    mem.roster, mem.member_change, mem.removed_members = {}, None, {}
    mem.members, mem.member_rafts = {}, {}


def _members_text(mem: Memory) -> str:
    return ", ".join(sorted(mem.roster)) or "(none recorded yet)"


# ------------------------------------------------------------ handlers


def node_info(tx: Tx, cmd: c.NodeInfo) -> Result:
    tx.mem.members[cmd.node_id] = (cmd.version, cmd.command_format)
    if cmd.raft:
        tx.mem.member_rafts[cmd.node_id] = cmd.raft
    return Ok(None)


def seed_members(tx: Tx, cmd: c.SeedMembers) -> Result:
    mem = tx.mem
    if mem.roster:
        return Ok(False)
    for attr in ("node_id", "raft", "grpc"):
        values = [getattr(m, attr) for m in cmd.members]
        if len(set(values)) != len(values) or not all(values):
            return FailedPrecondition(f"entry {tx.index}: the seed membership repeats or lacks a member's {attr}")
    mem.roster = {m.node_id: m for m in cmd.members}
    return Ok(True)


def add_member(tx: Tx, cmd: c.AddMember) -> Result:
    mem, new = tx.mem, cmd.member
    if not mem.roster:
        return FailedPrecondition("the cluster's membership is not recorded yet (its leader does it at start); retry shortly")
    busy = _change_in_flight(mem, MemberChange("add", new, 0))
    if busy is not None:
        return busy
    known = mem.roster.get(new.node_id)
    if known == new:
        return Ok(None)  # already a member with these addresses: a retried AddNode
    if known is not None:
        return AlreadyExists(
            f"node {new.node_id} is already a member (raft {known.raft}, grpc {known.grpc}); to move it, "
            "remove it first, or add the new machine under another id"
        )
    for m in mem.roster.values():
        for attr in ("raft", "grpc", "http"):
            if getattr(new, attr) and getattr(new, attr) == getattr(m, attr):
                return AlreadyExists(
                    f"{attr} address {getattr(new, attr)} is already member {m.node_id}'s: give {new.node_id} its own"
                )
    mem.member_change = MemberChange("add", new, tx.index)
    mem.roster[new.node_id] = new
    return Ok(mem.member_change)


def remove_member(tx: Tx, cmd: c.RemoveMember) -> Result:
    mem = tx.mem
    if not mem.roster:
        return FailedPrecondition("the cluster's membership is not recorded yet (its leader does it at start); retry shortly")
    member = mem.roster.get(cmd.node_id)
    if member is None:
        if cmd.node_id in mem.removed_members and mem.member_change is None:
            return Ok(None)  # already removed: a retried RemoveNode
        return NotFound(f"node {cmd.node_id} is not a member (members: {_members_text(mem)})")
    busy = _change_in_flight(mem, MemberChange("remove", member, 0))
    if busy is not None:
        return busy
    if len(mem.roster) == 1:
        return FailedPrecondition(f"node {cmd.node_id} is the only member: a cluster cannot remove its last member")
    mem.member_change = MemberChange("remove", member, tx.index)
    return Ok(mem.member_change)


def finish_member_change(tx: Tx, cmd: c.FinishMemberChange) -> Result:
    mem = tx.mem
    change = mem.member_change
    if change is None or change.member.node_id != cmd.node_id or change.action != cmd.action:
        return Ok(False)  # a duplicate or late finish: nothing in flight matches it
    member = change.member
    if change.action == "remove":
        mem.roster.pop(member.node_id, None)
        mem.members.pop(member.node_id, None)
        mem.member_rafts.pop(member.node_id, None)  # a later member at its address reports for itself
        mem.removed_members[member.node_id] = member
    else:
        mem.removed_members.pop(member.node_id, None)
    mem.member_change = None
    return Ok(True)


def set_cluster_format(tx: Tx, cmd: c.SetClusterFormat) -> Result:
    if cmd.format > tx.mem.cluster_format:
        tx.mem.cluster_format = cmd.format
    return Ok(tx.mem.cluster_format)
