"""The state machine's snapshot body: plain tuples in ``marshal`` format 2.

Snapshots hold every job and run, so their encoding decides how long a
restart takes: JSON with dicts cost ~60 us a job to read back; positional
tuples through ``marshal`` (plain values only: ints, strings, bytes, floats,
bools, None, tuples, lists, dicts — no code, no classes) cost a few. The
record layouts below are versioned by ``FORMAT``; enum values and retry
policies are interned while decoding (most jobs share a handful).
"""

from __future__ import annotations

import marshal
import operator
from typing import Any, NamedTuple

from raftsched.cluster.domain.model import (
    DEFAULT_FAILED_HISTORY_LIMIT,
    After,
    At,
    ConcurrencyPolicy,
    Cron,
    Every,
    Job,
    JobSpec,
    JobStatus,
    Member,
    MemberChange,
    MisfirePolicy,
    RetryPolicy,
    Run,
    RunStatus,
    Schedule,
)

FORMAT = 4
#: formats this code reads: 2 (before members' versions were kept), 3 (before the membership) and 4
READABLE_FORMATS = (2, 3, 4)
#: version 2: no back-references, so equal states always encode to equal bytes
MARSHAL_VERSION = 2

_JOB_STATUS = {s.value: s for s in JobStatus}
_RUN_STATUS = {s.value: s for s in RunStatus}
_CONC = {p.value: p for p in ConcurrencyPolicy}
_MISFIRE = {p.value: p for p in MisfirePolicy}


def _sched_to(s: Schedule) -> tuple[Any, ...]:
    if isinstance(s, At):
        return (0, s.at_ms)
    if isinstance(s, After):
        return (1, s.after_ms)
    if isinstance(s, Every):
        return (2, s.every_ms)
    return (3, s.expression, s.timezone)


def _sched_from(t: tuple[Any, ...]) -> Schedule:
    kind = t[0]
    if kind == 2:
        return Every(t[1])
    if kind == 0:
        return At(t[1])
    if kind == 1:
        return After(t[1])
    if kind == 3:
        return Cron(t[1], t[2])
    raise ValueError(f"unknown schedule kind {kind!r} in snapshot")


def job_to_tuple(j: Job) -> tuple[Any, ...]:
    return job_head(j) + spec_part(j.spec)


def job_head(j: Job) -> tuple[Any, ...]:
    """A job tuple's fields 0-8: what a job adds to its spec (``job_to_tuple``)."""
    return (
        j.job_id, j.status._value_, j.anchor_ms, j.cursor_ms, j.next_fire_ms, j.created_ms, j.updated_ms,
        j.idempotency_key, j.fire_count,
    )  # fmt: skip


def spec_part(s: JobSpec) -> tuple[Any, ...]:
    """A job tuple's fields 9 on: its spec (``Decoder.spec`` reads them back)."""
    r = s.retry
    return (
        s.name, _sched_to(s.schedule), s.queue, s.type, s.payload,
        (r.max_attempts, r.initial_backoff_ms, r.max_backoff_ms, r.multiplier, r.jitter),
        s.lease_ttl_ms, s.timeout_ms, s.concurrency._value_, s.misfire._value_, s.catchup_window_ms,
        s.history_limit, s.history_ttl_ms,
    ) + (() if s.failed_history_limit == DEFAULT_FAILED_HISTORY_LIMIT else (s.failed_history_limit,))  # fmt: skip


class Decoder:
    """Interns the small values many records share: retry policies, and whole specs (immutable) up to a bound."""

    #: specs kept for reuse (their payloads up to ``_SHARED_PAYLOAD`` bytes); the cache starts over when full
    _SPECS = 4096
    _SHARED_PAYLOAD = 4096

    def __init__(self) -> None:
        self._retries: dict[tuple[Any, ...], RetryPolicy] = {}
        self._specs: dict[tuple[Any, ...], JobSpec] = {}

    def retry(self, t: tuple[Any, ...]) -> RetryPolicy:
        key = tuple(t)
        policy = self._retries.get(key)
        if policy is None:
            policy = self._retries[key] = RetryPolicy(*key)
        return policy

    def spec(self, t: tuple[Any, ...]) -> JobSpec:
        """The spec of a job tuple's fields 9 on."""
        shared = len(t[13]) <= self._SHARED_PAYLOAD
        if shared:
            key = t[9:]
            spec = self._specs.get(key)
            if spec is not None:
                return spec
        name, sched, queue, typ, payload, retry, ttl, timeout, conc, misfire, catchup, hlimit, httl, *more = t[9:]
        flimit = more[0] if more else DEFAULT_FAILED_HISTORY_LIMIT  # stored only when not the default
        spec = JobSpec(
            name, _sched_from(sched), queue, typ, payload, self.retry(retry), ttl, timeout,
            _CONC[conc], _MISFIRE[misfire], catchup, hlimit, httl, flimit,
        )  # fmt: skip
        if shared:
            if len(self._specs) >= self._SPECS:
                self._specs.clear()
            self._specs[key] = spec
        return spec

    def job(self, t: tuple[Any, ...], spec: JobSpec | None = None) -> Job:
        """The job of tuple ``t``; ``spec``: its spec, already decoded from ``t[9:]`` (by the caller's cache)."""
        job_id, status, anchor, cursor, nxt, created, updated, idem, fires = t[:9]
        if spec is None:
            spec = self.spec(t)
        return Job(job_id, spec, _JOB_STATUS[status], anchor, cursor, nxt, created, updated, idem, fires)


