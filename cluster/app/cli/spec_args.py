"""The flags that describe a job (``job create``, ``job update``, ``job preview``) and the JobSpec
they make, checked where the user is: one schedule, ``--tz`` only with ``--cron``, spans with units.

``build_spec(a)`` makes a new spec from the flags; ``update_spec(spec, a)``
changes only what the flags name in an existing one (``job update``).
"""

from __future__ import annotations

import argparse

from raftsched.cluster.app.cli.args import UsageError, parse_span_ms, parse_time_ms
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv

SCHEDULES = ("at", "after", "every", "cron")
_SPANS = (("lease_ttl", "--lease-ttl"), ("timeout", "--timeout"), ("catchup_window", "--catchup-window"),
          ("history_ttl", "--history-ttl"))  # fmt: skip


def add_spec_args(p: argparse.ArgumentParser, schedule_only: bool = False) -> None:
    s = p.add_argument_group("schedule (exactly one of --at, --after, --every, --cron)")
    s.add_argument("--at", metavar="TIME", help="once, at this instant: ISO 8601 with Z or an offset, e.g. 2026-12-01T09:00:00Z")
    s.add_argument("--after", metavar="SPAN", help="once, this long after creation, e.g. 30s, 5m, 1h30m")
    s.add_argument("--every", metavar="SPAN", help="repeatedly, every span counted from creation, e.g. 2s, 10m, 1d")
    s.add_argument(
        "--cron",
        metavar="EXPR",
        help="at the instants of a cron expression: 5 fields, minute hour day-of-month month day-of-week, e.g. "
        "'30 2 * * *'; or 6 with the seconds LAST (not first, as in Quartz): '0 12 * * * 30' is 12:00:30",
    )
    s.add_argument("--tz", metavar="ZONE", help="IANA time zone of --cron, e.g. Europe/Berlin (default UTC); only with --cron")
    if schedule_only:
        return
    s.add_argument(
        "--allow-past",
        action="store_true",
        help="accept an --at instant in the past (the cluster skips it, or fires it at once, as its misfire policy "
        "and catch-up window say)",
    )
    j = p.add_argument_group("what runs")
    j.add_argument("--name", help="a human name (need not be unique)")
    j.add_argument("--queue", help="the queue its runs are offered on (default: default)")
    j.add_argument("--type", help="shell (default), http, noop, or a type an executor's --handler registers")
    j.add_argument(
        "--payload",
        metavar="TEXT",
        help='for shell: JSON such as \'{"command": "echo hi", "env": {}, "cwd": "/tmp"}\'; '
        'for http: \'{"url": "https://...", "method": "POST", "headers": {}, "body": "..."}\'',
    )
    j.add_argument("--payload-file", metavar="FILE", help="read the payload from a file")
    r = p.add_argument_group("policies")
    r.add_argument("--max-attempts", type=int, metavar="N", help="attempts per run before DEAD_LETTER (default 3)")
    r.add_argument("--lease-ttl", metavar="SPAN", help="how long an executor holds a run without renewing (default 30s)")
    r.add_argument("--timeout", metavar="SPAN", help="longest an attempt may run (default: none)")
    r.add_argument("--concurrency", choices=["allow", "forbid", "replace"], help="when a run is due while another still runs")
    r.add_argument("--misfire", choices=["fire_all", "fire_once", "skip"], help="instants missed while no leader fired them")
    r.add_argument("--catchup-window", metavar="SPAN", help="how late a missed instant may still fire")
    r.add_argument("--history-limit", type=int, metavar="N", help="finished runs kept (default 1000)")
    r.add_argument("--history-ttl", metavar="SPAN", help="how long finished runs are kept (default 7d)")
    x = p.add_argument_group("bounds, exceptions and labels (command format 5)")
    x.add_argument("--start", metavar="TIME", help="no instant before this (ISO 8601 with Z or an offset)")
    x.add_argument("--end", metavar="TIME", help="no instant after this; then the job is COMPLETED")
    x.add_argument("--jitter", metavar="SPAN", help="each run leasable up to this long after its instant (deterministic)")
    x.add_argument(
        "--skip-date", action="append", metavar="YYYY-MM-DD", help="no instant on this date, in the schedule's zone (repeat)"
    )
    x.add_argument(
        "--skip-window", action="append", metavar="START/END", help="no instant in [START, END) (ISO 8601 times; repeat)"
    )
    x.add_argument(
        "--extra-cron",
        action="append",
        metavar="EXPR",
        help="with --cron: also fire at this expression's instants, in --tz (repeat)",
    )
    x.add_argument("--max-runs", type=int, metavar="N", help="complete the job after N runs of its schedule")
    x.add_argument("--pause-after-failures", type=int, metavar="N", help="pause the job after N failed runs in a row")
    x.add_argument("--trigger-on-create", action="store_true", default=None, help="also make one run at once (create)")
    x.add_argument("--pending-ttl", metavar="SPAN", help="a run nobody leases this long after it is due ends EXPIRED")
    x.add_argument("--priority", type=int, metavar="0-9", help="higher priorities are leased first within a queue")
    x.add_argument("--concurrency-key", metavar="KEY", help="jobs sharing a key run at most --concurrency-limit runs at once")
    x.add_argument("--concurrency-limit", type=int, metavar="N", help="with --concurrency-key: at most N runs LEASED at once")
    x.add_argument(
        "--label", action="append", metavar="KEY=VALUE", help="a label, e.g. team=billing (repeat); KEY= removes one on update"
    )


