"""The values of the state's tables: each record as a positional tuple of plain values, in ``marshal`` version 2.

Plain values only (ints, strings, bytes, floats, bools, None, tuples, lists,
dicts: no code, no classes); version 2 has no back-references, so equal
records give equal bytes on every node. The same tuples make the state's
blob (``body``). The layouts, by position (never reorder them: they are on
every node's disk):

* a job: ``JOB_HEAD`` (what a job adds to its spec: id, status, anchor,
  cursor, next instant, created, updated, idempotency key, fire count), then
  ``JOB_SPEC`` (name, schedule, queue, type, payload, retry, lease TTL,
  timeout, concurrency, misfire, catchup window, history limit and TTL, and
  the failed-history limit only when it is not the default);
* a run: ``RUN_STATUS``, ``RUN_FIELDS`` (``RUN_FIELD_NAMES``), then
  ``RUN_HISTORY`` (attempts, attempts dropped, steps, steps dropped, budget
  base) only for a run that has one: a run recorded before the cluster's
  command format 3 encodes exactly as it always did;
* the small state's values in ``meta``: ints, the counts, the membership.

Enum values and retry policies are interned while decoding (most jobs share
a handful): ``Decoder``.
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
from raftsched.cluster.domain.spec_codec import extras_from_plain, extras_to_plain, has_extras
from raftsched.cluster.fsm.cache import spec_weight

#: version 2: no back-references, so equal states always encode to equal bytes
MARSHAL_VERSION = 2

#: a job tuple's fields: what a job adds to its spec (``job_head``), then its spec (``spec_part``)
JOB_HEAD = slice(0, 9)
JOB_SPEC = slice(9, None)
#: the job id, first of the head
JOB_ID = 0
#: where the payload sits in a job's spec fields
SPEC_PAYLOAD = 4
#: a run tuple's fields: its status, its 20 fields (``RUN_FIELD_NAMES``), then its history if it has one
RUN_STATUS = 0
RUN_FIELDS = slice(1, 21)
RUN_HISTORY = slice(21, 26)
#: then what only some runs have (``Run.extra``), only when it has any
RUN_EXTRA = 26
RUN_FIELD_NAMES = (
    "run_id", "job_id", "queue", "scheduled_ms", "fired_ms", "attempt", "executor_id", "lease_id",
    "fencing_token", "lease_expires_ms", "started_ms", "finished_ms", "result", "error", "log_uri", "manual",
    "skipped_count", "skipped_until_ms", "cancel_requested", "not_before_ms",
)  # fmt: skip
_RUN_VALUES = operator.attrgetter(*RUN_FIELD_NAMES)

_JOB_STATUS = {s.value: s for s in JobStatus}
_RUN_STATUS = {s.value: s for s in RunStatus}
_CONC = {p.value: p for p in ConcurrencyPolicy}
_MISFIRE = {p.value: p for p in MisfirePolicy}


# ------------------------------------------------------------------ jobs


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
    """A job tuple's ``JOB_HEAD``."""
    return (
        j.job_id, j.status._value_, j.anchor_ms, j.cursor_ms, j.next_fire_ms, j.created_ms, j.updated_ms,
        j.idempotency_key, j.fire_count,
    )  # fmt: skip


def spec_part(s: JobSpec) -> tuple[Any, ...]:
    """A job tuple's ``JOB_SPEC`` (``Decoder.spec`` reads them back)."""
    r = s.retry
    return (
        s.name, _sched_to(s.schedule), s.queue, s.type, s.payload,
        (r.max_attempts, r.initial_backoff_ms, r.max_backoff_ms, r.multiplier, r.jitter),
        s.lease_ttl_ms, s.timeout_ms, s.concurrency._value_, s.misfire._value_, s.catchup_window_ms,
        s.history_limit, s.history_ttl_ms,
    ) + _spec_tail(s)  # fmt: skip


def _spec_tail(s: JobSpec) -> tuple[Any, ...]:
    """What a spec stores after its first 13 fields: its failed_history_limit when it is not the default, and its
    format 5 fields (as in the log's plain form, in tuples) when it sets any: most specs store nothing more."""
    if not has_extras(s):
        return () if s.failed_history_limit == DEFAULT_FAILED_HISTORY_LIMIT else (s.failed_history_limit,)
    return (s.failed_history_limit, _frozen(extras_to_plain(s)))


