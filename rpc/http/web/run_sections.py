"""The sections of a run's page: its fields, what made it, its output (log and result), its attempts, its
explanation.

Each section is built on its own, so that what a newer command format adds plugs in
beside what exists:

* **fields** — the run's record as it is (status, attempt, executor, lease,
  token, times, error, log URI).
* **output** — ``GetRunOutput`` of the latest attempt (live while the run is
  LEASED: the page then reloads itself; no script), cut to ``LOG_SHOWN_BYTES``
  (head and tail) for the page; the note when it is missing, and why.
* **attempts** — every attempt (``Run.attempts``) when the
  record carries them; until then ``None``, and the page says that the run
  keeps its latest attempt only. The field names read are the API's (docs/api.md)
  (``attempt``, ``executor_id``, ``lease_id``, ``fencing_token``,
  ``leased_at``/``_ms``, ``finished_at``/``_ms``, ``outcome``, ``error``,
  ``log_uri``): check them here when the record lands.
* **origin** — what made the run beyond its schedule, from ``Run.extra``
  (``RunExtra``, as ``raftsched.rpc.convert.run_to_pb`` reads it): a
  backfill (``backfill``), a trigger with its own ``payload``, or a
  notification (``type`` ``notify``, its ``event``, and a payload naming the
  URL, the secret's name and the body it POSTs).
* **explanation** — ``ExplainRun``'s steps (``explain_run(run_id)`` on the
  job service) when the service has it; until then
  ``None``, and the page says so. Each step: ``at``/``at_ms``, ``kind``,
  ``detail``, ``node_id``.

Nothing is made up: a section without data says it has none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from raftsched.cluster.domain.model import NOTIFY_TYPE, Job, Run, RunExtra, run_extra
from raftsched.cluster.node.run_output import RunOutput
from raftsched.rpc.http.web import words
from raftsched.rpc.http.web.links import run_href

#: bytes of a log a page shows: the head and the tail, with a note between, beyond this
LOG_SHOWN_BYTES = 256 * 1024
CLI_HINT = "raftsched run logs {run_id}"


@dataclass(frozen=True)
class Field:
    label: str
    value: str
    #: the element id tests and people can find it by (``run-status``)
    key: str


def attempt_words(run: Run, job: Job | None) -> str:
    """The run's attempt as its own messages count it: attempts are numbered on through a manual retry
    (RetryRun), and "of at most N" counts from the retry, as "attempt 2 of 2 failed" does
    (``Run.budget_base``: the attempt the budget counts after)."""
    limit = job.spec.retry.max_attempts if job is not None else 0
    base = int(getattr(run, "budget_base", 0) or 0)
    if not base:
        if not run.attempt:
            return "0 (not leased yet)"
        return f"{run.attempt} of at most {limit}" if limit else str(run.attempt)
    budget = f"a fresh budget of at most {limit} attempt(s)" if limit else "a fresh attempt budget"
    used = run.attempt - base
    if used <= 0:
        return f"{run.attempt}; a manual retry gave it {budget}: the next is attempt {run.attempt + 1}"
    of = f" of at most {limit}" if limit else ""
    return f"{run.attempt} ({used}{of} since the manual retry after attempt {base})"


def run_fields(run: Run, job: Job | None) -> list[Field]:
    """The run's record, in the order a reader asks about it."""
    lease = run.lease_id or words.NONE
    rows = [
        Field("Status", run.status.value, "run-status"),
        Field("Attempt", attempt_words(run, job), "run-attempt"),
        Field("Executor", run.executor_id or words.NONE, "run-executor"),
        Field("Lease", lease, "run-lease"),
        Field("Fencing token", str(run.fencing_token) if run.fencing_token else words.NONE, "run-token"),
        Field("Lease expires", words.utc(run.lease_expires_ms, millis=True), "run-lease-expires"),
        Field("Scheduled", words.utc(run.scheduled_ms, millis=True), "run-scheduled"),
        Field("Fired", words.utc(run.fired_ms, millis=True), "run-fired"),
        Field("Not before", words.utc(run.not_before_ms, millis=True), "run-not-before"),
        Field("Started", words.utc(run.started_ms, millis=True), "run-started"),
        Field("Finished", words.utc(run.finished_ms, millis=True), "run-finished"),
        Field("Error", run.error or words.NONE, "run-error"),
        Field("Log URI", run.log_uri or words.NONE, "run-log-uri"),
    ]
    if run.manual:
        rows.insert(1, Field("Fired by", "a manual trigger (TriggerJob)", "run-manual"))
    if run.cancel_requested:
        rows.insert(1, Field("Cancel", "requested: the executor stops it at its next renewal", "run-cancel"))
    if run.skipped_count:
        rows.append(
            Field(
                "Skipped",
                f"{run.skipped_count} instant(s), up to {words.utc(run.skipped_until_ms)}",
                "run-skipped",
            )
        )
    if is_notification(run) or (run.extra and run_extra(run, RunExtra.BACKFILL)):
        rows.insert(1, Field("Kind", origin_note(run), "run-kind"))
    elif run.extra and run_extra(run, RunExtra.PAYLOAD):
        rows.append(Field("Payload", "its own, given when it was triggered (below): not the job's", "run-own-payload"))
    return rows