def given_schedule(a: argparse.Namespace) -> list[str]:
    return [k for k in SCHEDULES if getattr(a, k, None)]


def _check_tz(a: argparse.Namespace, kind: str | None) -> None:
    if a.tz and kind not in (None, "cron"):
        raise UsageError(
            f"--tz applies only to --cron (a time of day in a zone); --{kind} does not use it: "
            f"{'--at takes an offset or Z' if kind == 'at' else f'--{kind} counts real time'}. Drop --tz"
        )


def set_schedule(spec: pb.JobSpec, a: argparse.Namespace, keep_zone: str = "") -> None:
    """Set the one schedule the flags give (``keep_zone``: the zone a --cron without --tz keeps)."""
    chosen = given_schedule(a)
    if len(chosen) != 1:
        got = f" (got {', '.join('--' + k for k in chosen)})" if chosen else ""
        raise UsageError(f"give exactly one schedule: --at TIME, --after SPAN, --every SPAN or --cron EXPR [--tz ZONE]{got}")
    kind = chosen[0]
    _check_tz(a, kind)
    if kind == "at":
        cv.to_ts(parse_time_ms(a.at, "--at"), spec.at)
    elif kind in ("after", "every"):
        cv.to_dur(parse_span_ms(getattr(a, kind), f"--{kind}"), getattr(spec, kind))
    else:
        spec.cron.expression, spec.cron.timezone = a.cron, a.tz or keep_zone or "UTC"


def build_spec(a: argparse.Namespace) -> pb.JobSpec:
    """A new spec from the flags (the server fills in the defaults of what is not given)."""
    spec = pb.JobSpec(name=a.name or "", queue=a.queue or "", type=a.type or "")
    set_schedule(spec, a)
    _apply_rest(spec, a)
    return spec


def update_spec(spec: pb.JobSpec, a: argparse.Namespace) -> pb.JobSpec:
    """``spec`` with what the flags give changed, the rest kept."""
    new = pb.JobSpec()
    new.CopyFrom(spec)
    for name in ("name", "queue", "type"):
        if getattr(a, name) is not None:
            setattr(new, name, getattr(a, name))
    change_schedule(new, a)
    _apply_rest(new, a)
    if new == spec:
        raise UsageError("nothing to change: give the flags of what to change, e.g. --every 5m or --payload '...'")
    return new


