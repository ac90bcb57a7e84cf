"""What a proposer is told when its command did not (visibly) commit: ``ProposalError``, with a reason and words.

``reason`` is pysyncobj's ``FAIL_REASON`` name, one of ours (``LOG_FULL``,
``STATE_FULL``, ``DISK_TROUBLE``: refused before anything was written), or
``TIMEOUT`` / ``NOT_SENT`` (``raftsched.raft.batching``: the outcome is unknown / it
was never proposed). Built by ``raftsched.raft.adapter.RaftNode.propose_many``; any
thread.
"""

from __future__ import annotations

from typing import Callable

from pysyncobj import FAIL_REASON

from raftsched.raft.errors import RaftError


class ProposalError(RaftError):
    """A proposal did not (visibly) commit. ``reason`` is a FAIL_REASON name or 'TIMEOUT'."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


#: our own fail reasons: the Raft log (LMDB map) of this node or of the leader has no room; the state has none;
#: this node (or the leader) cannot write its disk now
LOG_FULL = 100
STATE_FULL = 101
DISK_TROUBLE = 102
_REASONS = {v: k for k, v in vars(FAIL_REASON).items() if isinstance(v, int)}
_REASONS[LOG_FULL] = "LOG_FULL"
_REASONS[STATE_FULL] = "STATE_FULL"
_REASONS[DISK_TROUBLE] = "DISK_TROUBLE"

_MESSAGES = {
    "MISSING_LEADER": "no Raft leader is known right now (an election may be under way); retry shortly",
    "NOT_LEADER": "the node the command was forwarded to is no longer the leader; retry",
    "LEADER_CHANGED": "the leader changed before the command committed; retry",
    "DISCARDED": "the command was overwritten by a new leader's log and did not commit; retry",
    "QUEUE_FULL": "the node's command queue is full; retry with backoff",
    "REQUEST_DENIED": "the leader refused the command",
    "UNKNOWN_OUTCOME": "the command's outcome is unknown; it may or may not have committed",
    "DISK_TROUBLE": "the node (or the leader) cannot write its disk now; the command was not proposed: retry on another node",
    "NOT_SENT": "the command could not be proposed in time (this node is overloaded or cannot reach Raft); it did not commit: retry",
    "TIMEOUT": (
        "the command did not commit in time (no leader or no quorum?); it may still commit later: "
        "retry (with the same idempotency key, so a retry cannot act twice)"
    ),
}


def log_full_message(map_size: int) -> str:
    return (
        f"the Raft log is full: its LMDB map ([raft] max_log_bytes = {map_size} bytes, {map_size / (1 << 20):.0f} MiB) "
        "has no room for this command on this node or on the leader; nothing was written. Raise [raft] max_log_bytes "
        "on every node and restart them one at a time (or snapshot sooner: [raft] snapshot_min_entries)"
    )


def timed_out(proposed: bool) -> ProposalError:
    """A proposal that did not answer in time (``proposed``: it reached Raft, so it may still commit)."""
    return ProposalError("TIMEOUT", _MESSAGES["TIMEOUT" if proposed else "NOT_SENT"])


def failed(error: int, map_size: int, state_full: Callable[[], str], disk_problem: str | None) -> ProposalError:
    """A proposal pysyncobj (or our refusal) answered with ``error``; ``disk_problem``: this node's, if any."""
    reason = _REASONS.get(error, "NOT_SENT" if error == -1 else str(error))
    if reason == "LOG_FULL":
        message = log_full_message(map_size)
    elif reason == "STATE_FULL":
        message = state_full()
    elif reason == "DISK_TROUBLE" and disk_problem:
        message = f"this node cannot write its disk now ({disk_problem}); the command was not proposed: retry on another node"
    else:
        message = _MESSAGES.get(reason, f"the command failed: {reason}")
    return ProposalError(reason, message)
