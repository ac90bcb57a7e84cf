"""The protobuf requests behind the SDK's methods, built once for ``Client`` and ``AsyncClient`` alike.

Each function takes the method's keyword arguments and returns its request
(``TypeError``/``ValueError`` for arguments that cannot be sent); the
status filters take names (``"FAILED"``, ``"failed"``) as well as numbers.
"""

from __future__ import annotations

import uuid
from typing import Any, Mapping

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.sdk import codec
from raftsched.sdk.durations import instant_ms
from raftsched.sdk.spec import build_spec, enum_value

#: ``list_*`` page size when none is given
PAGE_SIZE = 100
#: ``wait_run``'s polls: the first after this long, then 1.5 times longer each, up to ``POLL_MAX_S``
POLL_FIRST_S = 0.05
POLL_MAX_S = 0.5


def create_job(name: str, idempotency_key: str = "", request_id: str = "", **kwargs: Any) -> pb.CreateJobRequest:
    """``CreateJob``: the spec from ``build_spec``; a fresh idempotency key unless one is given, so that a
    retried call never makes two jobs."""
    spec = build_spec(name, **kwargs)
    key = idempotency_key or f"sdk-{uuid.uuid4().hex}"
    return pb.CreateJobRequest(spec=spec, idempotency_key=key, request_id=request_id)


def create_jobs(jobs: list[Mapping[str, Any]]) -> pb.CreateJobsRequest:
    """``CreateJobs``: one item per mapping of ``create_job``'s arguments (``name`` included)."""
    items = []
    for i, job in enumerate(jobs):
        args = dict(job)
        if "name" not in args:
            raise TypeError(f"jobs[{i}] has no name: each item takes create_job's arguments, name included")
        items.append(create_job(args.pop("name"), **args))
    return pb.CreateJobsRequest(jobs=items)


def run_status(status: str | int | None) -> int:
    """A run status filter: its name or number (None: any)."""
    return 0 if status is None else enum_value(pb.RunStatus.DESCRIPTOR, status, "status")


def job_status(status: str | int | None) -> int:
    """A job status filter: its name or number (None: any)."""
    return 0 if status is None else enum_value(pb.JobStatus.DESCRIPTOR, status, "status")


def list_jobs(
    queue: str, status: str | int | None, name_prefix: str, page_size: int, token: str, label_selector: str = ""
) -> pb.ListJobsRequest:
    """One page of ``ListJobs`` (``token``: the previous page's ``next_page_token``)."""
    filtered: Any = job_status(status)
    return pb.ListJobsRequest(
        queue=queue, status=filtered, name_prefix=name_prefix, page_size=page_size, page_token=token,
        label_selector=label_selector,
    )  # fmt: skip


def list_runs(job_id: str, status: str | int | None, page_size: int, token: str, label_selector: str = "") -> pb.ListRunsRequest:
    """One page of ``ListRuns`` (``token``: the previous page's ``next_page_token``)."""
    filtered: Any = run_status(status)
    return pb.ListRunsRequest(
        job_id=job_id, status=filtered, page_size=page_size, page_token=token, label_selector=label_selector
    )


def trigger_job(job_id: str, request_id: str, payload: Any) -> pb.TriggerJobRequest:
    """``TriggerJob``: ``payload`` this run's own (as ``create_job`` takes one; None: the job's)."""
    req = pb.TriggerJobRequest(job_id=job_id, request_id=request_id)
    if payload is not None:
        req.payload = codec.encode(payload, "payload")
    return req


def backfill_job(job_id: str, start: Any, end: Any, dry_run: bool) -> pb.BackfillJobRequest:
    """``BackfillJob`` of ``[start, end)`` (aware datetimes or ISO text)."""
    req = pb.BackfillJobRequest(job_id=job_id, dry_run=dry_run)
    cv.to_ts(instant_ms(start, "start"), req.start_time)
    cv.to_ts(instant_ms(end, "end"), req.end_time)
    return req


def pause_job(job_id: str, request_id: str, note: str, until: Any) -> pb.PauseJobRequest:
    """``PauseJob``: ``note`` why, ``until`` (an aware datetime or ISO text; None: until resumed)."""
    req = pb.PauseJobRequest(job_id=job_id, request_id=request_id, note=note)
    if until is not None:
        cv.to_ts(instant_ms(until, "until"), req.until)
    return req


def preview(count: int, start: Any, schedule: dict[str, Any]) -> pb.PreviewScheduleRequest:
    """``PreviewSchedule``: the schedule given as ``create_job`` takes it (``every=``, ``cron=`` and ``tz=``,
    ...); instants after ``start`` (an aware datetime or ISO text; None: now)."""
    req = pb.PreviewScheduleRequest(spec=build_spec("preview", **schedule), count=count)
    if start is not None:
        cv.to_ts(instant_ms(start, "start"), req.after)
    return req


def add_node(node_id: str, raft_address: str, grpc_address: str, http_address: str) -> pb.AddNodeRequest:
    """``AddNode`` for a member with these addresses."""
    return pb.AddNodeRequest(id=node_id, raft_address=raft_address, grpc_address=grpc_address, http_address=http_address)


def watch(job_id: str, queue: str, kinds: list[str] | None) -> dict[str, Any]:
    """The filters of ``watch_runs`` as the followers take them."""
    return {"job_id": job_id, "queue": queue, "kinds": list(kinds or [])}