def _apply_rest(spec: pb.JobSpec, a: argparse.Namespace) -> None:
    if a.payload is not None and a.payload_file:
        raise UsageError("give --payload or --payload-file, not both")
    if a.payload_file:
        try:
            with open(a.payload_file, "rb") as f:
                spec.payload = f.read()
        except OSError as exc:
            raise UsageError(f"--payload-file {a.payload_file}: cannot read it: {exc.strerror}") from exc
    elif a.payload is not None:
        spec.payload = a.payload.encode("utf-8")
    if a.max_attempts is not None:
        spec.retry.max_attempts = a.max_attempts
    if a.history_limit is not None:
        spec.history_limit = a.history_limit
    for field, flag in _SPANS:
        text = getattr(a, field)
        if text is not None:
            cv.to_dur(parse_span_ms(text, flag), getattr(spec, field))
    if a.concurrency:
        spec.concurrency = pb.ConcurrencyPolicy.Value(f"CONCURRENCY_POLICY_{a.concurrency.upper()}")
    if a.misfire:
        spec.misfire = pb.MisfirePolicy.Value(f"MISFIRE_POLICY_{a.misfire.upper()}")
    _apply_extras(spec, a)


def _apply_extras(spec: pb.JobSpec, a: argparse.Namespace) -> None:
    """The flags of bounds, exceptions and labels (a repeated flag given replaces the list)."""
    for attr, field in (("start", "start_time"), ("end", "end_time")):
        if getattr(a, attr):
            cv.to_ts(parse_time_ms(getattr(a, attr), f"--{attr}"), getattr(spec, field))
    if a.jitter:
        cv.to_dur(parse_span_ms(a.jitter, "--jitter"), spec.jitter)
    if a.skip_date:
        del spec.skip_dates[:]
        spec.skip_dates.extend(a.skip_date)
    if a.skip_window:
        del spec.skip_windows[:]
        for text in a.skip_window:
            start, sep, end = text.partition("/")
            if not sep:
                raise UsageError(f"--skip-window {text!r}: give START/END, e.g. 2026-12-24T00:00:00Z/2026-12-27T00:00:00Z")
            window = spec.skip_windows.add()
            cv.to_ts(parse_time_ms(start, "--skip-window start"), window.start)
            cv.to_ts(parse_time_ms(end, "--skip-window end"), window.end)
    if a.extra_cron:
        del spec.extra_crons[:]
        for expr in a.extra_cron:
            spec.extra_crons.add(expression=expr, timezone=spec.cron.timezone or "UTC")
    if a.pending_ttl:
        cv.to_dur(parse_span_ms(a.pending_ttl, "--pending-ttl"), spec.pending_ttl)
    if a.concurrency_key is not None:
        spec.concurrency_key = a.concurrency_key
    for attr in ("max_runs", "pause_after_failures", "trigger_on_create", "priority", "concurrency_limit"):
        if getattr(a, attr) is not None:
            setattr(spec, attr, getattr(a, attr))
    for text in a.label or ():
        key, sep, value = text.partition("=")
        if not sep:
            raise UsageError(f"--label {text!r}: give KEY=VALUE, e.g. team=billing")
        if value:
            spec.labels[key.strip()] = value
        else:
            spec.labels.pop(key.strip(), None)


def change_schedule(spec: pb.JobSpec, a: argparse.Namespace) -> None:
    """Replace ``spec``'s schedule with the one the flags give, if any; ``--tz`` alone changes a cron
    job's zone (and is refused for any other schedule)."""
    kind = spec.WhichOneof("schedule")
    if given_schedule(a):
        set_schedule(spec, a, keep_zone=spec.cron.timezone if kind == "cron" else "")
    elif a.tz:
        _check_tz(a, kind)
        spec.cron.timezone = a.tz


def preview_spec(a: argparse.Namespace, base: pb.JobSpec | None = None) -> pb.JobSpec:
    """The schedule to preview: ``base``'s (a job's) with the flags laid over it, else the flags'."""
    spec = pb.JobSpec()
    if base is not None:
        spec.CopyFrom(base)
        change_schedule(spec, a)
    else:
        set_schedule(spec, a)
    return spec
