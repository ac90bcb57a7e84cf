"""``raftsched job ...``: create, list, get, update, pause, resume, delete, trigger, preview."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Callable

from raftsched.cluster.app.cli.args import Command, UsageError, parse_from_ms, parse_time_ms
from raftsched.cluster.app.cli.cron_hint import six_field_warning
from raftsched.cluster.app.cli.output import render, render_message
from raftsched.cluster.app.cli.spec_args import add_spec_args, build_spec, given_schedule, preview_spec, update_spec
from raftsched.cluster.app.cli.spec_checks import catch_up_note, past_at_refusal
from raftsched.cluster.app.cli.timefmt import preview_line, zone_or_utc
from raftsched.cluster.app.cli.views import JOB_VIEW, RUN_VIEW
from raftsched.cluster.domain.errors import RaftschedError
from raftsched.cluster.domain.model import JobSpec
from raftsched.cluster.domain.unsafe_text import escape
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client


def _show_job(a: argparse.Namespace, job: pb.Job) -> None:
    print(render(a.output, JOB_VIEW, [job], single=True))


def _say(kind: str, text: str) -> None:
    print(f"raftsched: {kind}: {escape(text)}", file=sys.stderr)


def _domain_spec(spec: pb.JobSpec) -> JobSpec | None:
    """``spec`` with the cluster's defaults filled in (None when the cluster would refuse it: it says why)."""
    try:
        return cv.spec_from_pb(spec)
    except (RaftschedError, ValueError):
        return None


def refuse_past_at(a: argparse.Namespace, spec: pb.JobSpec, now_ms: int) -> None:
    """Before ``spec`` goes to the cluster: an ``--at`` in the past is a ``UsageError`` unless ``--allow-past``."""
    domain = _domain_spec(spec)
    refusal = past_at_refusal(domain, now_ms) if domain is not None and not a.allow_past else None
    if refusal:
        raise UsageError(refusal)


def say_surprises(spec: pb.JobSpec, now_ms: int, *, schedule: bool = True, policy: bool = True) -> None:
    """Once the cluster took ``spec``: a warning of a 6-field cron read seconds-last, a note of what FIRE_ALL does
    after an outage to instants less than a minute apart. ``schedule`` and ``policy``: whether the flags set the
    schedule, the misfire policy or its window (``job update`` speaks only of what it changed)."""
    if schedule and spec.WhichOneof("schedule") == "cron":
        warning = six_field_warning(spec.cron.expression)
        if warning:
            _say("warning", warning)
    domain = _domain_spec(spec)
    if domain is not None and (schedule or policy):
        note = catch_up_note(domain, now_ms, chosen=spec.misfire != pb.MISFIRE_POLICY_UNSPECIFIED)
        if note:
            _say("note", note)


def _now_ms() -> int:
    return int(time.time() * 1000)


def create(a: argparse.Namespace, client: Client) -> None:
    spec, now = build_spec(a), _now_ms()
    refuse_past_at(a, spec, now)
    _show_job(a, client.create_job(spec, a.idempotency_key))
    say_surprises(spec, now)


def update(a: argparse.Namespace, client: Client) -> None:
    job = client.get_job(a.job_id)
    spec, now, schedule = update_spec(job.spec, a), _now_ms(), bool(given_schedule(a))
    if schedule:
        refuse_past_at(a, spec, now)
    _show_job(a, client.job("UpdateJob", pb.UpdateJobRequest(job_id=a.job_id, spec=spec)))
    say_surprises(spec, now, schedule=schedule, policy=bool(a.misfire or a.catchup_window))


def list_jobs(a: argparse.Namespace, client: Client) -> None:
    status = pb.JobStatus.Value(f"JOB_STATUS_{a.status.upper()}") if a.status else 0
    print(render(a.output, JOB_VIEW, client.list_jobs(a.queue, status, a.name_prefix, label_selector=a.label_selector)))