def _frozen(value: Any) -> Any:
    """A plain value with its dicts and lists as sorted (key, value) tuples and tuples: hashable, and equal values
    alike (a spec is interned by its stored fields)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _thawed(value: Any) -> Any:
    """``_frozen`` undone for ``extras_from_plain``: pairs tuples back to dicts where the plain form has dicts."""
    if isinstance(value, tuple):
        if value and all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) for v in value):
            return {k: _thawed(v) for k, v in value}
        return [_thawed(v) for v in value]
    return value


def _extras(t: tuple[Any, ...]) -> dict[str, Any]:
    """The keyword arguments of a stored spec's format 5 fields (``_spec_tail``)."""
    return extras_from_plain({k: _thawed(v) for k, v in t})


#: ``JobSpec``'s fields after ``failed_history_limit`` (its format 5 fields), and their defaults
_EXTRA_FIELDS = JobSpec._fields[JobSpec._fields.index("failed_history_limit") + 1 :]
_DEFAULT_TAIL = tuple(JobSpec._field_defaults[f] for f in _EXTRA_FIELDS)
#: a ``JobSpec`` from all its fields in order: what ``JobSpec._make`` does, without its length check
_new_spec = tuple.__new__


def _tail(kw: dict[str, Any]) -> tuple[Any, ...]:
    """The format 5 fields ``kw`` as values of ``_EXTRA_FIELDS`` in order."""
    unknown = kw.keys() - set(_EXTRA_FIELDS)
    if unknown:
        raise TypeError(f"JobSpec has no field(s) {sorted(unknown)}")
    return tuple(kw.get(f, d) for f, d in zip(_EXTRA_FIELDS, _DEFAULT_TAIL))