# ---------------------------------------------------------------- origin

#: the separator of a notification's run id from the id of the run it tells of (``notification_run_id``)
NOTIFY_MARK = "#notify-"


def is_notification(run: Run) -> bool:
    return bool(run.extra) and run_extra(run, RunExtra.TYPE) == NOTIFY_TYPE


def origin_note(run: Run) -> str:
    """What made the run, in a few words ("" for a run of its schedule)."""
    if is_notification(run):
        return f"notification of {run_extra(run, RunExtra.EVENT, '') or 'an event'}"
    if run.extra and run_extra(run, RunExtra.BACKFILL):
        return "backfill of a past instant"
    if run.manual:
        return "triggered by hand, with its own payload" if run_extra(run, RunExtra.PAYLOAD) else "triggered by hand"
    return ""


@dataclass(frozen=True)
class Notification:
    """What a notification run delivers: which event of which run, to where, signed with which secret's name
    (never a secret: the cluster holds none), and the body it POSTs."""

    event: str
    of_run_id: str
    of_run_href: str
    url: str
    secret_name: str
    event_id: str
    body: str


@dataclass(frozen=True)
class Origin:
    #: one sentence on what made the run ("" for a run of its schedule or a plain trigger)
    summary: str
    #: its own payload as text ("" for none; a notification's is shown as ``notification``), and whether it was UTF-8
    payload: str
    payload_utf8: bool
    notification: Notification | None


def _notification(run: Run, payload: bytes) -> Notification:
    try:
        fields = json.loads(payload.decode("utf-8"))
    except ValueError:  # not what this version writes: show what can be known
        fields = {}
    fields = fields if isinstance(fields, dict) else {}
    of = run.run_id.partition(NOTIFY_MARK)[0]
    return Notification(
        str(run_extra(run, RunExtra.EVENT, "") or words.NONE),
        of,
        run_href(of),
        str(fields.get("url") or words.NONE),
        str(fields.get("secret_name") or ""),
        str(fields.get("event_id") or words.NONE),
        str(fields.get("body") or ""),
    )


def run_origin(run: Run) -> Origin:
    payload = run_extra(run, RunExtra.PAYLOAD, b"") if run.extra else b""
    if is_notification(run):
        note = _notification(run, payload)
        signed = f", signed with the secret named '{note.secret_name}'" if note.secret_name else ", unsigned"
        said = f"A notification of {note.event} of run {note.of_run_id}: an executor allowing the type notify POSTs it to {note.url}{signed}."
        return Origin(said, "", True, note)
    text, utf8 = words.text_of(payload) if payload else ("", True)
    if run.extra and run_extra(run, RunExtra.BACKFILL):
        return Origin("A backfill: BackfillJob made this run for a past instant of the schedule that had none.", text, utf8, None)
    if payload:
        return Origin(
            "Triggered by hand with its own payload (below): its executor gets it instead of the job's.", text, utf8, None
        )
    return Origin("", "", True, None)


@dataclass(frozen=True)
class OutputView:
    #: the attempt whose output this is
    attempt: int
    log: str
    #: the log is not UTF-8 (shown with replacement marks)
    binary_log: bool
    result: str
    live: bool
    size: int
    #: why the log is missing ("" when it is there)
    missing: str
    #: what else to know (cut, live output held, leftover of a lost attempt)
    notes: list[str]
    cli: str


def _cut(log: bytes, size: int, run_id: str) -> tuple[bytes, str]:
    if len(log) <= LOG_SHOWN_BYTES:
        return log, ""
    half = LOG_SHOWN_BYTES // 2
    note = f"the log is {size:,} bytes; this page shows its first and last {half // 1024} KiB: {CLI_HINT.format(run_id=run_id)} prints it all"
    return log[:half] + f"\n\n[... {len(log) - 2 * half:,} bytes not shown ...]\n\n".encode() + log[-half:], note


def output_view(out: RunOutput) -> OutputView:
    shown, cut_note = _cut(out.log, max(out.size, len(out.log)), out.run_id)
    log, utf8 = words.text_of(shown)
    result, _ = words.text_of(out.result)
    notes = [n for n in (out.note, cut_note) if n]
    if out.live:
        notes.insert(0, f"live: what attempt {out.attempt}'s executor has shipped so far ({out.size:,} bytes)")
    cli = CLI_HINT.format(run_id=out.run_id)
    return OutputView(out.attempt, log, not utf8, result, out.live, out.size, out.missing_reason, notes, cli)


