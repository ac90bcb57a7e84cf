"""The scheduler's use cases in domain terms: what JobService does, without protobuf.

Each write validates its input, stamps ``now`` and proposes one command
(with the caller's ``request_id``, if any: ``raftsched.cluster.fsm.requests``;
while the cluster is below command format 3 the id is not sent, and a
retried call is then not deduplicated);
a create's idempotency key is stored under its spec's queue
(``raftsched.cluster.domain.idempotency_scope``: ``_keys_to_send``);
each read runs after a read barrier, lists and lookups of records in a read
transaction of the store (``Replica.read_records``: no lock that Raft
needs). Results come back as copies of the records, so callers never hold
live state. Refusals raise
``RejectedError``/``ValidationError``/``Unavailable``; ``raftsched.rpc.server.errors`` maps
them to gRPC status codes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, TypeVar

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.errors import RejectedError, ValidationError
from raftsched.cluster.domain.idempotency_scope import readable, scoped
from raftsched.cluster.domain.model import (
    Job,
    JobSpec,
    JobStatus,
    Run,
    RunStatus,
    Schedule,
    run_id_for,
)
from raftsched.cluster.domain.payloads import validate_payload
from raftsched.cluster.domain.results import AlreadyExists, FailedPrecondition, NotFound, ResourceExhausted
from raftsched.cluster.domain.schedule import explain_instant, job_schedule, next_fire, upcoming
from raftsched.cluster.domain.schedule.backfill import BackfillTooLarge, backfill_instants, backfill_run_id
from raftsched.cluster.domain.schedule.exceptions import skip_reason
from raftsched.cluster.domain.schedule.legacy import NEW_RULES_FORMAT
from raftsched.cluster.domain.spec_codec import has_extras, spec_fingerprint
from raftsched.cluster.domain.spec_extras import matches, parse_selector, validate_extras
from raftsched.cluster.domain.unsafe_text import check_text, first_unsafe
from raftsched.cluster.domain.validation import Limits, check_schedule, validate_spec
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.reader import RecordReader
from raftsched.cluster.node.active_runs import iter_active_runs
from raftsched.cluster.node.clock import Clock
from raftsched.cluster.node.explain import Explanation, explain
from raftsched.cluster.node.format_gate import FormatGate
from raftsched.cluster.node.page_tokens import PageTokens
from raftsched.cluster.node.ports import OutputReader
from raftsched.cluster.node.replica import Replica
from raftsched.cluster.node.run_output import RunOutput, read_run_output

DEFAULT_PAGE = 100
MAX_PAGE = lim.MAX_PAGE_SIZE
Item = TypeVar("Item")

#: items a list call examines per read transaction
SCAN_CHUNK = 2000
MAX_PREVIEW = lim.MAX_PREVIEW_COUNT
#: items in one CreateJobs call
MAX_CREATE_BATCH = lim.MAX_CREATE_BATCH


@dataclass(frozen=True, slots=True)
class Page:
    items: list
    next_token: str


@dataclass(frozen=True)
class Counts:
    runs: dict[RunStatus, int]  # by status
    jobs: int
    pending_by_queue: dict[str, int]  # queues with PENDING runs only
    #: node id -> (raftsched version, command format), as each node reported it
    members: dict[str, tuple[str, int]]
    #: jobs by status (kept ones: DELETED jobs are gone)
    jobs_by_status: dict[JobStatus, int] = field(default_factory=dict)


#: the longest note a pause takes
MAX_PAUSE_NOTE_CHARS = 512


def new_job_id(now_ms: int) -> str:
    """Job ids sort by creation time: 12 hex digits of milliseconds, then 8 random ones."""
    return f"j-{now_ms:012x}{os.urandom(4).hex()}"


def _may_look_up(key: str) -> bool:
    """A key worth looking up: one the request's checks will not refuse (those say why themselves)."""
    return bool(key) and len(key) <= lim.MAX_IDEMPOTENCY_KEY_CHARS and first_unsafe(key) is None


def _with_client_key(exc: RejectedError, sent_key: str) -> RejectedError:
    """An ALREADY_EXISTS that quotes the stored (queue-scoped) key, quoting the client's key and queue instead."""
    if not isinstance(exc.rejected, AlreadyExists) or not sent_key:
        return exc
    return RejectedError(AlreadyExists(readable(exc.rejected.message, sent_key)))


