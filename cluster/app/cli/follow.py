"""``raftsched run logs RUN_ID --follow``: the run's status as it moves, and each attempt's log.

Polls the run until it ends: status changes on stderr, each stored attempt's
log on stdout. Logs land in the store when an attempt ends (for S3: once
uploaded), so until then only the status moves; a log is printed once, when
its URI appears.
"""

from __future__ import annotations

import argparse
import sys
import time

from cluster.app.cli.output import render_message
from cluster.app.cli.views import run_status
from protos.raftsched.v1 import scheduler_pb2 as pb
from rpc.client.client import Client

TERMINAL = {
    pb.RUN_STATUS_SUCCEEDED,
    pb.RUN_STATUS_FAILED,
    pb.RUN_STATUS_CANCELLED,
    pb.RUN_STATUS_DEAD_LETTER,
    pb.RUN_STATUS_SKIPPED,
}


def output_notes(out: pb.RunOutput) -> str:
    """What follows a log: its result, or why it is missing."""
    text = f"\n--- result ---\n{out.result.decode('utf-8', 'replace')}" if out.result else ""
    if out.missing_reason:
        reason = out.missing_reason
        text += f"\n({reason})" if reason.startswith("output missing") else f"\n(output missing: {reason})"
    return text


def follow_logs(a: argparse.Namespace, client: Client) -> None:
    seen_state: tuple[int, int, str] | None = None
    printed_uris: set[str] = set()
    line_open = False  # the last log printed did not end with a newline
    while True:
        run = client.get_run(a.run_id)
        state = (run.status, run.attempt, run.executor_id)
        if state != seen_state:
            seen_state = state
            where = f" on {run.executor_id}" if run.executor_id and run.status == pb.RUN_STATUS_LEASED else ""
            note = f": {run.error}" if run.error and run.status != pb.RUN_STATUS_LEASED else ""
            print(f"[run {run.run_id}: {run_status(run)}, attempt {run.attempt}{where}{note}]", file=sys.stderr, flush=True)
        terminal = run.status in TERMINAL
        if (run.log_uri and run.log_uri not in printed_uris) or terminal:
            out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=a.run_id))
            text_mode = a.output in ("table", "wide")
            if run.log_uri and run.log_uri not in printed_uris and out.log_uri == run.log_uri and not out.missing_reason:
                printed_uris.add(run.log_uri)
                if text_mode:
                    if len(printed_uris) > 1 or not terminal:
                        print(f"--- attempt {out.attempt} log ({out.log_uri}) ---", file=sys.stderr, flush=True)
                    sys.stdout.buffer.write(out.log)
                    sys.stdout.flush()
                    line_open = bool(out.log) and not out.log.endswith(b"\n")
            if terminal:
                notes = output_notes(out)[0 if line_open else 1 :]
                if not text_mode or notes:
                    print(render_message(a.output, out, lambda: notes, out.run_id))
                return
        time.sleep(max(0.05, a.interval))
