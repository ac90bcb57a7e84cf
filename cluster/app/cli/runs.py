"""``raftsched run ...``: list, get, cancel, logs (``--follow``), watch."""

from __future__ import annotations

import argparse
import sys

from cluster.app.cli.args import Command
from cluster.app.cli.follow import follow_logs, output_notes
from cluster.app.cli.output import render, render_message
from cluster.app.cli.views import RUN_VIEW
from cluster.app.cli.watch import add_watch_args, watch
from protos.raftsched.v1 import scheduler_pb2 as pb
from rpc.client.client import Client

RUN_STATUSES = ["pending", "leased", "succeeded", "failed", "cancelled", "dead_letter", "skipped"]


def list_runs(a: argparse.Namespace, client: Client) -> None:
    status = pb.RunStatus.Value(f"RUN_STATUS_{a.status.upper()}") if a.status else 0
    print(render(a.output, RUN_VIEW, client.list_runs(a.job, status)))


def get(a: argparse.Namespace, client: Client) -> None:
    print(render(a.output, RUN_VIEW, [client.get_run(a.run_id)], single=True))


def cancel(a: argparse.Namespace, client: Client) -> None:
    print(render(a.output, RUN_VIEW, [client.job("CancelRun", pb.CancelRunRequest(run_id=a.run_id))], single=True))


def logs(a: argparse.Namespace, client: Client) -> None:
    if a.follow:
        follow_logs(a, client)
        return
    out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=a.run_id, attempt=a.attempt))
    if a.output in ("table", "wide"):
        sys.stdout.buffer.write(out.log)
        notes = output_notes(out)
        if out.log.endswith(b"\n") or not out.log:
            notes = notes[1:]
        if notes or out.log and not out.log.endswith(b"\n"):
            sys.stdout.buffer.write(notes.encode("utf-8") + b"\n")
        sys.stdout.flush()
        if not out.log and not notes:
            print(f"(attempt {out.attempt} of run {out.run_id} wrote no log and returned no result)", file=sys.stderr)
        return
    print(render_message(a.output, out, lambda: "", out.run_id))


def _run_id(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", metavar="RUN_ID")


def _list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--job", default="", metavar="JOB_ID", help="only this job's runs")
    p.add_argument("--status", choices=RUN_STATUSES)


def _logs_args(p: argparse.ArgumentParser) -> None:
    _run_id(p)
    p.add_argument("--attempt", type=int, default=0, help="this attempt's output (default: the latest)")
    p.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="wait until the run ends, showing its status and each attempt's log as it is stored",
    )
    p.add_argument("--interval", type=float, default=1.0, help=argparse.SUPPRESS)


COMMANDS = [
    Command("list", "list runs, oldest first", "raftsched run list --job JOB_ID --status failed", list_runs, _list_args),
    Command("get", "show one run", "raftsched run get RUN_ID -o yaml", get, _run_id),
    Command("cancel", "cancel a pending or running run", "raftsched run cancel RUN_ID", cancel, _run_id),
    Command(
        "logs",
        "a run's log (stdout and stderr) and result",
        "raftsched run logs RUN_ID\nraftsched run logs RUN_ID --follow   # until the run ends",
        logs,
        _logs_args,
        "Print an attempt's log and its result. -o json shows them as text when they are UTF-8\n"
        "(log_base64, result_base64 when not).",
    ),
    Command(
        "watch",
        "stream run changes as they happen (fails over to another node)",
        "raftsched run watch --job JOB_ID\nraftsched run watch --kind finished -o jsonl",
        watch,
        add_watch_args,
        "Stream run changes (fired, leased, finished, ...) as the cluster applies them. When the node\n"
        "it streams from goes away it resumes on another one after the last change shown, so nothing\n"
        "is shown twice or lost.",
    ),
]
