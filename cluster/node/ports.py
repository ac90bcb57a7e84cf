"""What the node needs from the outside, as small protocols (the app layer plugs in the adapters).

* ``Replicator`` — Raft: propose encoded commands, learn what this node's
  state machine answered when it applied them. ``raft.RaftNode`` implements
  it; tests use in-memory fakes. A proposal that did not (visibly) commit is
  answered with an ``Exception`` instance (its message says why), never raised.
* ``RaftStatus`` — what ``GetClusterStatus`` reports about this replica.
* ``OutputReader`` — reads a run's stored output back by its ``log_uri``
  (``storage.OutputReader``), from a byte offset, and a running attempt's
  live output by its key; raises ``OutputMissing`` and nothing else.
* ``RaftMembership`` — pysyncobj's configuration and its changes, leadership
  transfer and a hold on elections (``raftsched.raft.membership.RaftMembership``).
* ``Snapshots`` — this replica's snapshot file, and a way to ask for a new
  one (``raft.RaftNode``): what a backup streams.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from raftsched.cluster.domain.live_output import LogSlice
from raftsched.cluster.domain.output import OutputKey

#: ``callback(result, fail_reason)``: 0 is success; runs on the Raft thread (keep it short)
ProposalCallback = Callable[[Any, int], None]


class Replicator(Protocol):
    def propose_many(self, proposals: list[tuple[bytes, int]], timeout: float) -> list[Any]:
        """Propose ``(data, weight)`` pairs together; per proposal what apply returned, or an Exception."""
        ...

    def propose_async(self, data: bytes, callback: ProposalCallback) -> None: ...

    def is_leader(self) -> bool: ...


class RaftStatus(Protocol):
    def is_leader(self) -> bool: ...

    def leader_address(self) -> str | None: ...

    def status(self) -> dict[str, Any]: ...

    def is_connected(self, address: str) -> bool: ...

    @property
    def term(self) -> int: ...

    @property
    def commit_index(self) -> int: ...

    @property
    def applied_index(self) -> int: ...

    @property
    def last_snapshot_index(self) -> int: ...


class OutputReader(Protocol):
    def read(self, uri: str) -> tuple[bytes, bytes]:
        """``(log, result)`` stored at ``uri``; raises ``OutputMissing`` with the reason."""
        ...

    def read_at(self, uri: str, offset: int) -> tuple[LogSlice, bytes]:
        """The log stored at ``uri`` from byte ``offset``, and the result; raises ``OutputMissing``."""
        ...

    def read_live(self, key: OutputKey, offset: int) -> LogSlice:
        """What the running attempt ``key`` has shipped so far, from ``offset``; raises ``OutputMissing``."""
        ...


class RaftMembership(Protocol):
    def members(self) -> list[str]:
        """The Raft addresses of the configuration this replica uses now (itself first)."""
        ...

    def change(self, add: bool, address: str, callback: Callable[[bool, str], None]) -> None:
        """Propose Raft's own change adding (removing) ``address``; ``callback(ok, reason)`` once committed or refused."""
        ...

    def transfer_leadership(self, to: str | None = None) -> None:
        """On the leader: ask ``to`` (a Raft address; None: the most caught-up follower) to take over (best effort)."""
        ...

    def hold_elections(self, hold: bool, reason: str = "membership") -> None:
        """While held for any reason, this replica never starts an election (it still votes)."""
        ...

    def quiet_for(self) -> float:
        """While elections are held: seconds since a leader was last heard (0 when not held or leading)."""
        ...

    def match_index(self, address: str) -> int:
        """On the leader: how far ``address``'s log is known to match (0: unknown)."""
        ...


class Snapshots(Protocol):
    def force_snapshot(self) -> None:
        """Ask for a snapshot of what is applied now (written in the background)."""
        ...

    @property
    def last_snapshot_index(self) -> int: ...

    @property
    def snapshot_path(self) -> str | None: ...
