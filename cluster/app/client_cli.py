"""``raftsched job|run|cluster ...``: the command-line client, tables or ``--json``."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
import time
from typing import Any

import grpc
from google.protobuf import json_format

from cluster.app.client_security import add_security_args, security_from_args
from cluster.domain.errors import RaftschedError
from cluster.node.config import ClusterConfig, ConfigError, load_config
from protos.raftsched.v1 import scheduler_pb2 as pb
from rpc import convert as cv
from rpc.client.client import Client

_SPAN = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class UsageError(RaftschedError):
    pass


def parse_span_ms(text: str) -> int:
    """'1s', '500ms', '1h30m', '-5s' -> milliseconds (negative kept, for the server to refuse)."""
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("-")
    if body.isdigit():
        return sign * int(body) * 1000
    pos, total = 0, 0.0
    for m in _SPAN.finditer(body):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_MS[m.group(2)]
        pos = m.end()
    if pos != len(body) or not body:
        raise UsageError(f"cannot read span {text!r}: use forms like 30s, 500ms, 5m, 1h30m, 1d")
    return sign * int(total)


def parse_time_ms(text: str) -> int:
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"cannot read time {text!r}: use ISO 8601 such as 2026-12-01T09:00:00Z") from exc
    if when.tzinfo is None:
        raise UsageError(f"time {text!r} has no zone: add Z or an offset such as +01:00")
    return int(when.timestamp() * 1000)


def _fmt_ts(t: Any) -> str:
    if not t.seconds and not t.nanos:
        return "-"
    return dt.datetime.fromtimestamp(t.seconds + t.nanos / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _schedule_text(spec: pb.JobSpec) -> str:
    kind = spec.WhichOneof("schedule")
    if kind == "at":
        return f"at {_fmt_ts(spec.at)}"
    if kind in ("after", "every"):
        return f"{kind} {cv.dur_ms(getattr(spec, kind)) / 1000:g}s"
    if kind == "cron":
        return f"cron '{spec.cron.expression}' {spec.cron.timezone}"
    return "-"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def _job_row(j: pb.Job) -> list[str]:
    return [
        j.job_id,
        j.spec.name,
        j.spec.queue,
        pb.JobStatus.Name(j.status)[11:],
        _schedule_text(j.spec),
        _fmt_ts(j.next_fire_time),
    ]


def _run_row(r: pb.Run) -> list[str]:
    status = pb.RunStatus.Name(r.status)[11:]
    note = r.error[:60] if r.error else ""
    return [r.run_id, status, _fmt_ts(r.scheduled_time), _fmt_ts(r.fired_at), str(r.attempt), note]


JOB_HEADERS = ["JOB ID", "NAME", "QUEUE", "STATUS", "SCHEDULE", "NEXT FIRE"]
RUN_HEADERS = ["RUN ID", "STATUS", "SCHEDULED", "FIRED", "ATTEMPT", "NOTE"]


def _spec_from_args(a: argparse.Namespace) -> pb.JobSpec:
    spec = pb.JobSpec(name=a.name or "", queue=a.queue or "", type=a.type or "")
    if a.payload_file:
        with open(a.payload_file, "rb") as f:
            spec.payload = f.read()
    elif a.payload is not None:
        spec.payload = a.payload.encode("utf-8")
    chosen = [k for k in ("at", "after", "every", "cron") if getattr(a, k)]
    if len(chosen) != 1:
        raise UsageError("give exactly one schedule: --at TIME, --after SPAN, --every SPAN or --cron EXPR [--tz ZONE]")
    if a.at:
        cv.to_ts(parse_time_ms(a.at), spec.at)
    elif a.after:
        cv.to_dur(parse_span_ms(a.after), spec.after)
    elif a.every:
        cv.to_dur(parse_span_ms(a.every), spec.every)
    else:
        spec.cron.expression, spec.cron.timezone = a.cron, a.tz or "UTC"
    if a.max_attempts:
        spec.retry.max_attempts = a.max_attempts
    if a.history_limit:
        spec.history_limit = a.history_limit
    for flag, field in (
        ("lease_ttl", "lease_ttl"),
        ("timeout", "timeout"),
        ("catchup_window", "catchup_window"),
        ("history_ttl", "history_ttl"),
    ):
        if getattr(a, flag):
            cv.to_dur(parse_span_ms(getattr(a, flag)), getattr(spec, field))
    if a.concurrency:
        spec.concurrency = pb.ConcurrencyPolicy.Value(f"CONCURRENCY_POLICY_{a.concurrency.upper()}")
    if a.misfire:
        spec.misfire = pb.MisfirePolicy.Value(f"MISFIRE_POLICY_{a.misfire.upper()}")
    return spec


def _add_spec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default="")
    p.add_argument("--queue", default="")
    p.add_argument("--type", default="", help="shell (default), http, or a registered handler name")
    p.add_argument(
        "--payload",
        help='payload text: for shell JSON such as \'{"command": "echo hi", "env": {}, "cwd": "/tmp"}\', '
        'for http \'{"url": "https://...", "method": "POST", "headers": {}, "body": "..."}\'',
    )
    p.add_argument("--payload-file")
    p.add_argument("--at", help="ISO time, e.g. 2026-12-01T09:00:00Z")
    p.add_argument("--after", help="span, e.g. 30s")
    p.add_argument("--every", help="span, e.g. 1m")
    p.add_argument("--cron", help="cron expression, e.g. '30 2 * * *'")
    p.add_argument("--tz", help="IANA time zone for --cron, e.g. Europe/Berlin")
    p.add_argument("--max-attempts", type=int, default=0)
    p.add_argument("--lease-ttl")
    p.add_argument("--timeout")
    p.add_argument("--catchup-window")
    p.add_argument("--concurrency", choices=["allow", "forbid", "replace"])
    p.add_argument("--misfire", choices=["fire_all", "fire_once", "skip"])
    p.add_argument("--history-limit", type=int, default=0, help="finished runs kept (default 1000)")
    p.add_argument("--history-ttl", help="how long finished runs are kept, e.g. 7d (default)")


def add_client_commands(sub: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--cluster", help="comma-separated gRPC addresses (default: $RAFTSCHED_CLUSTER or 127.0.0.1:50051)")
    common.add_argument("--config", help="read node addresses from this cluster.toml")
    common.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_security_args(common)

    job = sub.add_parser("job", help="create, list and manage jobs").add_subparsers(dest="action", required=True)
    create = job.add_parser("create", parents=[common], help="create a job")
    _add_spec_args(create)
    create.add_argument("--idempotency-key", default="")
    lst = job.add_parser("list", parents=[common])
    lst.add_argument("--queue", default="")
    lst.add_argument("--status", choices=["active", "paused", "completed", "deleted"])
    lst.add_argument("--name-prefix", default="")
    for action in ("get", "pause", "resume", "delete", "trigger"):
        job.add_parser(action, parents=[common]).add_argument("job_id")
    preview = job.add_parser("preview", parents=[common], help="show the next instants of a schedule")
    _add_spec_args(preview)
    preview.add_argument("--count", type=int, default=10)

    run = sub.add_parser("run", help="inspect and cancel runs").add_subparsers(dest="action", required=True)
    rl = run.add_parser("list", parents=[common])
    rl.add_argument("--job", default="")
    rl.add_argument("--status", choices=["pending", "leased", "succeeded", "failed", "cancelled", "dead_letter", "skipped"])
    for action in ("get", "cancel"):
        run.add_parser(action, parents=[common]).add_argument("run_id")
    logs = run.add_parser("logs", parents=[common], help="print a run's log and result")
    logs.add_argument("run_id")
    logs.add_argument("--attempt", type=int, default=0)
    logs.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="wait until the run ends, showing its status and its output as it comes (about once a second)",
    )
    logs.add_argument("--interval", type=float, default=1.0, help=argparse.SUPPRESS)
    watch = run.add_parser("watch", parents=[common], help="stream run changes as they happen")
    watch.add_argument("--job", default="")
    watch.add_argument("--queue", default="")
    watch.add_argument(
        "--kind",
        action="append",
        default=[],
        help="only this kind of change (repeatable): fired, skipped, leased, retry_scheduled, cancel_requested, finished, pruned",
    )

    cluster = sub.add_parser("cluster", help="cluster status, membership, backup").add_subparsers(dest="action", required=True)
    cluster.add_parser("status", parents=[common])
    add = cluster.add_parser("add-node", parents=[common], help="add a member (then start it with raftsched node --join)")
    add.add_argument("--id", required=True, help="the new member's node id")
    add.add_argument("--raft", required=True, help="host:port of its Raft endpoint")
    add.add_argument("--grpc", required=True, help="host:port of its gRPC endpoint")
    add.add_argument("--http", default="", help="host:port of its HTTP endpoint (optional)")
    rm = cluster.add_parser("remove-node", parents=[common], help="remove a member (the leader included)")
    rm.add_argument("--id", required=True, help="the member's node id")
    backup = cluster.add_parser("backup", parents=[common], help="save a consistent copy of the state to FILE")
    backup.add_argument("file")


def _connect(a: argparse.Namespace) -> Client:
    """A client for the nodes and the TLS/token settings the flags, environment or --config name."""
    cfg: ClusterConfig | None = load_config(a.config) if a.config else None
    if a.cluster:
        addresses = [x.strip() for x in a.cluster.split(",") if x.strip()]
    elif cfg is not None:
        addresses = cfg.grpc_addresses()
    else:
        addresses = [x for x in os.environ.get("RAFTSCHED_CLUSTER", "127.0.0.1:50051").split(",") if x]
    return Client(addresses, security=security_from_args(a, cfg))


def _rpc_error_text(exc: grpc.RpcError) -> str:
    """The status and its details, with a hint for the connection failures TLS and tokens cause."""
    text = f"{exc.code().name}: {exc.details()}"
    details = (exc.details() or "").lower()
    tls_words = ("ssl", "handshake", "certificate", "tls")
    if "tcp handshaker" in details:  # gRPC's words for a TCP connection that was never answered: not TLS
        text += "\n(no answer from the node: is it down, or a firewall in the way? give --cluster the addresses of live nodes)"
    elif exc.code() == grpc.StatusCode.UNAVAILABLE and any(w in details for w in tls_words):
        text += "\n(a TLS problem: check --ca-file (the CA that signed the nodes' certificates) and, if the nodes require client certificates, --cert-file/--key-file)"
    elif exc.code() == grpc.StatusCode.UNAVAILABLE and "socket closed" in details:
        text += "\n(if the nodes serve TLS, give --ca-file)"
    return text


def _print(a: argparse.Namespace, msg: Any, text: str) -> None:
    if a.json:
        print(json_format.MessageToJson(msg, preserving_proto_field_name=True))
    else:
        print(text)


def _job_cmd(a: argparse.Namespace, client: Client) -> None:
    if a.action == "create":
        j = client.create_job(_spec_from_args(a), a.idempotency_key)
        _print(a, j, _table(JOB_HEADERS, [_job_row(j)]))
    elif a.action == "list":
        status = pb.JobStatus.Value(f"JOB_STATUS_{a.status.upper()}") if a.status else 0
        jobs = client.list_jobs(a.queue, status, a.name_prefix)
        _print(a, pb.ListJobsResponse(jobs=jobs), _table(JOB_HEADERS, [_job_row(j) for j in jobs]))
    elif a.action == "preview":
        resp = client.job("PreviewSchedule", pb.PreviewScheduleRequest(spec=_spec_from_args(a), count=a.count))
        notes = list(resp.notes) + [""] * (len(resp.times) - len(resp.notes))  # an older server sends none
        _print(a, resp, "\n".join(f"{_fmt_ts(t)}  {n}".rstrip() for t, n in zip(resp.times, notes)))
    elif a.action == "trigger":
        r = client.job("TriggerJob", pb.TriggerJobRequest(job_id=a.job_id))
        _print(a, r, _table(RUN_HEADERS, [_run_row(r)]))
    else:
        method = {"get": "GetJob", "pause": "PauseJob", "resume": "ResumeJob", "delete": "DeleteJob"}[a.action]
        request = getattr(pb, f"{method}Request")(job_id=a.job_id)
        j = client.job(method, request)
        _print(a, j, _table(JOB_HEADERS, [_job_row(j)]))


def _run_cmd(a: argparse.Namespace, client: Client) -> None:
    if a.action == "list":
        status = pb.RunStatus.Value(f"RUN_STATUS_{a.status.upper()}") if a.status else 0
        runs = client.list_runs(a.job, status)
        _print(a, pb.ListRunsResponse(runs=runs), _table(RUN_HEADERS, [_run_row(r) for r in runs]))
    elif a.action in ("get", "cancel"):
        method = "GetRun" if a.action == "get" else "CancelRun"
        r = client.job(method, getattr(pb, f"{method}Request")(run_id=a.run_id))
        _print(a, r, _table(RUN_HEADERS, [_run_row(r)]))
    elif a.action == "logs" and a.follow:
        _follow_logs(a, client)
    elif a.action == "logs":
        out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=a.run_id, attempt=a.attempt))
        _print(a, out, out.log.decode("utf-8", "replace") + _output_notes(out))
    elif a.action == "watch":
        for ev in client.watch_runs(a.job, a.queue, kinds=a.kind):
            if a.json:
                print(json_format.MessageToJson(ev, preserving_proto_field_name=True, indent=None), flush=True)
            else:
                print(f"{_fmt_ts(ev.observed_at)}  {ev.kind:<16} " + "  ".join(_run_row(ev.run)), flush=True)


def _output_notes(out: pb.RunOutput) -> str:
    text = f"\n--- result ---\n{out.result.decode('utf-8', 'replace')}" if out.result else ""
    if out.missing_reason:
        reason = out.missing_reason
        text += f"\n({reason})" if reason.startswith("output missing") else f"\n(output missing: {reason})"
    return text


_TERMINAL = {
    pb.RUN_STATUS_SUCCEEDED,
    pb.RUN_STATUS_FAILED,
    pb.RUN_STATUS_CANCELLED,
    pb.RUN_STATUS_DEAD_LETTER,
    pb.RUN_STATUS_SKIPPED,
}


def _follow_logs(a: argparse.Namespace, client: Client) -> None:
    """Follow a run until it ends: status changes on stderr, its output on stdout as it comes, then the result.

    While an attempt runs, GetRunOutput answers with what its executor has
    shipped so far (``live``, about once a second); each poll passes the
    offset reached, so only new bytes travel, and the stored log continues
    from the same offset when the attempt ends. A new attempt (a retry, on
    this executor or another: a new fencing token) is announced on stderr and
    its output printed from its start. ``--json`` prints the final answer only.
    """
    seen_state: tuple[int, int, str] | None = None
    shown: tuple[int, int] | None = None  # (attempt, fencing token) whose output stdout carries
    offset, line_open, notes = 0, False, set()
    while True:
        run = client.get_run(a.run_id)
        state = (run.status, run.attempt, run.executor_id)
        if state != seen_state:
            seen_state = state
            where = f" on {run.executor_id}" if run.executor_id and run.status == pb.RUN_STATUS_LEASED else ""
            note = f": {run.error}" if run.error and run.status != pb.RUN_STATUS_LEASED else ""
            status = pb.RunStatus.Name(run.status)[11:]
            print(f"[run {run.run_id}: {status}, attempt {run.attempt}{where}{note}]", file=sys.stderr, flush=True)
        terminal = run.status in _TERMINAL
        out: pb.RunOutput | None = None
        if run.attempt or terminal:
            ask = pb.GetRunOutputRequest(run_id=a.run_id, offset=0 if a.json else offset)
            out = client.job("GetRunOutput", ask)
            if (out.attempt, out.fencing_token) != shown and not a.json:
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
                shown, offset, line_open = (out.attempt, out.fencing_token), 0, False
            if out.log and not a.json:
                sys.stdout.buffer.write(out.log)
                sys.stdout.flush()
                line_open = not out.log.endswith(b"\n")
            offset = max(offset, out.next_offset)
            if out.note and out.note not in notes and not a.json:
                notes.add(out.note)
                print(f"[{out.note}]", file=sys.stderr, flush=True)
        more = out is not None and out.next_offset < out.size  # more than one answer carries: ask again now
        if terminal and out is not None and not more:
            text = _output_notes(out)[0 if line_open else 1 :]
            if a.json or text:
                _print(a, out, text)
            return
        if not more:
            time.sleep(max(0.05, a.interval))


#: membership changes and backups may take a while (a leadership hand-over, a snapshot of a large state)
ADMIN_TIMEOUT_S = 120.0


def _cluster_cmd(a: argparse.Namespace, client: Client) -> None:
    if a.action == "backup":
        from cluster.app.backup_restore import save_backup

        index, size = save_backup(client.backup(ADMIN_TIMEOUT_S), a.file)
        print(f"backup of the state at index {index} ({size} bytes) written to {a.file}")
        return
    if a.action == "add-node":
        req = pb.AddNodeRequest(id=a.id, raft_address=a.raft, grpc_address=a.grpc, http_address=a.http)
        s = client.cluster("AddNode", req, timeout=ADMIN_TIMEOUT_S)
    elif a.action == "remove-node":
        s = client.cluster("RemoveNode", pb.RemoveNodeRequest(id=a.id), timeout=ADMIN_TIMEOUT_S)
    else:
        s = client.cluster_status()
    rows = [
        [m.id, pb.MemberRole.Name(m.role)[12:], m.raft_address, m.grpc_address, "yes" if m.reachable else "no", m.version or "?"]
        + ([m.http_address or "-"] if any(x.http_address for x in s.members) else [])
        for m in s.members
    ]
    head = f"leader: {s.leader_id or '(none)'}  term: {s.term}  commit: {s.commit_index}  applied: {s.applied_index}  (answered by {s.self_id})"
    head += f"\ncommand format: {s.command_format or '?'}" + (
        f"  membership change in flight: {s.membership_change}" if s.membership_change else ""
    )
    runs = ", ".join(f"{f.name.replace('_', ' ')} {v}" for f, v in s.runs.ListFields()) or "none"
    counts = f"jobs: {s.jobs}  runs: {runs}"
    if s.pending_by_queue:
        deepest = sorted(s.pending_by_queue.items(), key=lambda kv: (-kv[1], kv[0]))
        more = f", ... {len(deepest) - 10} more" if len(deepest) > 10 else ""
        counts += "\npending by queue: " + ", ".join(f"{q} {n}" for q, n in deepest[:10]) + more
    _print(
        a,
        s,
        head
        + "\n"
        + counts
        + "\n"
        + _table(["NODE", "ROLE", "RAFT", "GRPC", "REACHABLE", "VERSION", "HTTP"][: len(rows[0]) if rows else 6], rows),
    )


def run(a: argparse.Namespace) -> int:
    try:
        with _connect(a) as client:
            {"job": _job_cmd, "run": _run_cmd, "cluster": _cluster_cmd}[a.command](a, client)
    except (UsageError, ConfigError) as exc:
        print(f"raftsched: {exc}", file=sys.stderr)
        return 2
    except grpc.RpcError as exc:
        print(f"raftsched: {_rpc_error_text(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
