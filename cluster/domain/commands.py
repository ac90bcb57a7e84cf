"""Commands of the job state machine and their versioned encoding in the Raft log.

A command is a small frozen dataclass of plain values. The proposer stamps
``now_ms`` (its clock) into every command before replication: the state
machine never reads a clock. The wire form is UTF-8 JSON
``{"v": FORMAT_VERSION, "op": <name>, ...fields}``; ``decode`` rejects an
unknown version or op with ``CommandFormatError`` (the state machine turns
that into a rejected result: ``apply`` never raises).

One Raft entry may carry many fires (``Fire.items``): batching is how the
leader keeps up with thousands of due instants per second.

Adding a command is one place here — the class with ``@command(op, to_plain,
from_plain)`` beside it — plus its handler in the state machine, registered
with ``@handles(TheCommand)`` (a unit test checks every command has one).
``op`` and the plain keys are the log's wire format: never rename them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, TypeVar, Union

from cluster.domain.errors import RaftschedError
from cluster.domain.model import JobSpec
from cluster.domain.spec_codec import Plain, b64, spec_from_plain, spec_to_plain, unb64

FORMAT_VERSION = 1


class CommandFormatError(RaftschedError, ValueError):
    """The bytes are not a command this version understands."""


C = TypeVar("C")
#: how a command becomes the plain values of its log entry (without "op", "v", "now"), and back
ToPlain = Callable[[Any], Plain]
FromPlain = Callable[[Plain, int], Any]

_ENCODERS: dict[type, tuple[str, ToPlain]] = {}
_DECODERS: dict[str, FromPlain] = {}
#: the state machine's handler of each command type (filled by ``handles``)
HANDLERS: dict[type, Callable[..., Any]] = {}


def command(op: str, to_plain: ToPlain, from_plain: FromPlain) -> Callable[[type[C]], type[C]]:
    """Register a command class under its wire name ``op`` with its plain-value codec."""

    def register(cls: type[C]) -> type[C]:
        if op in _DECODERS:
            raise ValueError(f"command op {op!r} is registered twice")
        _ENCODERS[cls] = (op, to_plain)
        _DECODERS[op] = from_plain
        return cls

    return register


def handles(cmd_type: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a state-machine method ``fn(machine, cmd, index) -> Result`` as the handler of ``cmd_type``."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        HANDLERS[cmd_type] = fn
        return fn

    return register


def registered_commands() -> list[type]:
    return list(_ENCODERS)


def _seq(value: Any) -> list[Any]:
    """A JSON array, or TypeError: a string must not pass as a list of one-letter items."""
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


def _job_id(cmd: Any) -> Plain:
    return {"job_id": cmd.job_id}


def _quota(plain: Plain, key: str) -> int:
    """A quota the proposer's ``[limits]`` put in the command; 0 (and entries from before quotas): none."""
    return int(plain.get(key, 0))


def _with_quota(plain: Plain, key: str, value: int) -> Plain:
    if value:
        plain[key] = value
    return plain


@command(
    "create_job",
    lambda c: _with_quota(
        {"job_id": c.job_id, "spec": spec_to_plain(c.spec), "idem": c.idempotency_key, "fp": c.fingerprint}, "qj", c.max_jobs
    ),
    lambda p, now: CreateJob(
        now, str(p["job_id"]), spec_from_plain(p["spec"]), str(p.get("idem", "")), str(p.get("fp", "")), _quota(p, "qj")
    ),
)
@dataclass(frozen=True, slots=True)
class CreateJob:
    now_ms: int
    job_id: str
    spec: JobSpec
    idempotency_key: str = ""
    #: ``spec_codec.spec_fingerprint(spec)``, computed once by the proposer instead of on every replica
    fingerprint: str = ""
    #: the proposer's ``[limits] max_jobs``: refused when the state already keeps that many (0: no quota)
    max_jobs: int = 0


@command(
    "update_job",
    lambda c: {"job_id": c.job_id, "spec": spec_to_plain(c.spec)},
    lambda p, now: UpdateJob(now, str(p["job_id"]), spec_from_plain(p["spec"])),
)
@dataclass(frozen=True, slots=True)
class UpdateJob:
    now_ms: int
    job_id: str
    spec: JobSpec


@command("pause_job", _job_id, lambda p, now: PauseJob(now, str(p["job_id"])))
@dataclass(frozen=True, slots=True)
class PauseJob:
    now_ms: int
    job_id: str


@command("resume_job", _job_id, lambda p, now: ResumeJob(now, str(p["job_id"])))
@dataclass(frozen=True, slots=True)
class ResumeJob:
    now_ms: int
    job_id: str


@command("delete_job", _job_id, lambda p, now: DeleteJob(now, str(p["job_id"])))
@dataclass(frozen=True, slots=True)
class DeleteJob:
    now_ms: int
    job_id: str


@command(
    "trigger_job",
    lambda c: _with_quota(_job_id(c), "qp", c.max_pending),
    lambda p, now: TriggerJob(now, str(p["job_id"]), _quota(p, "qp")),
)
@dataclass(frozen=True, slots=True)
class TriggerJob:
    now_ms: int
    job_id: str
    #: the proposer's ``[limits] max_pending_runs`` (0: no quota)
    max_pending: int = 0


