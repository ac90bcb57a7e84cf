"""GetRunOutput in domain terms: a run's log and result, from a byte offset, or why they are missing.

Logs never travel through Raft: an executor stores each attempt's output and
puts its URI into the completion. This reads it back through the node's
``OutputReader`` port. An output that cannot be read is a ``missing_reason``
for the caller, never an error of the call.

Which log, for the latest attempt of a run:

* **LEASED** — the attempt runs: its live output, what its executor has
  shipped so far (``raftsched.cluster.domain.live_output``), found from the run's
  lease alone (job, run, attempt, fencing token → the key, under the node's
  own store) with nothing going through Raft. ``live`` is set; the stored
  log replaces it when the attempt ends, and since the live bytes are that
  log's beginning, a reader's offset stays valid across the switch.
* **a stored log** (``log_uri`` of this attempt) — read from the offset.
  A ``log_uri`` left from an earlier attempt (the run was leased again and
  that attempt stored nothing) is not this attempt's and is not shown.
* **nothing stored** (the executor died, or its store failed) — what the
  attempt shipped live while it ran, if anything, with a note saying so;
  ``missing_reason`` says why the whole log is missing.

An earlier attempt (``attempt = N`` below the latest) is read from its own
``log_uri`` as ``Run.attempts`` keeps it (format 3); an attempt the run does
not keep (recorded before command format 3, or dropped beyond the cap) is a
``missing_reason`` naming the attempts it keeps.

``next_offset`` is where the caller's next read should start: a follower
passes it back and gets only what is new.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from raftsched.cluster.domain.live_output import LogSlice
from raftsched.cluster.domain.model import Run, RunStatus
from raftsched.cluster.domain.output import EMPTY_OUTPUT_URI, MISSING_OUTPUT_MARK, OutputKey, OutputMissing
from raftsched.cluster.domain.run_history import attempt_of
from raftsched.cluster.node.ports import OutputReader


@dataclass(frozen=True, slots=True)
class RunOutput:
    run_id: str
    attempt: int
    log: bytes
    result: bytes
    log_uri: str
    missing_reason: str
    #: the attempt runs: ``log`` is what its executor has shipped so far
    live: bool = False
    next_offset: int = 0
    #: the log's size as stored now (live: shipped so far)
    size: int = 0
    #: the attempt's fencing token: a new one means a new attempt
    fencing_token: int = 0
    note: str = ""


def read_run_output(run: Run, attempt: int, reader: OutputReader, offset: int = 0) -> RunOutput:
    """Attempt ``attempt`` (0: the latest) of ``run`` from byte ``offset``: its log and result, or why missing."""
    if attempt and attempt != run.attempt:
        return _earlier(run, attempt, reader, offset)
    key = OutputKey(run.job_id, run.run_id, run.attempt, run.fencing_token)
    if run.status is RunStatus.LEASED:
        return _live(run, key, reader, offset)
    uri = run.log_uri if _of_this_attempt(run) else ""
    if uri:
        try:
            piece, stored = reader.read_at(uri, offset)
            return _answer(run, piece, stored or run.result, uri, "")
        except OutputMissing as exc:
            return _answer(run, LogSlice(b"", 0, offset), run.result, uri, f"output missing: {exc}")
    mark = run.error.find(MISSING_OUTPUT_MARK)
    missing = run.error[mark:] if mark >= 0 else ""
    missing = missing or f"output missing: no log is stored for run {run.run_id} (status {run.status.value})"
    leftover = _leftover(run, key, reader, offset)
    if leftover is not None:
        note = f"attempt {run.attempt}'s whole log was not stored; this is what its executor shipped while it ran"
        return _answer(run, leftover, run.result, "", missing, note)
    return _answer(run, LogSlice(b"", 0, offset), run.result, "", missing)


def _earlier(run: Run, attempt: int, reader: OutputReader, offset: int) -> RunOutput:
    """An earlier attempt's output, from its own ``log_uri``."""
    kept = attempt_of(run, attempt)
    if kept is None:
        numbers = [a.attempt for a in run.attempts]
        which = f"attempts {numbers[0]}-{numbers[-1]}" if numbers else f"only its latest attempt ({run.attempt})"
        why = f"attempt {attempt} of run {run.run_id} is not recorded: the run keeps {which}"
        return RunOutput(run.run_id, attempt, b"", b"", "", why, next_offset=offset)
    uri = kept.log_uri if kept.log_uri != EMPTY_OUTPUT_URI else ""
    if not uri:
        why = f"output missing: attempt {attempt} of run {run.run_id} stored no log ({kept.outcome or 'running'})"
        if kept.error:
            why += f": {kept.error}"
        return RunOutput(run.run_id, attempt, b"", b"", kept.log_uri, why, next_offset=offset, fencing_token=kept.fencing_token)
    try:
        piece, stored = reader.read_at(uri, offset)
        missing = ""
    except OutputMissing as exc:
        piece, stored, missing = LogSlice(b"", 0, offset), b"", f"output missing: {exc}"
    return RunOutput(
        run.run_id, attempt, piece.data, stored, uri, missing, False, piece.next_offset, piece.size, kept.fencing_token,
        piece.note,
    )  # fmt: skip


def _answer(run: Run, piece: LogSlice, result: bytes, uri: str, missing: str, note: str = "", live: bool = False) -> RunOutput:
    return RunOutput(
        run.run_id,
        run.attempt,
        piece.data,
        result,
        uri,
        missing,
        live,
        piece.next_offset,
        piece.size,
        run.fencing_token,
        note or piece.note,
    )


def _live(run: Run, key: OutputKey, reader: OutputReader, offset: int) -> RunOutput:
    try:
        piece = reader.read_live(key, offset)
    except OutputMissing as exc:
        why = f"output missing: the live output of attempt {run.attempt} cannot be read: {exc}"
        return _answer(run, LogSlice(b"", 0, offset), b"", "", why, live=True)
    return _answer(run, piece, b"", "", "", live=True)


def _leftover(run: Run, key: OutputKey, reader: OutputReader, offset: int) -> LogSlice | None:
    """The live parts of an attempt that stored no log (its executor died, or its store failed), if any."""
    if not run.attempt or not run.fencing_token or run.log_uri == EMPTY_OUTPUT_URI:
        return None
    try:
        piece = reader.read_live(key, offset)
    except OutputMissing:
        return None
    return piece if piece.size else None


def _of_this_attempt(run: Run) -> bool:
    """Whether the run's ``log_uri`` was stored by its latest attempt (a retry that stored nothing leaves the
    earlier attempt's there). ``data:,`` cannot tell, and is taken as this attempt's."""
    if not run.log_uri or run.log_uri == EMPTY_OUTPUT_URI:
        return bool(run.log_uri)
    return posixpath.basename(run.log_uri) == f"attempt-{run.attempt}-token-{run.fencing_token}.log"
