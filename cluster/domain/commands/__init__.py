"""Commands of the job state machine and their versioned encoding in the Raft log: the one module callers import.

A command is a small frozen dataclass of plain values. The proposer stamps
``now_ms`` (its clock) into every command before replication: the state
machine never reads a clock. The wire form (``wire``) is UTF-8 JSON
``{"op": <name>, ...fields, "v": <format>, "now": <ms>}`` where ``v`` is the
command format that introduced the command: entries of the commands an older
node knows keep the format it knows. Each command's fields are one table
beside its class (``@command(op, fields, since)``).

By who proposes them: ``jobs`` (a client's calls), ``leases`` (executors,
and the leader's expiries), ``leader`` (fire, prune, barrier),
``membership`` (members and the command format).

Formats (``FORMAT_VERSION`` is the newest this code understands):

* 1 — every job, run and lease command, ``barrier`` and ``node_info``.
* 2 — membership (``member_seed``, ``member_add``, ``member_remove``,
  ``member_done``) and ``cluster_format``; with it, today's cron rules
  (format 1's are ``raftsched.cluster.domain.schedule.legacy``).
* 3 — ``retry_run``; a ``request_id`` ("rid") on the mutating commands (an
  entry carrying one is format 3: ``command_format``); with it, runs record
  their attempts and steps (``raftsched.cluster.domain.run_history``).
  ``fire`` may name its proposer ("node") and Raft term ("term"): optional
  keys, read only for the steps.
* 4 — an executor's verdicts and heartbeats: ``complete`` may say the failure
  is not retryable ("nr") or when to retry ("ra", ms); ``renew`` may carry
  heartbeat details per lease ("hb"). An entry that fills one is format 4
  (``Field.since``). With it, a completion's ``log_uri`` is checked in apply
  against the attempt's own place too.
* 5 — ``backfill_job``; a spec's bounds, exceptions and labels
  (``JobSpec.start_ms`` ... ``labels``: an entry with a spec that sets one is
  format 5), ``pause_job``'s note and until, ``trigger_job``'s payload;
  ``expire_pending`` (a run PENDING past its job's ``pending_ttl`` ends
  EXPIRED); with it, each job's info (``raftsched.cluster.fsm.job_info``).
* 6 — no new command: with it, the state keeps the record of each run of
  a job with a priority (fired, triggered or backfilled from then on) in
  the order grants take runs (``raftsched.cluster.fsm.store.Table.RANKED``),
  so an older node, which cannot read that layout, stops at the switch; and
  an ``update_job`` that changes how a job's runs are granted re-indexes
  the runs it has.
* 7 — no new command: with it, every new run (of priority 0 too) is kept
  in grant order, as 6 keeps those of a job with a priority.

``decode`` raises ``UnsupportedCommand`` for an entry this node cannot
understand, which stops the node rather than let its replica diverge, and
``CommandFormatError`` for a malformed one (a rejected result). A newer
format is only proposed once the cluster switched to it
(``SetClusterFormat``, committed by the leader once every member reported,
through ``NodeInfo``, that it understands it), and the state machine refuses
a command newer than the cluster's format.

One Raft entry may carry many fires (``Fire.items``): batching is how the
leader keeps up with thousands of due instants per second.

Adding a command is its class with ``@command(op, fields, since)`` in the
module of who proposes it, a line in ``Command`` below, and its handler in
the state machine's table (``raftsched.cluster.fsm.machine.HANDLERS``; a
unit test checks every command has one). A new command is a new format:
``since`` = ``FORMAT_VERSION + 1``, raise ``wire.FORMAT_VERSION`` and add its
line above; the leader starts using it once every member understands it.
``op`` and the plain keys are the log's wire format: never rename them (an
``optional`` or ``omitted`` field keeps old entries readable and needs no new
format as long as every node reads it alike; a field that changes what apply
does is ``omitted(..., since=FORMAT_VERSION + 1)``, so that an older node
stops rather than ignore it; tests/unit/test_command_bytes.py pins every
kind's bytes).
"""

from __future__ import annotations

from typing import Union

from raftsched.cluster.domain.commands import wire
from raftsched.cluster.domain.commands.jobs import (
    BackfillJob,
    CancelRun,
    CreateJob,
    DeleteJob,
    PauseJob,
    ResumeJob,
    RetryRun,
    TriggerJob,
    UpdateJob,
)
from raftsched.cluster.domain.commands.leader import Barrier, Fire, PruneHistory
from raftsched.cluster.domain.commands.leases import (
    AcquireLeases,
    CompleteRun,
    ExpireLeases,
    ExpirePending,
    GraceLeases,
    RenewLeases,
)
from raftsched.cluster.domain.commands.membership import (
    AddMember,
    FinishMemberChange,
    NodeInfo,
    RemoveMember,
    SeedMembers,
    SetClusterFormat,
)
from raftsched.cluster.domain.commands.wire import (
    FORMAT_VERSION,
    REQUEST_ID_FORMAT,
    STATE_ONLY_FORMATS,
    VERDICT_FORMAT,
    CommandFormatError,
    UnsupportedCommand,
    command_format,
    encode,
    field_formats,
    format_of,
    registered_commands,
    request_fingerprint,
)

__all__ = [
    "FORMAT_VERSION",
    "REQUEST_ID_FORMAT",
    "STATE_ONLY_FORMATS",
    "VERDICT_FORMAT",
    "AcquireLeases",
    "AddMember",
    "BackfillJob",
    "Barrier",
    "CancelRun",
    "Command",
    "CommandFormatError",
    "CompleteRun",
    "CreateJob",
    "DeleteJob",
    "ExpireLeases",
    "ExpirePending",
    "FinishMemberChange",
    "Fire",
    "GraceLeases",
    "NodeInfo",
    "PauseJob",
    "PruneHistory",
    "RemoveMember",
    "RenewLeases",
    "ResumeJob",
    "RetryRun",
    "SeedMembers",
    "SetClusterFormat",
    "TriggerJob",
    "UnsupportedCommand",
    "UpdateJob",
    "command_format",
    "decode",
    "encode",
    "field_formats",
    "format_of",
    "registered_commands",
    "request_fingerprint",
    "wire",
]

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
    BackfillJob,
    CancelRun,
    RetryRun,
    Fire,
    Barrier,
    AcquireLeases,
    RenewLeases,
    CompleteRun,
    ExpireLeases,
    ExpirePending,
    GraceLeases,
    PruneHistory,
]


def decode(data: bytes) -> Command:
    """The command in ``data``; ``UnsupportedCommand`` or ``CommandFormatError`` (see ``wire``)."""
    cmd: Command = wire.decode(data)
    return cmd
