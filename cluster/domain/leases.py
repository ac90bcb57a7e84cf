"""Leases as values: what a grant and a renewal answer, the retry backoff, and how fencing tokens are numbered.

The fencing token of the k-th lease granted by the entry at Raft index i is
``i * TOKENS_PER_ENTRY + k`` (k counts over every command of a
group-committed entry): it grows with every grant in the cluster, so a run
re-leased after expiry always carries a larger token than any earlier lease
of it. An entry may therefore grant at most ``MAX_RUNS_PER_GRANT`` leases:
the proposer keeps each entry's grants within it (``raftsched.raft.batching``
is given it at wiring), and the state machine guards the range
(``raftsched.cluster.fsm.leases``).
"""

from __future__ import annotations

from dataclasses import dataclass

from raftsched.cluster.domain.model import JobSpec, RetryPolicy, Run

TOKENS_PER_ENTRY = 1000
#: the most leases one Raft entry may grant (its fencing tokens stay below the next entry's)
MAX_RUNS_PER_GRANT = TOKENS_PER_ENTRY - 1


@dataclass(frozen=True, slots=True)
class Grant:
    run: Run
    spec: JobSpec


@dataclass(frozen=True, slots=True)
class Renewal:
    lease_id: str
    ok: bool
    expires_ms: int
    cancel_requested: bool
    error: str


def backoff_ms(retry: RetryPolicy, attempt: int, draw: float) -> int:
    """The wait before attempt ``attempt + 1``; ``draw`` in [0, 1) spreads it by +-jitter."""
    base = min(float(retry.max_backoff_ms), retry.initial_backoff_ms * retry.multiplier ** max(0, attempt - 1))
    spread = 1.0 + retry.jitter * (2.0 * min(max(draw, 0.0), 1.0) - 1.0)
    return max(0, int(base * spread))


def lease_id_for(token: int) -> str:
    return f"L{token}"


def token_of(lease_id: str) -> int:
    """The fencing token a lease id was made from (``lease_id_for``)."""
    return int(lease_id[1:])
