"""The state as one blob: every record's tuple (``layout``) in one ``marshal`` body, versioned by ``FORMAT``.

What ``JobStateMachine.snapshot()`` writes and ``restore()`` reads: tools and
tests compare states with it, and it is the state inside a snapshot file
written by a version that kept its state in memory (which a node still
installs). A node's own snapshots are copies of its store
(``raftsched.raft.snapshotter``). Snapshots hold every job and run, so their
encoding decides how long a restore takes: JSON with dicts cost ~60 us a job
to read back; positional tuples through ``marshal`` cost a few.
"""

from __future__ import annotations

import marshal
from typing import Any, Iterable, NamedTuple

from raftsched.cluster.domain.model import Job, Run
from raftsched.cluster.fsm.layout import (
    MARSHAL_VERSION,
    NO_MEMBERSHIP,
    Decoder,
    Members,
    Membership,
    job_to_tuple,
    members_from_plain,
    members_to_plain,
    membership_from_plain,
    membership_to_plain,
    run_from_tuple,
    run_to_tuple,
)

FORMAT = 4
#: formats this code reads: 2 (before members' versions were kept), 3 (before the membership) and 4
READABLE_FORMATS = (2, 3, 4)

#: an answered request: (request_id, fingerprint, kind, ref, expires_ms)
RequestRow = tuple[str, str, str, str, int]


def encode(
    now_ms: int,
    applied: int,
    jobs: Iterable[Job],
    runs: Iterable[Run],
    idempotency: dict[str, tuple[str, str]],
    members: Members | None = None,
    membership: Membership = NO_MEMBERSHIP,
    requests: list[RequestRow] | None = None,
    infos: list[tuple[str, tuple[Any, ...]]] | None = None,
    placed: dict[str, bytes] | None = None,
) -> bytes:
    """The body; ``requests`` (answered request ids, ``raftsched.cluster.fsm.requests``), ``infos`` (jobs'
    ``JobInfo`` tuples, ``raftsched.cluster.fsm.job_info``) and ``placed`` (run_id -> the ``RANKED`` key of a run kept
    there: where its record is stored, so that a restore stores it alike) are trailing elements only when
    there are any: a body without reads as before in every version."""
    body: tuple[Any, ...] = (
        FORMAT,
        now_ms,
        applied,
        [job_to_tuple(j) for j in jobs],
        [run_to_tuple(r) for r in runs],
        [(k, v[0], v[1]) for k, v in idempotency.items()],
        members_to_plain(members or {}),
        membership_to_plain(membership),
    )
    if requests or infos or placed:
        body += ([tuple(r) for r in requests or ()],)
    if infos or placed:
        body += ([(job_id, tuple(t)) for job_id, t in infos or ()],)
    if placed:
        body += (sorted(placed.items()),)
    return marshal.dumps(body, MARSHAL_VERSION)


class Body(NamedTuple):
    now_ms: int
    applied: int
    jobs: list[Job]
    runs: list[Run]
    idempotency: dict[str, tuple[str, str]]
    members: Members
    membership: Membership
    requests: list[RequestRow]
    #: job_id -> its ``JobInfo`` tuple
    infos: dict[str, tuple[Any, ...]]
    #: run_id -> the ``RANKED`` key its record is kept under
    placed: dict[str, bytes]


def decode(data: bytes) -> Body:
    try:
        body = marshal.loads(data)
    except (EOFError, ValueError, TypeError) as exc:
        raise ValueError(f"snapshot body is not readable: {exc}") from exc
    if not isinstance(body, tuple) or not body or body[0] not in READABLE_FORMATS:
        found = body[0] if isinstance(body, tuple) and body else "?"
        raise ValueError(
            f"snapshot body format {found!r} is not supported (this node reads {READABLE_FORMATS}): upgrade this node"
        )
    _, now_ms, applied, jobs, runs, idem, *rest = body
    members = members_from_plain(rest[0]) if rest else {}
    membership = membership_from_plain(rest[1]) if len(rest) > 1 else NO_MEMBERSHIP
    requests: list[Any] = [tuple(r) for r in rest[2]] if len(rest) > 2 else []
    infos = {str(job_id): tuple(t) for job_id, t in rest[3]} if len(rest) > 3 else {}
    placed = {str(run_id): bytes(key) for run_id, key in rest[4]} if len(rest) > 4 else {}
    dec = Decoder()
    return Body(
        now_ms,
        applied,
        [dec.job(t) for t in jobs],
        [run_from_tuple(t) for t in runs],
        {k: (j, fp) for k, j, fp in idem},
        members,
        membership,
        requests,
        infos,
        placed,
    )