def _by_id(method: str) -> Callable[[argparse.Namespace, Client], None]:
    def call(a: argparse.Namespace, client: Client) -> None:
        _show_job(a, client.job(method, getattr(pb, f"{method}Request")(job_id=a.job_id)))

    return call


def trigger(a: argparse.Namespace, client: Client) -> None:
    req = pb.TriggerJobRequest(job_id=a.job_id)
    if a.payload is not None:
        req.payload = a.payload.encode("utf-8")
    print(render(a.output, RUN_VIEW, [client.job("TriggerJob", req)], single=True))


def _trigger_args(p: argparse.ArgumentParser) -> None:
    _job_id(p)
    p.add_argument("--payload", help="this run's payload instead of the job's (for shell and http: its JSON)")


def backfill(a: argparse.Namespace, client: Client) -> None:
    req = pb.BackfillJobRequest(job_id=a.job_id, dry_run=a.dry_run)
    cv.to_ts(parse_time_ms(a.start, "--from"), req.start_time)
    cv.to_ts(parse_time_ms(a.end, "--to"), req.end_time)
    resp = client.job("BackfillJob", req)
    verb = "would make" if a.dry_run else "made"

    def text() -> str:
        lines = [f"{verb} {len(resp.instants)} run(s), for the past instants without one"]
        return "\n".join(lines + [f"  {preview_line(cv.ts_ms(t), zone_or_utc(''))}" for t in resp.instants])

    print(render_message(a.output, resp, text, "\n".join(r.run_id for r in resp.runs)))


def _backfill_args(p: argparse.ArgumentParser) -> None:
    _job_id(p)
    p.add_argument("--from", dest="start", required=True, metavar="TIME", help="the range's start (ISO 8601 with Z or an offset)")
    p.add_argument("--to", dest="end", required=True, metavar="TIME", help="the range's end, not included")
    p.add_argument("--dry-run", action="store_true", help="list the instants, make nothing")


def preview(a: argparse.Namespace, client: Client) -> None:
    spec = preview_spec(a, client.get_job(a.job).spec if a.job else None)
    zone_name = spec.cron.timezone if spec.WhichOneof("schedule") == "cron" else ""
    req = pb.PreviewScheduleRequest(spec=spec, count=a.count)
    if a.from_date:
        start = parse_from_ms(a.from_date, zone_name or "UTC")
        # instants at or after the date; "every"/"after" count from it as if the job were made then
        cv.to_ts(start if spec.WhichOneof("schedule") in ("every", "after") else start - 1, req.after)
    resp = client.job("PreviewSchedule", req)
    zone = zone_or_utc(zone_name)
    notes = list(resp.notes) + [""] * (len(resp.times) - len(resp.notes))  # an older server sends none

    def text() -> str:
        return "\n".join(preview_line(cv.ts_ms(t), zone, n) for t, n in zip(resp.times, notes))

    print(render_message(a.output, resp, text, "\n".join(preview_line(cv.ts_ms(t), zone) for t in resp.times)))
    warning = six_field_warning(spec.cron.expression) if spec.WhichOneof("schedule") == "cron" else None
    if warning:
        _say("warning", warning)