_RUN_FIELDS = (
    "run_id", "job_id", "queue", "scheduled_ms", "fired_ms", "attempt", "executor_id", "lease_id",
    "fencing_token", "lease_expires_ms", "started_ms", "finished_ms", "result", "error", "log_uri", "manual",
    "skipped_count", "skipped_until_ms", "cancel_requested", "not_before_ms",
)  # fmt: skip
_RUN_VALUES = operator.attrgetter(*_RUN_FIELDS)


def run_to_tuple(r: Run) -> tuple[Any, ...]:
    """The run's 21 fields, then its history (attempts, steps, budget) only when it has one: a run recorded
    before the cluster's format 3 encodes exactly as it always did (old and new nodes hold the same bytes)."""
    values: tuple[Any, ...] = _RUN_VALUES(r)
    if not (r.steps_raw or r.attempts_raw or r.budget_base or r.steps_dropped or r.attempts_dropped):
        return (r.status._value_,) + values
    return (r.status._value_,) + values + (r.attempts_raw, r.attempts_dropped, r.steps_raw, r.steps_dropped, r.budget_base)


def run_from_tuple(t: tuple[Any, ...]) -> Run:
    """A ``Run`` of ``run_to_tuple``'s layout (each slot set directly: this runs for every run a command reads)."""
    run = Run.__new__(Run)
    run.status = _RUN_STATUS[t[0]]
    (run.run_id, run.job_id, run.queue, run.scheduled_ms, run.fired_ms, run.attempt, run.executor_id, run.lease_id,
     run.fencing_token, run.lease_expires_ms, run.started_ms, run.finished_ms, run.result, run.error, run.log_uri,
     run.manual, run.skipped_count, run.skipped_until_ms, run.cancel_requested, run.not_before_ms) = t[1:21]  # fmt: skip
    if len(t) > 21:  # a run with a history (``run_to_tuple``), kept as the plain tuples it is stored as
        run.attempts_raw, run.attempts_dropped, run.steps_raw, run.steps_dropped, run.budget_base = t[21:26]
    else:
        run.attempts_raw, run.attempts_dropped, run.steps_raw, run.steps_dropped, run.budget_base = (), 0, (), 0, 0
    return run


Members = dict[str, tuple[str, int]]


class Membership(NamedTuple):
    """The membership part of the state (``raftsched.cluster.domain.membership_rules``); format 4 on."""

    roster: list[Member]
    change: MemberChange | None
    removed: list[Member]
    cluster_format: int
    #: node id -> the Raft address it reported with its NodeInfo
    rafts: dict[str, str]


#: what a snapshot from before format 4 holds: no members recorded, command format 1
NO_MEMBERSHIP = Membership([], None, [], 1, {})


def membership_to_plain(m: Membership) -> tuple[Any, ...]:
    change = None if m.change is None else (m.change.action, tuple(m.change.member), m.change.begun_at)
    return (
        sorted(tuple(x) for x in m.roster), change, sorted(tuple(x) for x in m.removed), m.cluster_format,
        sorted(m.rafts.items()),
    )  # fmt: skip


def membership_from_plain(t: tuple[Any, ...]) -> Membership:
    roster, change, removed, fmt, rafts = t
    ch = None if change is None else MemberChange(change[0], Member(*change[1]), change[2])
    return Membership([Member(*x) for x in roster], ch, [Member(*x) for x in removed], fmt, dict(rafts))


def encode(
    now_ms: int,
    applied: int,
    jobs: Any,
    runs: Any,
    idempotency: dict[str, tuple[str, str]],
    members: Members | None = None,
    membership: Membership = NO_MEMBERSHIP,
    requests: list[tuple[str, str, str, str, int]] | None = None,
) -> bytes:
    """The body; ``requests`` (answered request ids, ``request_rules``) is a trailing element only when there
    are any: a body without reads as before in every version."""
    body: tuple[Any, ...] = (
        FORMAT,
        now_ms,
        applied,
        [job_to_tuple(j) for j in jobs],
        [run_to_tuple(r) for r in runs],
        [(k, v[0], v[1]) for k, v in idempotency.items()],
        sorted((node, ver, fmt) for node, (ver, fmt) in (members or {}).items()),
        membership_to_plain(membership),
    )
    if requests:
        body += ([tuple(r) for r in requests],)
    return marshal.dumps(body, MARSHAL_VERSION)


class Body(NamedTuple):
    now_ms: int
    applied: int
    jobs: list[Job]
    runs: list[Run]
    idempotency: dict[str, tuple[str, str]]
    members: Members
    membership: Membership
    #: (request_id, fingerprint, kind, ref, expires_ms) of answered requests
    requests: list[tuple[str, str, str, str, int]]


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
    members = {node: (ver, fmt) for node, ver, fmt in rest[0]} if rest else {}
    membership = membership_from_plain(rest[1]) if len(rest) > 1 else NO_MEMBERSHIP
    requests = [tuple(r) for r in rest[2]] if len(rest) > 2 else []
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
    )