class Decoder:
    """Decodes jobs, interning what many share: retry policies, and whole specs (immutable) by their stored fields.

    Interned values are found by their content, so they never go stale; specs are interned only with payloads
    up to ``_SHARED_PAYLOAD`` bytes, ``_SPECS`` of them weighing ``_SPEC_BYTES`` at most (then it starts over),
    and the newer fields' values ``_EXTRAS`` of them. Jobs of one shape spread over two queues, ten priorities and a
    thousand concurrency keys are 20,000 forms: a table that holds fewer starts over every few thousand reads and
    decodes each such spec again (a new spec kept alive by the cache each time, for the collector to walk), up
    to ~20 us a grant of such runs on every replica. The weight bound is what bounds memory (~21,000 forms of
    ~1.1 KiB); the count only bounds the table's size."""

    _SPECS = 32768
    #: the most the interned specs may weigh (``spec_weight`` each: ~1 KiB and their name and payload)
    _SPEC_BYTES = 24 << 20
    _EXTRAS = 16384
    _SHARED_PAYLOAD = 4096
    #: how many written specs ``intern_written`` remembers (then it starts over), as bits of their hashes in a
    #: table of ``_WRITTEN_BITS`` (128 KiB: a spec taken for seen by a shared bit is interned at its first write,
    #: which costs its table entry and nothing else)
    _WRITTEN = 65536
    _WRITTEN_BITS = 1 << 20

    def __init__(self) -> None:
        self._retries: dict[tuple[Any, ...], RetryPolicy] = {}
        #: stored fields -> (the same fields, first seen: what every job of the form keeps, and the spec)
        self._specs: dict[tuple[Any, ...], tuple[tuple[Any, ...], JobSpec]] = {}
        self._spec_bytes = 0
        self._extras: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        #: bits of the hashes of the stored fields of specs written once (``intern_written``)
        self._written = bytearray(self._WRITTEN_BITS >> 3)
        self._written_count = 0

    def retry(self, t: tuple[Any, ...]) -> RetryPolicy:
        key = tuple(t)
        policy = self._retries.get(key)
        if policy is None:
            policy = self._retries[key] = RetryPolicy(*key)
        return policy

    def spec(self, t: tuple[Any, ...]) -> JobSpec:
        """The spec of a job tuple (its ``JOB_SPEC``)."""
        return self.spec_form(t)[1]

    def spec_form(self, t: tuple[Any, ...]) -> tuple[tuple[Any, ...], JobSpec, bool]:
        """A job tuple's stored spec fields and spec, and whether they are interned (shared by every job of the
        form: the same two objects each time, as long as the table holds them)."""
        part = t[JOB_SPEC]
        shared = len(part[SPEC_PAYLOAD]) <= self._SHARED_PAYLOAD
        if shared:
            form = self._specs.get(part)
            if form is not None:
                return form[0], form[1], True
        name, sched, queue, typ, payload, retry, ttl, timeout, conc, misfire, catchup, hlimit, httl, *more = part
        flimit = more[0] if more else DEFAULT_FAILED_HISTORY_LIMIT  # stored only when not the default
        # built from its fields in order (a keyword call of a 30-field NamedTuple costs several times more)
        spec = _new_spec(JobSpec, (
            name, _sched_from(sched), queue, typ, payload, self.retry(retry), ttl, timeout,
            _CONC[conc], _MISFIRE[misfire], catchup, hlimit, httl, flimit,
        ) + (self.tail(more[1]) if len(more) > 1 else _DEFAULT_TAIL))  # fmt: skip
        if shared:
            self._intern(part, spec)
        return part, spec, shared

    def _intern(self, part: tuple[Any, ...], spec: JobSpec) -> tuple[tuple[Any, ...], JobSpec]:
        """``(part, spec)`` as the form of the stored fields ``part`` (the table starts over when full)."""
        weight = spec_weight(spec)
        if len(self._specs) >= self._SPECS or self._spec_bytes + weight > self._SPEC_BYTES:
            self._specs.clear()
            self._spec_bytes = 0
        form = self._specs[part] = (part, spec)
        self._spec_bytes += weight
        return form

    def intern_written(self, part: tuple[Any, ...], spec: JobSpec) -> tuple[tuple[Any, ...], JobSpec] | None:
        """The interned form of a spec a command wrote (its stored fields ``part``, as ``spec_part`` made them), as
        ``spec_form`` gives it when the job is read back; None for a spec seen for the first time (or not shared: a
        large payload, fields that cannot be a key). A form is interned from its second job written: so jobs
        created alike are kept as their form's entries from the start, as jobs read back are, while a spec of its
        own (most of them) is not kept alive by the table once the cache forgets it (only a bit of its hash is
        remembered: ``_WRITTEN_BITS``)."""
        if len(part[SPEC_PAYLOAD]) > self._SHARED_PAYLOAD:
            return None
        try:
            form = self._specs.get(part)
        except TypeError:  # not hashable: spec_form could not intern it either
            return None
        if form is not None:
            return form
        at = hash(part) & (self._WRITTEN_BITS - 1)
        byte, bit = at >> 3, 1 << (at & 7)
        if not self._written[byte] & bit:
            if self._written_count >= self._WRITTEN:
                self._written = bytearray(self._WRITTEN_BITS >> 3)
                self._written_count = 0
            self._written[byte] |= bit
            self._written_count += 1
            return None
        return self._intern(part, spec)

    def tail(self, t: tuple[Any, ...]) -> tuple[Any, ...]:
        """A stored spec's format 5 fields as the values of ``JobSpec``'s fields after ``failed_history_limit``, in
        order (defaults where it sets none), interned by their stored form (jobs share priorities, keys, labels
        and rules far more often than names): never stale (found by content). ``_EXTRAS`` of them, then it starts
        over."""
        try:
            tail = self._extras.get(t)
        except TypeError:  # not hashable (no spec of this version stores such fields): decoded each time
            return _tail(_extras(t))
        if tail is None:
            tail = _tail(_extras(t))
            if len(self._extras) >= self._EXTRAS:
                self._extras.clear()
            self._extras[t] = tail
        return tail

    def job(self, t: tuple[Any, ...], spec: JobSpec | None = None) -> Job:
        """The job of tuple ``t``; ``spec``: its spec, already decoded from ``t[JOB_SPEC]`` (by the caller's cache)."""
        job_id, status, anchor, cursor, nxt, created, updated, idem, fires = t[JOB_HEAD]
        if spec is None:
            spec = self.spec(t)
        return Job(job_id, spec, _JOB_STATUS[status], anchor, cursor, nxt, created, updated, idem, fires)

    def decode(self, raw: bytes) -> Job:
        """A job from its stored bytes."""
        return self.job(marshal.loads(raw))


# ------------------------------------------------------------------ runs


