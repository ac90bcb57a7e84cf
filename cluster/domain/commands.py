"""Commands of the job state machine and their versioned encoding in the Raft log.

A command is a small frozen dataclass of plain values. The proposer stamps
``now_ms`` (its clock) into every command before replication: the state
machine never reads a clock. The wire form (``raftsched.cluster.domain.command_registry``)
is UTF-8 JSON ``{"v": <format>, "op": <name>, ...fields}`` where ``v`` is the command
format that introduced the command (``since`` in ``@command``): entries of
the commands an older node knows keep the format it knows.

Formats (``FORMAT_VERSION`` is the newest this code understands):

* 1 — every job, run and lease command, ``barrier`` and ``node_info``.
* 2 — membership (``member_seed``, ``member_add``, ``member_remove``,
  ``member_done``) and ``cluster_format`` (``raftsched.cluster.domain.member_commands``);
  with it, today's cron rules (format 1's are ``raftsched.cluster.domain.cron_legacy``).
* 3 — ``retry_run``; a ``request_id`` ("rid") on the mutating
  commands (an entry carrying one is format 3: ``command_format``); with
  it, runs record their attempts and steps (``raftsched.cluster.domain.run_history``).
  ``fire`` may name its proposer ("node") and Raft term ("term"): optional
  keys, read only for the steps.

``decode`` raises ``UnsupportedCommand`` for an entry this node cannot
understand, which stops the node rather than let its replica diverge, and
``CommandFormatError`` for a malformed one (a rejected result). A newer
format is only proposed once the cluster switched to it (``SetClusterFormat``, committed by the
leader once every member reported, through ``NodeInfo``, that it understands
it), and the state machine refuses a command newer than the cluster's format.

One Raft entry may carry many fires (``Fire.items``): batching is how the
leader keeps up with thousands of due instants per second.

Adding a command is one place here — the class with ``@command(op, to_plain,
from_plain, since)`` beside it — plus its handler in the state machine's
table (``raftsched.cluster.fsm.machine.HANDLERS``; a unit test checks every
command has one). A new command is a new format: ``since`` = ``FORMAT_VERSION + 1``, raise
``command_registry.FORMAT_VERSION`` and add its line above; the leader starts
using it once every member understands it. ``op`` and the plain keys are the
log's wire format: never rename them (an optional key with a default in
``from_plain`` keeps old entries readable and needs no new format).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from raftsched.cluster.domain import command_registry as _registry
from raftsched.cluster.domain.command_registry import (  # re-exported: the one module callers import
    FORMAT_VERSION,
    REQUEST_ID_FORMAT,
    CommandFormatError,
    UnsupportedCommand,
    command,
    command_format,
    encode,
    format_of,
    registered_commands,
    request_fingerprint,
)
from raftsched.cluster.domain.command_registry import seq as _seq
from raftsched.cluster.domain.member_commands import AddMember, FinishMemberChange, RemoveMember, SeedMembers, SetClusterFormat
from raftsched.cluster.domain.model import JobSpec
from raftsched.cluster.domain.spec_codec import Plain, b64, spec_from_plain, spec_to_plain, unb64

__all__ = [
    "FORMAT_VERSION",
    "REQUEST_ID_FORMAT",
    "AddMember",
    "Command",
    "CommandFormatError",
    "FinishMemberChange",
    "RemoveMember",
    "SeedMembers",
    "SetClusterFormat",
    "UnsupportedCommand",
    "command",
    "command_format",
    "decode",
    "encode",
    "format_of",
    "registered_commands",
    "request_fingerprint",
]


def _job_id(cmd: Any) -> Plain:
    return _rid({"job_id": cmd.job_id}, cmd)


def _rid(plain: Plain, cmd: Any) -> Plain:
    """``plain`` with the command's request_id, if it has one (absent: every entry from before format 3)."""
    if cmd.request_id:
        plain["rid"] = cmd.request_id
    return plain