@dataclass(frozen=True)
class AttemptRow:
    attempt: int
    executor_id: str
    lease_id: str
    fencing_token: str
    leased_at: str
    finished_at: str
    outcome: str
    error: str
    log_uri: str
    #: said on a line of its own before this attempt: the manual retry that gave it a fresh budget ("" for none)
    retry_note: str = ""
    #: how long it ran, from its lease to its end ("running" while it runs)
    took: str = words.NONE
    #: the executor's latest heartbeat details for this attempt (text, cut) and when they came ("" for none)
    heartbeat: str = ""

    @property
    def log_name(self) -> str:
        """The log's file name (its folder is the same for every attempt: ``log_folder``)."""
        return self.log_uri.rsplit("/", 1)[-1] or self.log_uri


def log_folder(rows: list[AttemptRow] | None) -> str:
    """The folder every attempt's log is in, ending in "/" ("" when they are not all in one)."""
    folders = {a.log_uri.rsplit("/", 1)[0] + "/" for a in rows or [] if "/" in a.log_uri}
    return folders.pop() if len(folders) == 1 and all("/" in a.log_uri for a in rows or []) else ""


def _ms(record: Any, name: str) -> int:
    """A time field of a record that may be spelt ``<name>_ms`` (domain) or ``<name>`` (as in docs/api.md)."""
    value = getattr(record, f"{name}_ms", None)
    if value is None:
        value = getattr(record, name, 0)
    return int(value or 0)


def _text(record: Any, name: str) -> str:
    value = getattr(record, name, "")
    return str(getattr(value, "value", value) or "")


def _retry_note(run: Run, job: Job | None, attempt: int) -> str:
    """The line before the first attempt after a manual retry: where "of at most N" counts from."""
    base = int(getattr(run, "budget_base", 0) or 0)
    if not base or attempt != base + 1:
        return ""
    limit = f" of at most {job.spec.retry.max_attempts} attempt(s)" if job is not None else ""
    return f"manual retry (RetryRun) after attempt {base}: a fresh budget{limit} counts from attempt {attempt}"


def attempt_rows(run: Run, job: Job | None = None) -> list[AttemptRow] | None:
    """Every attempt of the run, oldest first; None when the record keeps only the latest (this version)."""
    attempts = getattr(run, "attempts", None)
    if attempts is None or (not attempts and run.attempt):  # leased before the cluster kept attempts (format 3)
        return None
    return [
        AttemptRow(
            int(getattr(a, "attempt", 0)),
            _text(a, "executor_id") or words.NONE,
            _text(a, "lease_id") or words.NONE,
            _text(a, "fencing_token") or words.NONE,
            words.utc(_ms(a, "leased_at") or _ms(a, "leased"), millis=True),
            words.utc(_ms(a, "finished_at") or _ms(a, "finished"), millis=True),
            _text(a, "outcome") or words.NONE,
            _text(a, "error"),
            _text(a, "log_uri") or words.NONE,
            _retry_note(run, job, int(getattr(a, "attempt", 0))),
            _took(a),
            _heartbeat(a),
        )
        for a in attempts
    ]


#: characters of an attempt's heartbeat details the attempts table shows
HEARTBEAT_SHOWN = 200


def _heartbeat(attempt: Any) -> str:
    """``{"page": 3} (at 2026-...Z)``: the attempt's latest heartbeat details, as text, cut ("" for none)."""
    details = getattr(attempt, "heartbeat_details", b"") or b""
    if not details:
        return ""
    text, _ = words.text_of(details)
    text = " ".join(text.split())
    if len(text) > HEARTBEAT_SHOWN:
        text = text[: HEARTBEAT_SHOWN - 3] + "..."
    at = _ms(attempt, "heartbeat_at")
    return f"{text} (at {words.utc(at, millis=True)})" if at else text


def _took(attempt: Any) -> str:
    leased, finished = (
        _ms(attempt, "leased_at") or _ms(attempt, "leased"),
        _ms(attempt, "finished_at") or _ms(attempt, "finished"),
    )
    if not finished:
        return "running" if leased and not _text(attempt, "outcome") else words.NONE
    return words.span(max(0, finished - leased)) if leased else words.NONE


@dataclass(frozen=True)
class StepRow:
    at: str
    kind: str
    detail: str
    node_id: str


def explanation_rows(explain: Callable[[str], Any] | None, run_id: str) -> list[StepRow] | None:
    """The run's explanation, in order; None when this node's job service cannot explain runs yet."""
    if explain is None:
        return None
    answer = explain(run_id)
    steps = getattr(answer, "steps", answer)
    return [
        StepRow(
            words.utc(_ms(s, "at"), millis=True),
            _text(s, "kind"),
            _text(s, "detail"),
            _text(s, "node_id") or words.NONE,
        )
        for s in steps
    ]
