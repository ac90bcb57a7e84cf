"""``raftsched run logs RUN_ID --follow``: the run's status as it moves, and its output as it comes.

Status changes go to stderr, the output to stdout, then the result. While an
attempt runs, GetRunOutput answers with what its executor has shipped so far
(``live``, about once a second); each poll passes the offset reached, so only
new bytes travel, and the stored log continues from the same offset when the
attempt ends. A new attempt (a retry, on this executor or another: a new
fencing token) is announced on stderr and its output printed from its start;
how each earlier attempt ended is printed from the run's attempts even when
the polls never saw the run between two attempts (a retry leased again within
one poll interval).
``-o json`` (and the other machine formats) prints the final answer only.
"""

from __future__ import annotations

import argparse
import sys
import time

from raftsched.cluster.app.cli.output import render_message
from raftsched.cluster.app.cli.views import run_status
from raftsched.cluster.domain.unsafe_text import escape
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.client import Client

TERMINAL = {
    pb.RUN_STATUS_SUCCEEDED,
    pb.RUN_STATUS_FAILED,
    pb.RUN_STATUS_CANCELLED,
    pb.RUN_STATUS_DEAD_LETTER,
    pb.RUN_STATUS_SKIPPED,
    pb.RUN_STATUS_EXPIRED,
}


def output_notes(out: pb.RunOutput) -> str:
    """What follows a log: its result, or why it is missing."""
    text = f"\n--- result ---\n{out.result.decode('utf-8', 'replace')}" if out.result else ""
    if out.missing_reason:
        reason = out.missing_reason
        text += f"\n({reason})" if reason.startswith("output missing") else f"\n(output missing: {reason})"
    return text


def follow_logs(a: argparse.Namespace, client: Client) -> None:
    text_mode = a.output in ("table", "wide")
    seen_state: tuple[int, int, str] | None = None
    shown: tuple[int, int] | None = None  # (attempt, fencing token) whose output stdout carries
    offset, line_open, notes = 0, False, set()
    ended: set[int] = set()  # attempts whose end stderr has shown
    while True:
        run = client.get_run(a.run_id)
        state = (run.status, run.attempt, run.executor_id)
        if state != seen_state:
            seen_state = state
            for line in _missed_ends(run, ended):
                print(escape(line), file=sys.stderr, flush=True)
            if run.status != pb.RUN_STATUS_LEASED:
                ended.add(run.attempt)
            where = f" on {run.executor_id}" if run.executor_id and run.status == pb.RUN_STATUS_LEASED else ""
            note = f": {run.error}" if run.error and run.status != pb.RUN_STATUS_LEASED else ""
            line = f"[run {run.run_id}: {run_status(run)}, attempt {run.attempt}{where}{note}]"
            print(escape(line), file=sys.stderr, flush=True)
        terminal = run.status in TERMINAL
        out: pb.RunOutput | None = None
        if run.attempt or terminal:
            out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=a.run_id, offset=offset if text_mode else 0))
            if text_mode and (out.attempt, out.fencing_token) != shown:
                out = _new_attempt(a, client, run, out, shown, offset, line_open)
                shown, offset, line_open = (out.attempt, out.fencing_token), 0, False
            if out.log and text_mode:
                sys.stdout.buffer.write(out.log)
                sys.stdout.flush()
                line_open = not out.log.endswith(b"\n")
            offset = max(offset, out.next_offset)
            if out.note and out.note not in notes and text_mode:
                notes.add(out.note)
                print(escape(f"[{out.note}]"), file=sys.stderr, flush=True)
        more = out is not None and out.next_offset < out.size  # more than one answer carries: ask again now
        if terminal and out is not None and not more:
            text = output_notes(out)[0 if line_open else 1 :]
            if not text_mode or text:
                print(render_message(a.output, out, lambda: text, out.run_id))
            return
        if not more:
            time.sleep(max(0.05, a.interval))


def _missed_ends(run: pb.Run, ended: set[int]) -> list[str]:
    """How each earlier attempt ended, for those whose end no status line has shown: the run was
    leased again between two polls, so the only trace of why is in its attempts."""
    lines = []
    for at in run.attempts:
        if at.attempt >= run.attempt or at.attempt in ended or not at.outcome:
            continue
        ended.add(at.attempt)
        how = pb.AttemptOutcome.Name(at.outcome).removeprefix("ATTEMPT_OUTCOME_")
        on = f" on {at.executor_id}" if at.executor_id else ""
        lines.append(f"[run {run.run_id}: attempt {at.attempt}{on} ended {how}" + (f": {at.error}]" if at.error else "]"))
    return lines


def _new_attempt(
    a: argparse.Namespace,
    client: Client,
    run: pb.Run,
    out: pb.RunOutput,
    shown: tuple[int, int] | None,
    offset: int,
    line_open: bool,
) -> pb.RunOutput:
    """Output of an attempt stdout has not carried yet (the first, or a retry: a new fencing token),
    from its start; a retry is announced on stderr."""
    if offset:  # that offset was the previous attempt's
        out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=a.run_id))
    if shown is not None:
        sys.stdout.write("\n" if line_open else "")
        sys.stdout.flush()
        on = f" on {run.executor_id}" if run.attempt == out.attempt and run.executor_id else ""
        print(
            f"[run {run.run_id}: attempt {out.attempt}{on} is a new attempt (fencing token {out.fencing_token}); "
            "its output follows from the start]",
            file=sys.stderr,
            flush=True,
        )
    return out