def _job_id(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", metavar="JOB_ID")


def _create_args(p: argparse.ArgumentParser) -> None:
    add_spec_args(p)
    p.add_argument("--idempotency-key", default="", help="the same key again returns the first job (safe retries)")


def _update_args(p: argparse.ArgumentParser) -> None:
    _job_id(p)
    add_spec_args(p)


def _list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--queue", default="", help="only this queue's jobs")
    p.add_argument("--status", choices=["active", "paused", "completed", "deleted"])
    p.add_argument("--name-prefix", default="", help="only jobs whose name starts so")
    p.add_argument("--label-selector", "-l", default="", help="only jobs with these labels: k=v, k!=v, k, !k, comma-separated")


def pause(a: argparse.Namespace, client: Client) -> None:
    req = pb.PauseJobRequest(job_id=a.job_id, note=a.note)
    if a.until:
        cv.to_ts(parse_time_ms(a.until, "--until"), req.until)
    _show_job(a, client.job("PauseJob", req))


def _pause_args(p: argparse.ArgumentParser) -> None:
    _job_id(p)
    p.add_argument("--note", default="", help="why, shown with the job (at most 512 characters)")
    p.add_argument("--until", metavar="TIME", help="resume by itself then (ISO 8601 with Z or an offset)")


def _preview_args(p: argparse.ArgumentParser) -> None:
    add_spec_args(p, schedule_only=True)
    p.add_argument("--job", metavar="JOB_ID", help="preview this job's schedule (its zone too)")
    p.add_argument(
        "--from",
        dest="from_date",
        metavar="DATE",
        help="the instants at or after DATE (e.g. 2026-10-20 or 2026-10-20T09:00), in the job's zone unless it "
        "names one (Z, +02:00); default now",
    )
    p.add_argument("--count", type=int, default=10, help="how many instants (default 10)")


COMMANDS = [
    Command(
        "create",
        "create a job",
        "raftsched job create --name nightly --cron '30 2 * * *' --tz Europe/Berlin --payload '{\"command\": \"echo report\"}'\n"
        'raftsched job create --name tick --every 2s --payload \'{"command": "date"}\' -o id',
        create,
        _create_args,
        "Create a job: one schedule, what to run (--type, --payload) and its policies. Prints the job\n"
        "(-o id: only its id). A shell payload must be the JSON object the type runs. An --at in the past is\n"
        "refused (it would be skipped, or fire at once) unless --allow-past; a 6-field cron whose seconds\n"
        "(the LAST field) are '*' is warned of, and so is misfire policy fire_all (the default) for instants\n"
        "less than a minute apart: after an outage it fires one run for every instant missed.",
    ),
    Command("list", "list jobs", "raftsched job list --status active -o wide", list_jobs, _list_args),
    Command("get", "show one job", "raftsched job get JOB_ID -o yaml", _by_id("GetJob"), _job_id),
    Command(
        "update",
        "change a job's schedule, payload or policies (the rest is kept)",
        "raftsched job update JOB_ID --every 5m\nraftsched job update JOB_ID --tz America/New_York   # a cron job's zone",
        update,
        _update_args,
        "Change what the flags name and keep the rest (the job's spec is read, changed and written back).\n"
        "A new schedule counts from now; --tz alone changes a cron job's zone.",
    ),
    Command(
        "pause",
        "stop firing a job (until resumed, or until --until)",
        "raftsched job pause JOB_ID --note 'deploy' --until 2026-12-01T06:00:00Z",
        pause,
        _pause_args,
    ),
    Command("resume", "fire a paused job again, from now", "raftsched job resume JOB_ID", _by_id("ResumeJob"), _job_id),
    Command("delete", "delete a job (it stays readable as DELETED)", "raftsched job delete JOB_ID", _by_id("DeleteJob"), _job_id),
    Command("trigger", "one extra run now", "raftsched job trigger JOB_ID [--payload '{...}']", trigger, _trigger_args),
    Command(
        "backfill",
        "runs for the past instants of a range that have none",
        "raftsched job backfill JOB_ID --from 2026-11-01T00:00:00Z --to 2026-11-08T00:00:00Z --dry-run",
        backfill,
        _backfill_args,
        "Make a run for each instant of the job's schedule in [--from, --to) that the job has already passed\n"
        "and that has no run (an instant it skipped has none), at most 10,000. --dry-run lists them only.\n"
        "Safe to run again: only the runs still missing are made.",
    ),
    Command(
        "preview",
        "the next instants of a schedule, in its zone with UTC beside it",
        "raftsched job preview --cron '30 2 * * *' --tz Europe/Berlin --from 2026-10-20 --count 8",
        preview,
        _preview_args,
        "Show the instants a schedule would fire at, in the job's own zone with UTC beside it, and what\n"
        "daylight saving time does to them. Writes nothing.",
    ),
]
