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
    VERDICT_FORMAT,
    Field,
    Kind,
    command,
    omitted,
    seq,
)
from raftsched.cluster.domain.spec_codec import b64, unb64

BYTES = Kind(b64, unb64)
#: (lease_id, heartbeat details) pairs
DETAILS = Kind(lambda v: [[i, b64(d)] for i, d in v], lambda v: tuple((str(i), unb64(d)) for i, d in seq(v)))


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


@command(
    "renew",
    (
        Field("exec", "executor_id", STR),
        Field("leases", "leases", PAIRS),
        omitted("hb", "details", DETAILS, since=VERDICT_FORMAT),
    ),
)
@dataclass(frozen=True, slots=True)
class RenewLeases:
    """Extend ``leases`` (lease_id, fencing_token) by their TTL. ``details``: (lease_id, bytes) heartbeat details
    to keep on those leases' attempts (the latest of a run is what its next attempt gets)."""

    now_ms: int
    executor_id: str
    leases: tuple[tuple[str, int], ...]  # (lease_id, fencing_token)
    details: tuple[tuple[str, bytes], ...] = ()


@command(
    "complete",
    (
        Field("lease", "lease_id", STR), Field("token", "fencing_token", INT), Field("ok", "succeeded", BOOL),
        Field("result", "result", BYTES), Field("error", "error", STR), Field("log", "log_uri", STR),
        Field("draw", "draw", FLOAT),
        # absent only in entries from before completions named their executor: those skip the holder check
        omitted("exec", "executor_id", STR_OR_NONE),
        omitted("nr", "non_retryable", BOOL, since=VERDICT_FORMAT),
        omitted("ra", "retry_after_ms", INT, since=VERDICT_FORMAT),
    ),
)  # fmt: skip
@dataclass(frozen=True, slots=True)
class CompleteRun:
    """The outcome of one attempt. ``draw`` in [0, 1) is the proposer's random jitter draw for a retry.

    ``executor_id`` is who reports it: anyone but the lease's holder is refused.
    ``None`` (old log entries only; the lease service always sets it) skips that check.
    A failure may be ``non_retryable`` (the run is FAILED at once) or name ``retry_after_ms``, the wait before
    the next attempt in place of the job's backoff.
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
    non_retryable: bool = False
    retry_after_ms: int = 0


@command("expire", (Field("leases", "leases", TRIPLES),))
@dataclass(frozen=True, slots=True)
class ExpireLeases:
    """Proposed by the leader for leases past their deadline: (lease_id, token, jitter draw)."""

    now_ms: int
    leases: tuple[tuple[str, int, float], ...]


@command("expire_pending", (Field("runs", "run_ids", STRS),), since=5)
@dataclass(frozen=True, slots=True)
class ExpirePending:
    """Proposed by the leader for PENDING runs past their job's ``pending_ttl``: each ends EXPIRED (command format 5)."""

    now_ms: int
    run_ids: tuple[str, ...]


@command("grace", (Field("grace", "grace_ms", INT),))
@dataclass(frozen=True, slots=True)
class GraceLeases:
    """Proposed once by a new leader: every live lease lasts at least ``grace_ms`` from now."""

    now_ms: int
    grace_ms: int
