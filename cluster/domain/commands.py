"""Commands of the job state machine and their versioned encoding in the Raft log.

A command is a small frozen dataclass of plain values. The proposer stamps
``now_ms`` (its clock) into every command before replication: the state
machine never reads a clock. The wire form is UTF-8 JSON
``{"v": FORMAT_VERSION, "op": <name>, ...fields}``; ``decode`` rejects an
unknown version or op with ``CommandFormatError`` (the state machine turns
that into a rejected result: ``apply`` never raises).

One Raft entry may carry many fires (``Fire.items``): batching is how the
leader keeps up with thousands of due instants per second.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Union

from cluster.domain.model import JobSpec
from cluster.domain.spec_codec import Plain, b64, spec_from_plain, spec_to_plain, unb64

FORMAT_VERSION = 1


class CommandFormatError(ValueError):
    """The bytes are not a command this version understands."""


@dataclass(frozen=True, slots=True)
class CreateJob:
    now_ms: int
    job_id: str
    spec: JobSpec
    idempotency_key: str = ""
    #: ``codec.spec_fingerprint(spec)``, computed once by the proposer instead of on every replica
    fingerprint: str = ""


@dataclass(frozen=True, slots=True)
class UpdateJob:
    now_ms: int
    job_id: str
    spec: JobSpec


@dataclass(frozen=True, slots=True)
class PauseJob:
    now_ms: int
    job_id: str


@dataclass(frozen=True, slots=True)
class ResumeJob:
    now_ms: int
    job_id: str


@dataclass(frozen=True, slots=True)
class DeleteJob:
    now_ms: int
    job_id: str


@dataclass(frozen=True, slots=True)
class TriggerJob:
    now_ms: int
    job_id: str


@dataclass(frozen=True, slots=True)
class CancelRun:
    now_ms: int
    run_id: str


@dataclass(frozen=True, slots=True)
class Fire:
    """Fire the due instants of many jobs.

    Each item is ``(job_id, expected_next_fire_ms)``: the item applies only if
    the job's next fire time is still the expected one, so a fire proposed
    twice (two leaders, a retried proposal) creates its runs once.
    ``lookahead_ms`` lets the leader commit a fire up to that long before its
    instant; ``misfire_threshold_ms`` is how late an instant may fire before
    it counts as missed and the job's misfire policy decides.
    """

    now_ms: int
    items: tuple[tuple[str, int], ...]
    lookahead_ms: int = 0
    misfire_threshold_ms: int = 5_000


@dataclass(frozen=True, slots=True)
class AcquireLeases:
    """Lease up to ``max_runs`` leasable PENDING runs of ``queues``, oldest due first."""

    now_ms: int
    executor_id: str
    queues: tuple[str, ...]
    max_runs: int


@dataclass(frozen=True, slots=True)
class RenewLeases:
    now_ms: int
    executor_id: str
    leases: tuple[tuple[str, int], ...]  # (lease_id, fencing_token)


@dataclass(frozen=True, slots=True)
class CompleteRun:
    """The outcome of one attempt. ``draw`` in [0, 1) is the proposer's random jitter draw for a retry."""

    now_ms: int
    lease_id: str
    fencing_token: int
    succeeded: bool
    result: bytes = b""
    error: str = ""
    log_uri: str = ""
    draw: float = 0.5


@dataclass(frozen=True, slots=True)
class ExpireLeases:
    """Proposed by the leader for leases past their deadline: (lease_id, token, jitter draw)."""

    now_ms: int
    leases: tuple[tuple[str, int, float], ...]


@dataclass(frozen=True, slots=True)
class GraceLeases:
    """Proposed once by a new leader: every live lease lasts at least ``grace_ms`` from now."""

    now_ms: int
    grace_ms: int


@dataclass(frozen=True, slots=True)
class PruneHistory:
    """Proposed by the leader: drop finished runs and deleted jobs whose retention has passed."""

    now_ms: int
    limit: int = 5000


@dataclass(frozen=True, slots=True)
class Barrier:
    """A no-op: once it is applied, everything committed before it is applied too."""

    now_ms: int


Command = Union[
    CreateJob,
    UpdateJob,
    PauseJob,
    ResumeJob,
    DeleteJob,
    TriggerJob,
    CancelRun,
    Fire,
    Barrier,
    AcquireLeases,
    RenewLeases,
    CompleteRun,
    ExpireLeases,
    GraceLeases,
    PruneHistory,
]

_JOB_ONLY: dict[str, type] = {
    "pause_job": PauseJob,
    "resume_job": ResumeJob,
    "delete_job": DeleteJob,
    "trigger_job": TriggerJob,
}
_OP_OF: dict[type, str] = {v: k for k, v in _JOB_ONLY.items()}


