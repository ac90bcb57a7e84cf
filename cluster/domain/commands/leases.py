"""The commands of leased execution: an executor's grants, renewals and completions, and the leader's expiries and
grace (``raftsched.cluster.fsm.leases``)."""

from __future__ import annotations

from dataclasses import dataclass

from raftsched.cluster.domain.commands.wire import (
    BOOL,
    FLOAT,
    INT,
    PAIRS,
    STR,
    STR_OR_NONE,
    STRS,
    TRIPLES,
    Field,
    Kind,
    command,
    omitted,
)
from raftsched.cluster.domain.spec_codec import b64, unb64

BYTES = Kind(b64, unb64)


@command(
    "acquire",
    (
        Field("exec", "executor_id", STR),
        Field("queues", "queues", STRS),
        Field("max", "max_runs", INT),
        omitted("types", "types", STRS),
    ),
)
@dataclass(frozen=True, slots=True)
class AcquireLeases:
    """Lease up to ``max_runs`` leasable PENDING runs of ``queues``, oldest due first.

    ``types``: the job types the executor serves; only runs whose job's type is
    one of them are granted (the others stay PENDING for another executor).
    Empty means any type (what every entry from before this field says).
    """

    now_ms: int
    executor_id: str
    queues: tuple[str, ...]
    max_runs: int
    types: tuple[str, ...] = ()


@command("renew", (Field("exec", "executor_id", STR), Field("leases", "leases", PAIRS)))
@dataclass(frozen=True, slots=True)
class RenewLeases:
    now_ms: int
    executor_id: str
    leases: tuple[tuple[str, int], ...]  # (lease_id, fencing_token)


@command(
    "complete",
    (
        Field("lease", "lease_id", STR), Field("token", "fencing_token", INT), Field("ok", "succeeded", BOOL),
        Field("result", "result", BYTES), Field("error", "error", STR), Field("log", "log_uri", STR),
        Field("draw", "draw", FLOAT),
        # absent only in entries from before completions named their executor: those skip the holder check
        omitted("exec", "executor_id", STR_OR_NONE),
    ),
)  # fmt: skip
@dataclass(frozen=True, slots=True)
class CompleteRun:
    """The outcome of one attempt. ``draw`` in [0, 1) is the proposer's random jitter draw for a retry.

    ``executor_id`` is who reports it: anyone but the lease's holder is refused.
    ``None`` (old log entries only; the lease service always sets it) skips that check.
    """

    now_ms: int
    lease_id: str
    fencing_token: int
    succeeded: bool
    result: bytes = b""
    error: str = ""
    log_uri: str = ""
    draw: float = 0.5
    executor_id: str | None = None


@command("expire", (Field("leases", "leases", TRIPLES),))
@dataclass(frozen=True, slots=True)
class ExpireLeases:
    """Proposed by the leader for leases past their deadline: (lease_id, token, jitter draw)."""

    now_ms: int
    leases: tuple[tuple[str, int, float], ...]


@command("grace", (Field("grace", "grace_ms", INT),))
@dataclass(frozen=True, slots=True)
class GraceLeases:
    """Proposed once by a new leader: every live lease lasts at least ``grace_ms`` from now."""

    now_ms: int
    grace_ms: int
