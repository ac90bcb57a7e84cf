"""``raftsched run ...``: list, get, cancel, retry, explain, logs (``--follow``), watch."""

from __future__ import annotations

import argparse
import sys

import grpc

from raftsched.cluster.app.cli.args import Command, CommandFailed, UsageError
from raftsched.cluster.app.cli.follow import follow_logs, output_notes
from raftsched.cluster.app.cli.output import render, render_message, table
from raftsched.cluster.app.cli.timefmt import local, span_text, ts_ms
from raftsched.cluster.app.cli.views import RUN_VIEW
from raftsched.cluster.app.cli.watch import add_watch_args, watch
from raftsched.cluster.domain.unsafe_text import escape
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client, new_request_id

RUN_STATUSES = ["pending", "leased", "succeeded", "failed", "cancelled", "dead_letter", "skipped", "expired"]


def list_runs(a: argparse.Namespace, client: Client) -> None:
    status = pb.RunStatus.Value(f"RUN_STATUS_{a.status.upper()}") if a.status else 0
    print(render(a.output, RUN_VIEW, client.list_runs(a.job, status, label_selector=a.label_selector)))


def get(a: argparse.Namespace, client: Client) -> None:
    print(render(a.output, RUN_VIEW, [client.get_run(a.run_id)], single=True))


def cancel_note(run: pb.Run, lease_ttl_ms: int | None) -> str:
    """What happens to a LEASED run whose cancel was just requested, and when."""
    on = f" on {run.executor_id}" if run.executor_id else ""
    within = (
        f" (within about {span_text(-(-lease_ttl_ms // 3))}: executors renew every third of a lease's TTL, "
        f"{span_text(lease_ttl_ms)} for this job)"
        if lease_ttl_ms
        else ""
    )
    expires = ts_ms(run.lease_expires_at)
    gone = f" at {local(expires)}" if expires is not None else ""
    return (
        f"cancel requested: the executor{on} is asked to stop run {run.run_id} at its next lease renewal{within}; "
        f"the run stays LEASED until it has stopped, then it is CANCELLED (were the executor gone, it would be when "
        f"its lease expires{gone}). Follow it: raftsched run logs {run.run_id} --follow"
    )


def cancel(a: argparse.Namespace, client: Client) -> None:
    run = client.job("CancelRun", pb.CancelRunRequest(run_id=a.run_id))
    print(render(a.output, RUN_VIEW, [run], single=True))
    if a.output not in ("table", "wide") or run.status != pb.RUN_STATUS_LEASED:
        return  # a PENDING run is CANCELLED at once
    try:
        job = client.get_job(run.job_id)
        ttl: int | None = cv.dur_ms(job.spec.lease_ttl) if job.spec.HasField("lease_ttl") else None
    except grpc.RpcError:  # the note goes without the number
        ttl = None
    print(escape(cancel_note(run, ttl)), file=sys.stderr)


def retry(a: argparse.Namespace, client: Client) -> None:
    """One run, or every run of ``--job`` in ``--status``. Each RetryRun carries ``BASE:RUN_ID`` as its request id
    (BASE: ``--request-id``, or a fresh one): running the same command again with the same ``--request-id``
    retries no run twice."""
    base = a.request_id or new_request_id()
    if a.run_id:
        if a.job:
            raise UsageError("give RUN_ID or --job JOB_ID --status STATUS, not both")
        run = client.retry_run(a.run_id, f"{base}:{a.run_id}")
        print(render(a.output, RUN_VIEW, [run], single=True))
        return
    if not a.job:
        raise UsageError("say which runs: raftsched run retry RUN_ID, or raftsched run retry --job JOB_ID --status dead_letter")
    status = pb.RunStatus.Value(f"RUN_STATUS_{a.status.upper()}")
    retried, failed = [], []
    for run in client.list_runs(a.job, status):  # every page first: a retried run leaves the status
        try:
            retried.append(client.retry_run(run.run_id, f"{base}:{run.run_id}"))
        except grpc.RpcError as exc:  # one run's refusal does not stop the others; all are reported
            failed.append(f"{run.run_id}: {exc.details()}")
    print(render(a.output, RUN_VIEW, retried))
    if a.output in ("table", "wide"):
        print(f"{len(retried)} run(s) of job {a.job} retried (request id base {base})", file=sys.stderr)
    if failed:
        raise CommandFailed(f"{len(failed)} run(s) could not be retried:\n" + "\n".join(failed))


def explain(a: argparse.Namespace, client: Client) -> None:
    answer = client.explain_run(a.run_id)

    def text() -> str:
        rows = [[local(ts_ms(s.at), millis=True), s.kind, s.detail, s.node_id or "-"] for s in answer.steps]
        status = pb.RunStatus.Name(answer.run.status).removeprefix("RUN_STATUS_")
        return f"run {answer.run_id}: {status}, attempt {answer.run.attempt}\n" + table(["TIME", "KIND", "DETAIL", "NODE"], rows)

    print(render_message(a.output, answer, text, answer.run_id))


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


def _retry_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", metavar="RUN_ID", nargs="?", default="")
    p.add_argument("--job", default="", metavar="JOB_ID", help="retry this job's runs in --status")
    p.add_argument("--status", choices=["dead_letter", "failed", "cancelled"], default="dead_letter")
    p.add_argument(
        "--request-id", default="", metavar="BASE", help="request ids BASE:RUN_ID (the same BASE again retries nothing twice)"
    )


def _list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--job", default="", metavar="JOB_ID", help="only this job's runs")
    p.add_argument("--status", choices=RUN_STATUSES)
    p.add_argument("--label-selector", "-l", default="", help="only runs of jobs with these labels: k=v, k!=v, k, !k")


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
    Command(
        "cancel",
        "cancel a pending or running run",
        "raftsched run cancel RUN_ID\nraftsched run logs RUN_ID --follow   # until it has stopped",
        cancel,
        _run_id,
        "Cancel a run. A PENDING run is CANCELLED at once. A LEASED (running) one stays LEASED while its\n"
        "executor is asked to stop it, at its next lease renewal (within a third of the job's lease TTL),\n"
        "and is CANCELLED once it has stopped.",
    ),
    Command(
        "retry",
        "run a dead-lettered, failed or cancelled run again",
        "raftsched run retry RUN_ID\nraftsched run retry --job JOB_ID --status dead_letter",
        retry,
        _retry_args,
        "Make a DEAD_LETTER, FAILED or CANCELLED run PENDING again with a fresh attempt budget (its\n"
        "attempts so far are kept). With --job, every run of the job in --status (default dead_letter).",
    ),
    Command(
        "explain",
        "why a run exists and what happened to it",
        "raftsched run explain RUN_ID\nraftsched run explain RUN_ID -o json",
        explain,
        _run_id,
        "Print the steps the cluster recorded for a run: how it fired (leader, term, entry, how late) or\n"
        "why it was skipped, every lease, failure, backoff, expiry, cancel and retry.",
    ),
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