def _to_plain(cmd: Command) -> Plain:
    if isinstance(cmd, CreateJob):
        return {
            "op": "create_job",
            "job_id": cmd.job_id,
            "spec": spec_to_plain(cmd.spec),
            "idem": cmd.idempotency_key,
            "fp": cmd.fingerprint,
        }
    if isinstance(cmd, UpdateJob):
        return {"op": "update_job", "job_id": cmd.job_id, "spec": spec_to_plain(cmd.spec)}
    if isinstance(cmd, (PauseJob, ResumeJob, DeleteJob, TriggerJob)):
        return {"op": _OP_OF[type(cmd)], "job_id": cmd.job_id}
    if isinstance(cmd, CancelRun):
        return {"op": "cancel_run", "run_id": cmd.run_id}
    if isinstance(cmd, Fire):
        return {
            "op": "fire",
            "items": [list(i) for i in cmd.items],
            "look": cmd.lookahead_ms,
            "mis": cmd.misfire_threshold_ms,
        }
    if isinstance(cmd, Barrier):
        return {"op": "barrier"}
    if isinstance(cmd, AcquireLeases):
        return {"op": "acquire", "exec": cmd.executor_id, "queues": list(cmd.queues), "max": cmd.max_runs}
    if isinstance(cmd, RenewLeases):
        return {"op": "renew", "exec": cmd.executor_id, "leases": [list(x) for x in cmd.leases]}
    if isinstance(cmd, CompleteRun):
        return {
            "op": "complete",
            "lease": cmd.lease_id,
            "token": cmd.fencing_token,
            "ok": cmd.succeeded,
            "result": b64(cmd.result),
            "error": cmd.error,
            "log": cmd.log_uri,
            "draw": cmd.draw,
        }
    if isinstance(cmd, ExpireLeases):
        return {"op": "expire", "leases": [list(x) for x in cmd.leases]}
    if isinstance(cmd, GraceLeases):
        return {"op": "grace", "grace": cmd.grace_ms}
    if isinstance(cmd, PruneHistory):
        return {"op": "prune", "limit": cmd.limit}
    raise TypeError(f"not a command: {cmd!r}")


def encode(cmd: Command) -> bytes:
    plain = _to_plain(cmd)
    plain["v"] = FORMAT_VERSION
    plain["now"] = cmd.now_ms
    return json.dumps(plain, separators=(",", ":")).encode("utf-8")


def _seq(value: Any) -> list[Any]:
    """A JSON array, or TypeError: a string must not pass as a list of one-letter items."""
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


def _decode_create(p: Plain, now: int) -> Command:
    return CreateJob(now, str(p["job_id"]), spec_from_plain(p["spec"]), str(p.get("idem", "")), str(p.get("fp", "")))


def _decode_update(p: Plain, now: int) -> Command:
    return UpdateJob(now, str(p["job_id"]), spec_from_plain(p["spec"]))


def _decode_fire(p: Plain, now: int) -> Command:
    items = tuple((str(j), int(t)) for j, t in _seq(p["items"]))
    return Fire(now, items, int(p["look"]), int(p["mis"]))


def _decode_complete(p: Plain, now: int) -> Command:
    return CompleteRun(
        now,
        str(p["lease"]),
        int(p["token"]),
        bool(p["ok"]),
        unb64(p["result"]),
        str(p["error"]),
        str(p["log"]),
        float(p["draw"]),
    )


_DECODERS: dict[str, Callable[[Plain, int], Command]] = {
    "acquire": lambda p, now: AcquireLeases(now, str(p["exec"]), tuple(str(q) for q in _seq(p["queues"])), int(p["max"])),
    "renew": lambda p, now: RenewLeases(now, str(p["exec"]), tuple((str(i), int(t)) for i, t in _seq(p["leases"]))),
    "complete": _decode_complete,
    "expire": lambda p, now: ExpireLeases(now, tuple((str(i), int(t), float(d)) for i, t, d in _seq(p["leases"]))),
    "grace": lambda p, now: GraceLeases(now, int(p["grace"])),
    "prune": lambda p, now: PruneHistory(now, int(p["limit"])),
    "create_job": _decode_create,
    "update_job": _decode_update,
    "fire": _decode_fire,
    "cancel_run": lambda p, now: CancelRun(now, str(p["run_id"])),
    "barrier": lambda p, now: Barrier(now),
}
for _op, _cls in _JOB_ONLY.items():
    _DECODERS[_op] = lambda p, now, _c=_cls: _c(now, str(p["job_id"]))


def decode(data: bytes) -> Command:
    try:
        plain: Any = json.loads(data)
    except (ValueError, TypeError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
        raise CommandFormatError(f"command is not valid JSON: {exc}") from exc
    if not isinstance(plain, dict):
        raise CommandFormatError("command is not a JSON object")
    version = plain.get("v")
    if type(version) is not int or version != FORMAT_VERSION:  # not True, not 1.0
        raise CommandFormatError(
            f"command format version {version!r} is not supported (this node understands {FORMAT_VERSION}); upgrade this node"
        )
    decoder = _DECODERS.get(str(plain.get("op")))
    if decoder is None:
        raise CommandFormatError(f"unknown command {plain.get('op')!r}; upgrade this node")
    try:
        return decoder(plain, int(plain["now"]))
    except (KeyError, TypeError, ValueError, OverflowError) as exc:  # OverflowError: int(1e999)
        raise CommandFormatError(f"malformed {plain.get('op')} command: {exc!r}") from exc
