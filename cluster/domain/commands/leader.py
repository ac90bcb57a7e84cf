"""The commands the leader proposes on its own: fire what is due, prune history, and the read barrier."""

from __future__ import annotations

from dataclasses import dataclass

from raftsched.cluster.domain.commands.wire import INT, PAIRS, STR, Field, command, omitted


@command(
    "fire",
    (
        Field("items", "items", PAIRS), Field("look", "lookahead_ms", INT), Field("mis", "misfire_threshold_ms", INT),
        omitted("qp", "max_pending", INT), omitted("node", "node_id", STR), omitted("term", "term", INT),
    ),
)  # fmt: skip
@dataclass(frozen=True, slots=True)
class Fire:
    """Fire the due instants of many jobs.

    Each item is ``(job_id, expected_next_fire_ms)``: the item applies only if
    the job's next fire time is still the expected one, so a fire proposed
    twice (two leaders, a retried proposal) creates its runs once.
    ``lookahead_ms`` lets the leader commit a fire up to that long before its
    instant; ``misfire_threshold_ms`` is how late an instant may fire before
    it counts as missed and the job's misfire policy decides. ``max_pending`` is
    the leader's ``[limits] max_pending_runs``: an instant that comes due while
    the cluster holds that many PENDING runs is recorded SKIPPED (0: no quota).
    """

    now_ms: int
    items: tuple[tuple[str, int], ...]
    lookahead_ms: int = 0
    misfire_threshold_ms: int = 5_000
    max_pending: int = 0
    #: the proposing leader's node id and Raft term (for the runs' explanations; "" and 0: not said)
    node_id: str = ""
    term: int = 0


@command("prune", (Field("limit", "limit", INT),))
@dataclass(frozen=True, slots=True)
class PruneHistory:
    """Proposed by the leader: drop finished runs and deleted jobs whose retention has passed."""

    now_ms: int
    limit: int = 5000


@command("barrier")
@dataclass(frozen=True, slots=True)
class Barrier:
    """A no-op: once it is applied, everything committed before it is applied too."""

    now_ms: int
