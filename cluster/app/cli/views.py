"""The columns of jobs and runs in tables (``-o table`` and ``-o wide``); times in local time."""

from __future__ import annotations

from raftsched.cluster.app.cli.output import Column, View, payload_text
from raftsched.cluster.app.cli.timefmt import local, span_text, ts_ms, utc_iso
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv


def schedule_text(spec: pb.JobSpec) -> str:
    kind = spec.WhichOneof("schedule")
    if kind == "at":
        at = ts_ms(spec.at)
        return f"at {utc_iso(at)}" if at is not None else "at -"
    if kind in ("after", "every"):
        return f"{kind} {span_text(cv.dur_ms(getattr(spec, kind)))}"
    if kind == "cron":
        return f"cron '{spec.cron.expression}' {spec.cron.timezone or 'UTC'}"
    return "-"


def job_status(j: pb.Job) -> str:
    return pb.JobStatus.Name(j.status).removeprefix("JOB_STATUS_")


def run_status(r: pb.Run) -> str:
    return pb.RunStatus.Name(r.status).removeprefix("RUN_STATUS_")


def _enum(value: int, enum: object, prefix: str) -> str:
    return enum.Name(value).removeprefix(prefix).lower() if value else "-"  # type: ignore[attr-defined]


def run_note(r: pb.Run, width: int = 60) -> str:
    if r.error:
        text = " ".join(r.error.split())
        return text if len(text) <= width else text[: width - 3] + "..."
    if r.status == pb.RUN_STATUS_LEASED and r.executor_id:
        return f"on {r.executor_id}" + (", cancel requested" if r.cancel_requested else "")
    return ""


JOB_VIEW = View(
    columns=[
        Column("JOB ID", lambda j: j.job_id),
        Column("NAME", lambda j: j.spec.name),
        Column("QUEUE", lambda j: j.spec.queue),
        Column("STATUS", job_status),
        Column("SCHEDULE", lambda j: schedule_text(j.spec)),
        Column("NEXT FIRE", lambda j: local(ts_ms(j.next_fire_time))),
    ],
    wide=[
        Column("TYPE", lambda j: j.spec.type),
        Column("MISFIRE", lambda j: _enum(j.spec.misfire, pb.MisfirePolicy, "MISFIRE_POLICY_")),
        Column("CONCURRENCY", lambda j: _enum(j.spec.concurrency, pb.ConcurrencyPolicy, "CONCURRENCY_POLICY_")),
        Column("CREATED", lambda j: local(ts_ms(j.created_at))),
        Column("PAYLOAD", lambda j: payload_text(j.spec.payload)),
    ],
    id=lambda j: j.job_id,
    list_key="jobs",
)

RUN_VIEW = View(
    columns=[
        Column("RUN ID", lambda r: r.run_id),
        Column("STATUS", run_status),
        Column("SCHEDULED", lambda r: local(ts_ms(r.scheduled_time), millis=True)),
        Column("FIRED", lambda r: local(ts_ms(r.fired_at), millis=True)),
        Column("ATTEMPT", lambda r: str(r.attempt)),
        Column("NOTE", run_note),
    ],
    wide=[
        Column("EXECUTOR", lambda r: r.executor_id or "-"),
        Column("TOKEN", lambda r: str(r.fencing_token) if r.fencing_token else "-"),
        Column("STARTED", lambda r: local(ts_ms(r.started_at), millis=True)),
        Column("FINISHED", lambda r: local(ts_ms(r.finished_at), millis=True)),
        Column("LOG", lambda r: r.log_uri or "-"),
    ],
    id=lambda r: r.run_id,
    list_key="runs",
)
