"""What the node needs from the outside, as small protocols (the app layer plugs in the adapters).

* ``Replicator`` — Raft: propose encoded commands, learn what this node's
  state machine answered when it applied them. ``raft.RaftNode`` implements
  it; tests use in-memory fakes. A proposal that did not (visibly) commit is
  answered with an ``Exception`` instance (its message says why), never raised.
* ``RaftStatus`` — what ``GetClusterStatus`` reports about this replica.
* ``OutputReader`` — reads a run's stored output back by its ``log_uri``
  (``storage.OutputReader``), from a byte offset, and a running attempt's
  live output by its key; raises ``OutputMissing`` and nothing else.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from cluster.domain.live_output import LogSlice
from cluster.domain.output import OutputKey

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