@command("cancel_run", lambda c: {"run_id": c.run_id}, lambda p, now: CancelRun(now, str(p["run_id"])))
@dataclass(frozen=True, slots=True)
class CancelRun:
    now_ms: int
    run_id: str


@command(
    "fire",
    lambda c: _with_quota(
        {"items": [list(i) for i in c.items], "look": c.lookahead_ms, "mis": c.misfire_threshold_ms}, "qp", c.max_pending
    ),
    lambda p, now: Fire(
        now, tuple((str(j), int(t)) for j, t in _seq(p["items"])), int(p["look"]), int(p["mis"]), _quota(p, "qp")
    ),
)
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


def _acquire_to_plain(c: AcquireLeases) -> Plain:
    plain: Plain = {"exec": c.executor_id, "queues": list(c.queues), "max": c.max_runs}
    if c.types:  # absent = no filter: entries written before types existed decode (and encode) identically
        plain["types"] = list(c.types)
    return plain


@command(
    "acquire",
    _acquire_to_plain,
    lambda p, now: AcquireLeases(
        now,
        str(p["exec"]),
        tuple(str(q) for q in _seq(p["queues"])),
        int(p["max"]),
        tuple(str(t) for t in _seq(p.get("types", []))),
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
    lambda c: {"exec": c.executor_id, "leases": [list(x) for x in c.leases]},
    lambda p, now: RenewLeases(now, str(p["exec"]), tuple((str(i), int(t)) for i, t in _seq(p["leases"]))),
)
@dataclass(frozen=True, slots=True)
class RenewLeases:
    now_ms: int
    executor_id: str
    leases: tuple[tuple[str, int], ...]  # (lease_id, fencing_token)


@command(
    "complete",
    lambda c: {
        "lease": c.lease_id,
        "token": c.fencing_token,
        "ok": c.succeeded,
        "result": b64(c.result),
        "error": c.error,
        "log": c.log_uri,
        "draw": c.draw,
        # absent (None) only in entries from before completions named their executor: those skip the holder check
        **({} if c.executor_id is None else {"exec": c.executor_id}),
    },
    lambda p, now: CompleteRun(
        now,
        str(p["lease"]),
        int(p["token"]),
        bool(p["ok"]),
        unb64(p["result"]),
        str(p["error"]),
        str(p["log"]),
        float(p["draw"]),
        None if p.get("exec") is None else str(p["exec"]),
    ),
)
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


@command(
    "expire",
    lambda c: {"leases": [list(x) for x in c.leases]},
    lambda p, now: ExpireLeases(now, tuple((str(i), int(t), float(d)) for i, t, d in _seq(p["leases"]))),
)
@dataclass(frozen=True, slots=True)
class ExpireLeases:
    """Proposed by the leader for leases past their deadline: (lease_id, token, jitter draw)."""

    now_ms: int
    leases: tuple[tuple[str, int, float], ...]


@command("grace", lambda c: {"grace": c.grace_ms}, lambda p, now: GraceLeases(now, int(p["grace"])))
@dataclass(frozen=True, slots=True)
class GraceLeases:
    """Proposed once by a new leader: every live lease lasts at least ``grace_ms`` from now."""

    now_ms: int
    grace_ms: int


@command("prune", lambda c: {"limit": c.limit}, lambda p, now: PruneHistory(now, int(p["limit"])))
@dataclass(frozen=True, slots=True)
class PruneHistory:
    """Proposed by the leader: drop finished runs and deleted jobs whose retention has passed."""

    now_ms: int
    limit: int = 5000


@command("barrier", lambda c: {}, lambda p, now: Barrier(now))
@dataclass(frozen=True, slots=True)
class Barrier:
    """A no-op: once it is applied, everything committed before it is applied too."""

    now_ms: int


@command(
    "node_info",
    lambda c: {"node": c.node_id, "ver": c.version, "fmt": c.command_format},
    lambda p, now: NodeInfo(now, str(p["node"]), str(p["ver"]), int(p["fmt"])),
)
@dataclass(frozen=True, slots=True)
class NodeInfo:
    """Proposed by each node once it runs: which raftsched version it is and which command format it
    understands (kept in the state, shown by GetClusterStatus, checked before a format change)."""

    now_ms: int
    node_id: str
    version: str
    command_format: int


Command = Union[
    NodeInfo,
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


def encode(cmd: Command) -> bytes:
    entry = _ENCODERS.get(type(cmd))
    if entry is None:
        raise TypeError(f"not a command: {cmd!r}")
    op, to_plain = entry
    plain = {"op": op, **to_plain(cmd), "v": FORMAT_VERSION, "now": cmd.now_ms}
    return json.dumps(plain, separators=(",", ":")).encode("utf-8")


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
        cmd: Command = decoder(plain, int(plain["now"]))
        return cmd
    except (KeyError, TypeError, ValueError, OverflowError) as exc:  # OverflowError: int(1e999)
        raise CommandFormatError(f"malformed {plain.get('op')} command: {exc!r}") from exc