def run_to_tuple(r: Run) -> tuple[Any, ...]:
    """The run's status and fields, then its history (``RUN_HISTORY``) only when it has one."""
    values: tuple[Any, ...] = _RUN_VALUES(r)
    if not (r.steps_raw or r.attempts_raw or r.budget_base or r.steps_dropped or r.attempts_dropped or r.extra):
        return (r.status._value_,) + values
    history = (r.attempts_raw, r.attempts_dropped, r.steps_raw, r.steps_dropped, r.budget_base)
    return (r.status._value_,) + values + history + ((r.extra,) if r.extra else ())


def run_from_tuple(t: tuple[Any, ...]) -> Run:
    """A ``Run`` of ``run_to_tuple``'s layout (each slot set directly: this runs for every run a command reads)."""
    run = Run.__new__(Run)
    run.status = _RUN_STATUS[t[RUN_STATUS]]
    (run.run_id, run.job_id, run.queue, run.scheduled_ms, run.fired_ms, run.attempt, run.executor_id, run.lease_id,
     run.fencing_token, run.lease_expires_ms, run.started_ms, run.finished_ms, run.result, run.error, run.log_uri,
     run.manual, run.skipped_count, run.skipped_until_ms, run.cancel_requested, run.not_before_ms) = t[RUN_FIELDS]  # fmt: skip
    if len(t) > RUN_HISTORY.start:  # a run with a history, kept as the plain tuples it is stored as
        run.attempts_raw, run.attempts_dropped, run.steps_raw, run.steps_dropped, run.budget_base = t[RUN_HISTORY]
        run.extra = t[RUN_EXTRA] if len(t) > RUN_EXTRA else ()
    else:
        run.attempts_raw, run.attempts_dropped, run.steps_raw, run.steps_dropped, run.budget_base = (), 0, (), 0, 0
        run.extra = ()
    return run


# ------------------------------------------------------------------ membership

Members = dict[str, tuple[str, int]]


class Membership(NamedTuple):
    """The membership part of the state (``raftsched.cluster.fsm.membership``)."""

    roster: list[Member]
    change: MemberChange | None
    removed: list[Member]
    cluster_format: int
    #: node id -> the Raft address it reported with its NodeInfo
    rafts: dict[str, str]


#: what a state from before the membership holds: no members recorded, command format 1
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


def members_to_plain(members: Members) -> list[tuple[str, str, int]]:
    return sorted((node, ver, fmt) for node, (ver, fmt) in members.items())


def members_from_plain(rows: Any) -> Members:
    return {node: (ver, fmt) for node, ver, fmt in rows}


# ------------------------------------------------------------------ stored bytes


def encode_job(job: Job) -> bytes:
    return marshal.dumps(job_to_tuple(job), MARSHAL_VERSION)


def encode_run(run: Run) -> bytes:
    return marshal.dumps(run_to_tuple(run), MARSHAL_VERSION)


def decode_run(raw: bytes) -> Run:
    return run_from_tuple(marshal.loads(raw))


def encode_idem(key: str, job_id: str, fingerprint: str) -> bytes:
    return marshal.dumps((key, job_id, fingerprint), MARSHAL_VERSION)


def decode_idem(raw: bytes) -> tuple[str, str, str]:
    key, job_id, fingerprint = marshal.loads(raw)
    return key, job_id, fingerprint


def encode_int(n: int) -> bytes:
    return marshal.dumps(n, MARSHAL_VERSION)


def decode_int(raw: bytes | None, default: int = 0) -> int:
    return default if raw is None else int(marshal.loads(raw))


def encode_plain(value: Any) -> bytes:
    """Plain values (ints, strings, tuples, lists) as marshal bytes."""
    return marshal.dumps(value, MARSHAL_VERSION)


def decode_plain(raw: bytes) -> Any:
    return marshal.loads(raw)


def encode_membership(
    members: Members,
    rafts: dict[str, str],
    roster: dict[str, Member],
    change: MemberChange | None,
    removed: dict[str, Member],
    cluster_format: int,
) -> bytes:
    membership = Membership(list(roster.values()), change, list(removed.values()), cluster_format, rafts)
    return marshal.dumps((members_to_plain(members), membership_to_plain(membership)), MARSHAL_VERSION)


def decode_membership(raw: bytes) -> tuple[Members, Membership]:
    members, membership = marshal.loads(raw)
    return members_from_plain(members), membership_from_plain(membership)