def _rid_of(plain: Plain) -> str:
    return str(plain.get("rid", ""))


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
        _rid({"job_id": c.job_id, "spec": spec_to_plain(c.spec), "idem": c.idempotency_key, "fp": c.fingerprint}, c),
        "qj",
        c.max_jobs,
    ),
    lambda p, now: CreateJob(
        now,
        str(p["job_id"]),
        spec_from_plain(p["spec"]),
        str(p.get("idem", "")),
        str(p.get("fp", "")),
        _quota(p, "qj"),
        _rid_of(p),
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
    #: the same id again within 24 h returns the first answer (``raftsched.cluster.fsm.requests``)
    request_id: str = ""


@command(
    "update_job",
    lambda c: _rid({"job_id": c.job_id, "spec": spec_to_plain(c.spec)}, c),
    lambda p, now: UpdateJob(now, str(p["job_id"]), spec_from_plain(p["spec"]), _rid_of(p)),
)
@dataclass(frozen=True, slots=True)
class UpdateJob:
    now_ms: int
    job_id: str
    spec: JobSpec
    request_id: str = ""


@command("pause_job", _job_id, lambda p, now: PauseJob(now, str(p["job_id"]), _rid_of(p)))
@dataclass(frozen=True, slots=True)
class PauseJob:
    now_ms: int
    job_id: str
    request_id: str = ""


@command("resume_job", _job_id, lambda p, now: ResumeJob(now, str(p["job_id"]), _rid_of(p)))
@dataclass(frozen=True, slots=True)
class ResumeJob:
    now_ms: int
    job_id: str
    request_id: str = ""


@command("delete_job", _job_id, lambda p, now: DeleteJob(now, str(p["job_id"]), _rid_of(p)))
@dataclass(frozen=True, slots=True)
class DeleteJob:
    now_ms: int
    job_id: str
    request_id: str = ""


@command(
    "trigger_job",
    lambda c: _with_quota(_job_id(c), "qp", c.max_pending),
    lambda p, now: TriggerJob(now, str(p["job_id"]), _quota(p, "qp"), _rid_of(p)),
)
@dataclass(frozen=True, slots=True)
class TriggerJob:
    now_ms: int
    job_id: str
    #: the proposer's ``[limits] max_pending_runs`` (0: no quota)
    max_pending: int = 0
    request_id: str = ""


@command(
    "cancel_run",
    lambda c: _rid({"run_id": c.run_id}, c),
    lambda p, now: CancelRun(now, str(p["run_id"]), _rid_of(p)),
)
@dataclass(frozen=True, slots=True)
class CancelRun:
    now_ms: int
    run_id: str
    request_id: str = ""


@command(
    "retry_run",
    lambda c: _with_quota(_rid({"run_id": c.run_id, "by": c.requested_by}, c), "qp", c.max_pending),
    lambda p, now: RetryRun(now, str(p["run_id"]), str(p.get("by", "")), _quota(p, "qp"), _rid_of(p)),
    since=3,
)
@dataclass(frozen=True, slots=True)
class RetryRun:
    """A DEAD_LETTER, FAILED or CANCELLED run becomes PENDING again with a fresh attempt budget.
    ``requested_by``: who asked (the caller's token name, if known), for the run's explanation."""

    now_ms: int
    run_id: str
    requested_by: str = ""
    #: the proposer's ``[limits] max_pending_runs`` (0: no quota)
    max_pending: int = 0
    request_id: str = ""


@command(
    "fire",
    lambda c: _fire_proposer(
        _with_quota(
            {"items": [list(i) for i in c.items], "look": c.lookahead_ms, "mis": c.misfire_threshold_ms}, "qp", c.max_pending
        ),
        c,
    ),
    lambda p, now: Fire(
        now,
        tuple((str(j), int(t)) for j, t in _seq(p["items"])),
        int(p["look"]),
        int(p["mis"]),
        _quota(p, "qp"),
        str(p.get("node", "")),
        int(p.get("term", 0)),
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
    #: the proposing leader's node id and Raft term (for the runs' explanations; "" and 0: not said)
    node_id: str = ""
    term: int = 0


def _fire_proposer(plain: Plain, cmd: Fire) -> Plain:
    if cmd.node_id:
        plain["node"] = cmd.node_id
    if cmd.term:
        plain["term"] = cmd.term
    return plain


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
    lambda c: {"node": c.node_id, "ver": c.version, "fmt": c.command_format, **({"raft": c.raft} if c.raft else {})},
    lambda p, now: NodeInfo(now, str(p["node"]), str(p["ver"]), int(p["fmt"]), str(p.get("raft", ""))),
)
@dataclass(frozen=True, slots=True)
class NodeInfo:
    """Proposed by each node once it runs: which raftsched version it is and which command format it
    understands (kept in the state, shown by GetClusterStatus, checked before a format change), and
    the Raft address it answers on (absent in entries from before it was sent)."""

    now_ms: int
    node_id: str
    version: str
    command_format: int
    raft: str = ""


Command = Union[
    NodeInfo,
    SeedMembers,
    AddMember,
    RemoveMember,
    FinishMemberChange,
    SetClusterFormat,
    CreateJob,
    UpdateJob,
    PauseJob,
    ResumeJob,
    DeleteJob,
    TriggerJob,
    CancelRun,
    RetryRun,
    Fire,
    Barrier,
    AcquireLeases,
    RenewLeases,
    CompleteRun,
    ExpireLeases,
    GraceLeases,
    PruneHistory,
]


def decode(data: bytes) -> Command:
    """The command in ``data``; ``UnsupportedCommand`` or ``CommandFormatError`` (see ``command_registry``)."""
    cmd: Command = _registry.decode(data)
    return cmd