def _page_size(size: int) -> int:
    if size < 0:
        raise ValidationError(f"page_size {size} is negative")
    return min(size or DEFAULT_PAGE, MAX_PAGE)


class JobService:
    def __init__(
        self,
        replica: Replica,
        clock: Clock,
        limits: Limits,
        outputs: OutputReader,
        tokens: PageTokens | None = None,
        formats: FormatGate | None = None,
    ) -> None:
        self._replica = replica
        self._clock = clock
        self._limits = limits
        self._outputs = outputs
        self._tokens = tokens or PageTokens()
        #: what needs a newer command format than the cluster's (waiting while a brand-new cluster switches)
        self._formats = formats or FormatGate(replica)

    # -------------------------------------------------------------- writes

    def _rid(self, request_id: str) -> str:
        """The request id to send: checked; "" while the cluster cannot apply one yet (below format 3)."""
        lim.check_chars("request_id", request_id, lim.MAX_REQUEST_ID_CHARS)
        check_text("request_id", request_id)
        if not request_id or self._replica.read(lambda m: m.cluster_format, barrier=False) < c.REQUEST_ID_FORMAT:
            return ""
        return request_id

    def _create_command(self, spec: JobSpec, idempotency_key: str, now: int, request_id: str, sent_key: str) -> c.CreateJob:
        """``sent_key``: what ``_keys_to_send`` made of ``idempotency_key``."""
        lim.check_chars("idempotency_key", idempotency_key, lim.MAX_IDEMPOTENCY_KEY_CHARS)
        check_text("idempotency_key", idempotency_key)
        validate_spec(spec, self._limits)
        self._formats.check_spec(spec)
        rid = self._rid(request_id)
        return c.CreateJob(now, new_job_id(now), spec, sent_key, spec_fingerprint(spec), self._limits.max_jobs, rid)

    def _keys_to_send(self, wanted: list[tuple[str, str]]) -> list[str]:
        """The idempotency key each ``(queue, key)`` is sent as: the key scoped to its queue; or the key as it is
        when it was stored so before keys had queues and its job is in that queue (a create retried across the
        upgrade finds its job). Read on this node's applied state: such keys are only ever older entries."""

        def pick(m: JobStateMachine) -> list[str]:
            out = []
            for queue, key in wanted:
                known = m.idempotency.get(key) if _may_look_up(key) else None
                job = m.view.job(known[0]) if known is not None else None
                out.append(key if job is not None and job.spec.queue == queue else scoped(queue, key))
            return out

        if not any(key for _, key in wanted):
            return ["" for _ in wanted]
        return self._replica.read(pick, barrier=False)

    def _check_quota(self, count: Callable[[JobStateMachine], int], limit: int, message: str) -> None:
        """The proposer's early refusal, on this node's applied state (apply checks again, with the value
        in the command, so two nodes with different configs or a lagging follower decide nothing alone)."""
        if limit and self._replica.read(count, barrier=False) >= limit:
            raise RejectedError(ResourceExhausted(message))

    def _check_jobs_quota(self) -> None:
        limit = self._limits.max_jobs
        self._check_quota(
            lambda m: sum(m.job_counts.values()),
            limit,
            f"the cluster keeps its limit of jobs, [limits] max_jobs = {limit}: delete jobs or raise it",
        )

    def create_job(self, spec: JobSpec, idempotency_key: str = "", request_id: str = "") -> Job:
        sent = self._keys_to_send([(spec.queue, idempotency_key)])[0]
        cmd = self._create_command(spec, idempotency_key, self._clock.now_ms(), request_id, sent)
        if not idempotency_key and not cmd.request_id:  # a retried create with a key must still find its job
            self._check_jobs_quota()
        try:
            job = self._replica.execute(cmd)
        except RejectedError as exc:
            raise _with_client_key(exc, sent) from None
        assert isinstance(job, Job)
        return job

    def create_jobs(self, items: list[tuple[JobSpec, str, str] | Exception]) -> list[Job | Exception]:
        """Create many jobs in one go: each item is a ``(spec, idempotency_key, request_id)`` (or the error
        its conversion raised) and gets its job or its own error, as ``create_job`` would.
        The commands travel together (group commit), so a batch costs a few Raft entries."""
        if not items:
            raise ValidationError("no jobs to create: send at least one")
        lim.check_count("jobs", items, MAX_CREATE_BATCH, "split the batch")
        now = self._clock.now_ms()
        sent = self._keys_to_send([("", "") if isinstance(i, Exception) else (i[0].queue, i[1]) for i in items])
        keyed = [item if isinstance(item, Exception) else (*item, key) for item, key in zip(items, sent)]
        answers = self._replica.execute_each(keyed, lambda item: self._create_command(item[0], item[1], now, item[2], item[3]))
        return [_with_client_key(a, key) if isinstance(a, RejectedError) else a for a, key in zip(answers, sent)]

    def update_job(self, job_id: str, spec: JobSpec, request_id: str = "") -> Job:
        _require_id("job_id", job_id)
        validate_spec(spec, self._limits)
        self._formats.check_spec(spec)
        return self._job_write(c.UpdateJob(self._clock.now_ms(), job_id, spec, self._rid(request_id)))

    def _job_write(self, cmd: c.Command) -> Job:
        job = self._replica.execute(cmd)
        assert isinstance(job, Job)
        return job

    def pause_job(self, job_id: str, request_id: str = "", note: str = "", until_ms: int = 0) -> Job:
        """Pause a job; ``note``: why, for people (at most 512 characters); ``until_ms``: it resumes itself then
        (0: when resumed)."""
        _require_id("job_id", job_id)
        lim.check_chars("note", note, MAX_PAUSE_NOTE_CHARS)
        check_text("note", note)
        now = self._clock.now_ms()
        if until_ms:
            lim.check_instant_ms("until", until_ms)
            if until_ms <= now:
                raise ValidationError(
                    "until is not in the future: give a later instant, or leave it unset to pause until resumed"
                )
        if note or until_ms:
            self._formats.check("a pause with a note or an until")
        return self._job_write(c.PauseJob(now, job_id, self._rid(request_id), note, until_ms))

    def resume_job(self, job_id: str, request_id: str = "") -> Job:
        _require_id("job_id", job_id)
        return self._job_write(c.ResumeJob(self._clock.now_ms(), job_id, self._rid(request_id)))

    def delete_job(self, job_id: str, request_id: str = "") -> Job:
        _require_id("job_id", job_id)
        return self._job_write(c.DeleteJob(self._clock.now_ms(), job_id, self._rid(request_id)))

    def trigger_job(self, job_id: str, request_id: str = "", payload: bytes = b"") -> Run:
        """One extra run now; ``payload``: its own instead of the job's (checked as the job's would be)."""
        _require_id("job_id", job_id)
        if payload:
            self._formats.check("a trigger with its own payload")
            if len(payload) > self._limits.max_payload_bytes:
                raise ValidationError(
                    f"payload is {len(payload)} bytes, over the limit of {self._limits.max_payload_bytes} bytes; "
                    "store large inputs elsewhere and pass a reference"
                )
            validate_payload(self.get_job(job_id).spec.type, payload)
        rid = self._rid(request_id)
        limit = self._limits.max_pending_runs
        if not rid:  # a retried trigger with an id must still get its first answer
            self._check_quota(
                lambda m: m.run_counts[RunStatus.PENDING],
                limit,
                f"the cluster holds its limit of PENDING runs, [limits] max_pending_runs = {limit}: add executors or raise it",
            )
        run = self._replica.execute(c.TriggerJob(self._clock.now_ms(), job_id, limit, rid, payload))
        assert isinstance(run, Run)
        return run

    def backfill_job(self, job_id: str, start_ms: int, end_ms: int, dry_run: bool = False) -> tuple[list[int], list[Run]]:
        """Runs for the past instants of ``[start_ms, end_ms)`` that have none (``BackfillJob``); ``dry_run``: the
        instants, and nothing is made."""
        _require_id("job_id", job_id)
        for name, ms in (("start_time", start_ms), ("end_time", end_ms)):
            lim.check_instant_ms(name, ms)
        if end_ms <= start_ms:
            raise ValidationError("end_time is not after start_time: give a range [start_time, end_time)")
        self._formats.check("BackfillJob")
        if dry_run:
            return self._backfill_preview(job_id, start_ms, end_ms), []
        cmd = c.BackfillJob(self._clock.now_ms(), job_id, start_ms, end_ms, self._limits.max_pending_runs)
        instants, runs = self._replica.execute(cmd)
        return list(instants), list(runs)

    def _backfill_preview(self, job_id: str, start_ms: int, end_ms: int) -> list[int]:
        fmt = self._replica.read(lambda m: m.cluster_format, barrier=False)

        def read(rr: RecordReader) -> list[int]:
            job = rr.job(job_id)
            if job is None:
                raise RejectedError(NotFound(f"job {job_id} not found"))
            if job.status is JobStatus.DELETED:
                raise RejectedError(FailedPrecondition(f"job {job_id} is deleted; it cannot be backfilled"))

            def has_run(instant: int) -> bool:
                own = rr.run(run_id_for(job_id, instant))
                return (own is not None and own.status is not RunStatus.SKIPPED) or rr.run(
                    backfill_run_id(job_id, instant)
                ) is not None

            try:
                return backfill_instants(job_schedule(job.spec, fmt), job.anchor_ms, job.cursor_ms, start_ms, end_ms, has_run)
            except BackfillTooLarge as exc:
                raise ValidationError(str(exc)) from exc

        return self._replica.read_records(read)

    def cancel_run(self, run_id: str, request_id: str = "") -> Run:
        _require_id("run_id", run_id)
        run = self._replica.execute(c.CancelRun(self._clock.now_ms(), run_id, self._rid(request_id)))
        assert isinstance(run, Run)
        return run

    def retry_run(self, run_id: str, request_id: str = "", requested_by: str = "") -> Run:
        """A DEAD_LETTER, FAILED or CANCELLED run is PENDING again with a fresh attempt budget (FAILED_PRECONDITION
        while the cluster is below command format 3: the format gate)."""
        _require_id("run_id", run_id)
        cmd = c.RetryRun(self._clock.now_ms(), run_id, requested_by, self._limits.max_pending_runs, self._rid(request_id))
        run = self._replica.execute(cmd)
        assert isinstance(run, Run)
        return run

    def explain_run(self, run_id: str) -> Explanation:
        """What the state machine recorded about a run as it applied each command (``ExplainRun``)."""
        return explain(self.get_run(run_id))

    # -------------------------------------------------------------- reads

    def get_job(self, job_id: str) -> Job:
        _require_id("job_id", job_id)
        job = self._replica.read_records(lambda r: r.job(job_id))
        if job is None:
            raise RejectedError(NotFound(f"job {job_id} not found"))
        return job

    def run_labels(self, runs: list[Run]) -> dict[str, dict[str, str]]:
        """The labels of the jobs of ``runs`` (a run carries its job's labels), by job id; only jobs with labels."""
        ids = {r.job_id for r in runs}

        def read(rr: RecordReader) -> dict[str, dict[str, str]]:
            found = {job_id: _labels_of(rr, job_id) for job_id in ids}
            return {job_id: dict(labels) for job_id, labels in found.items() if labels}

        # no read barrier of its own: the runs were read after one, and a job's labels are as current as they
        return self._replica.read_records(read, barrier=False) if ids else {}

    def get_run(self, run_id: str) -> Run:
        _require_id("run_id", run_id)
        run = self._replica.read_records(lambda r: r.run(run_id))
        if run is None:
            raise RejectedError(NotFound(f"run {run_id} not found"))
        return run

    def get_run_output(self, run_id: str, attempt: int = 0, offset: int = 0) -> RunOutput:
        """Attempt ``attempt`` (0: the latest) of a run from byte ``offset``: its log (live while it runs) and
        result, or why they are missing."""
        if attempt < 0:
            raise ValidationError(f"attempt {attempt} is negative: use 0 for the latest, or 1, 2, ...")
        if offset < 0:
            raise ValidationError(f"offset {offset} is negative: use 0 for the whole log, or the next_offset of the last answer")
        return read_run_output(self.get_run(run_id), attempt, self._outputs, offset)

    def active_runs(self, job_id: str, accept: Callable[[Run], bool], limit: int) -> Iterator[Run]:
        """PENDING and LEASED runs (of ``job_id``, or all) that ``accept`` takes, at most ``limit``: by job,
        then scheduled time, read a chunk per read transaction."""
        if job_id:
            _require_id("job_id", job_id)
        return iter_active_runs(self._replica, job_id, accept, limit, SCAN_CHUNK)

    def counts(self) -> Counts:
        """Jobs and runs in this node's state as applied so far: no barrier, no Raft round trip."""

        def count(m: JobStateMachine) -> Counts:
            pending = m.queue_depths()
            return Counts(dict(m.run_counts), sum(m.job_counts.values()), pending, dict(m.members), dict(m.job_counts))

        return self._replica.read(count, barrier=False)

    def list_jobs(
        self,
        queue: str = "",
        status: JobStatus | None = None,
        name_prefix: str = "",
        page_size: int = 0,
        page_token: str = "",
        label_selector: str = "",
    ) -> Page:
        size = _page_size(page_size)
        lim.check_chars("queue", queue, lim.MAX_QUEUE_CHARS)
        lim.check_chars("name_prefix", name_prefix, lim.MAX_NAME_CHARS)
        selector = parse_selector(label_selector)
        # a token is bound to the filters (one without a selector as it always was: older nodes' tokens stay good)
        query = _query("jobs", queue, status.value if status else "", name_prefix, *((label_selector,) if selector else ()))
        cursor = self._tokens.open(query, page_token)

        def keep(j: Job) -> bool:
            return (
                (not queue or j.spec.queue == queue)
                and (status is None or j.status is status)
                and j.spec.name.startswith(name_prefix)
                and matches(selector, j.spec.labels)
            )

        page = self._scan(lambda r, after: r.iter_jobs(after), keep, size, lambda j: j.job_id, cursor)
        return Page(page.items, self._tokens.issue(query, page.next_token))

    def list_runs(
        self,
        job_id: str = "",
        status: RunStatus | None = None,
        page_size: int = 0,
        page_token: str = "",
        newest_first: bool = False,
        label_selector: str = "",
    ) -> Page:
        """Runs (of ``job_id``, or all by run id) in ``status`` whose job's labels ``label_selector`` selects; a
        job's by scheduled instant, oldest first unless ``newest_first`` (the web view's order; only with a
        ``job_id``)."""
        size = _page_size(page_size)
        lim.check_chars("job_id", job_id, lim.MAX_ID_CHARS)
        if newest_first and not job_id:
            raise ValidationError("newest_first needs a job_id: runs of every job are listed by run id")
        selector = parse_selector(label_selector)
        # the oldest-first query is bound as it always was (tokens of older nodes stay good)
        query = _query(
            "runs", job_id, status.value if status else "", *(("newest",) if newest_first else ()),
            *(("labels", label_selector) if selector else ()),
        )  # fmt: skip
        cursor = self._tokens.open(query, page_token)

        def keep(r: Run) -> bool:
            return status is None or r.status is status

        def labeled(r: RecordReader, found: Iterator[Run]) -> Iterator[Run]:
            """The runs whose job's labels the selector selects (each job's labels read once)."""
            if not selector:
                return found
            chosen: dict[str, bool] = {}

            def chose(run: Run) -> bool:
                if run.job_id not in chosen:
                    chosen[run.job_id] = matches(selector, _labels_of(r, run.job_id))
                return chosen[run.job_id]

            return (run for run in found if chose(run))

        if job_id:
            _parse_run_token(cursor)  # a bad cursor is INVALID_ARGUMENT before anything is read

            def job_runs(r: RecordReader, after: str) -> Iterator[Run]:
                if not r.has_job(job_id):
                    raise RejectedError(NotFound(f"job {job_id} not found"))
                return labeled(r, r.iter_job_runs(job_id, _parse_run_token(after), newest_first))

            page = self._scan(job_runs, keep, size, lambda r: f"{r.scheduled_ms}|{r.run_id}", cursor)
        else:
            page = self._scan(lambda r, after: labeled(r, r.iter_runs(after)), keep, size, lambda r: r.run_id, cursor)
        return Page(page.items, self._tokens.issue(query, page.next_token))

    def _scan(
        self,
        iterate: Callable[[RecordReader, str], Iterator[Item]],
        keep: Callable[[Item], bool],
        size: int,
        key: Callable[[Item], str],
        page_token: str,
    ) -> Page:
        """One page of what ``iterate`` yields after ``page_token``, filtered by ``keep``.

        One read transaction examines at most ``SCAN_CHUNK`` items: it takes no lock Raft needs,
        but a long one keeps the pages it reads from being reused (the state file would grow
        while a filter that matches little walks a million jobs). The first chunk is read after
        a barrier; later ones continue on this node's state, which is only newer. A page is then
        not one snapshot, as pages never were.
        """
        out: list[Item] = []
        cursor, first = page_token, True
        while True:

            def chunk(r: RecordReader, after: str = cursor) -> tuple[list[Item], str, bool]:
                kept: list[Item] = []
                last, examined = after, 0
                for item in iterate(r, after):
                    last = key(item)
                    if keep(item):
                        kept.append(item)
                        if len(out) + len(kept) > size:
                            return kept, last, False
                    examined += 1
                    if examined >= SCAN_CHUNK:
                        return kept, last, False
                return kept, last, True

            kept, cursor, exhausted = self._replica.read_records(chunk, barrier=first)
            first = False
            out.extend(kept)
            if len(out) > size:
                return Page(out[:size], key(out[size - 1]))
            if exhausted:
                return Page(out, "")

    def preview(
        self, spec_schedule: Schedule, after_ms: int | None, count: int, shape: JobSpec | None = None
    ) -> list[tuple[int, str]]:
        """The next instants of a schedule, each with a note on what DST did to it ("" when nothing); ``shape``: a
        spec whose bounds and extra crons shape them (their union) and whose skip dates and windows skip some (the
        instant is listed, its note says it is skipped and why)."""
        check_schedule(spec_schedule)
        if count < 0:
            raise ValidationError(f"count {count} is negative")
        count = min(count or 10, MAX_PREVIEW)
        start = self._clock.now_ms() if after_ms is None else after_ms
        lim.check_instant_ms("after", start)
        shaped: Any = spec_schedule
        if shape is not None and has_extras(shape):
            validate_extras(shape)
            shaped = job_schedule(shape, NEW_RULES_FORMAT)
        times = [t for t in upcoming(shaped, start, start, count) if t <= lim.MAX_INSTANT_MS]
        out = []
        for prev, t in zip([start] + times, times):
            note = explain_instant(_zone_schedule(shape, spec_schedule, t), prev, t)
            why = skip_reason(shape, t) if shape is not None and (shape.skip_dates or shape.skip_windows) else ""
            out.append((t, f"skipped: {why}" + (f"; {note}" if note else "") if why else note))
        return out


def _zone_schedule(shape: JobSpec | None, schedule: Schedule, instant_ms: int) -> Schedule:
    """The expression an instant of a union comes from (its DST note is that expression's)."""
    if shape is None or not shape.extra_crons:
        return schedule
    for cron in (schedule, *shape.extra_crons):
        if next_fire(cron, instant_ms - 1, instant_ms) == instant_ms:
            return cron
    return schedule


def _labels_of(reader: RecordReader, job_id: str) -> tuple[tuple[str, str], ...]:
    job = reader.job(job_id)
    return job.spec.labels if job is not None else ()


def _require_id(field: str, value: str) -> None:
    if not value:
        raise ValidationError(f"{field} is required")
    lim.check_chars(field, value, lim.MAX_ID_CHARS)


def _query(*parts: str) -> str:
    """What a page token is bound to: the call and its filters."""
    return "\x1f".join(parts)


def _parse_run_token(token: str) -> tuple[int, str] | None:
    if not token:
        return None
    ms, sep, run_id = token.partition("|")
    if not sep or not ms.lstrip("-").isdigit() or len(ms) > 20:
        raise ValidationError(f"page_token {lim.shown(token)} is not a token this server gave out")
    return (int(ms), run_id)
