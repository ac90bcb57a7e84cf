"""JobService over gRPC: conversion around ``cluster.node.job_service.JobService``.

Any node serves every RPC: writes are proposed through Raft (pysyncobj
forwards a follower's proposal to the leader), reads run after a read
barrier, and WatchRuns streams what this node applies. GetRunOutput reads
the log at the run's ``log_uri`` through ``storage.output.OutputReader``
(``file://`` on this node's disk, ``s3://`` with the ``[logs]`` endpoint and
region); an output it cannot read is a ``missing_reason``, never an error.
"""

from __future__ import annotations

import copy
from typing import Callable, Iterator

import grpc

from cluster.domain.model import Run
from cluster.domain.results import Overloaded, ValidationError
from cluster.domain.state import JobStateMachine
from cluster.node.config import LogsConfig
from cluster.node.event_hub import RUN_EVENT_KINDS, EventHub
from cluster.node.job_service import JobService
from cluster.node.replicated_state import ReplicatedState
from protos.raftsched.v1 import scheduler_pb2 as pb
from protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from rpc import convert as cv
from rpc.server.errors import convert_each, fill_results, guarded, guarded_stream
from storage.output import OutputMissing, OutputReader

WATCH_POLL_S = 0.5
MAX_EXISTING = 10_000
#: how an executor marks, in a run's error, an output it could not store (cluster.executor.worker)
MISSING_MARK = "output missing: "


def output_reader(logs: LogsConfig) -> OutputReader:
    """Reads run output by URI; S3 with this node's [logs] endpoint and region (boto3 loaded on first use)."""

    def s3_reader() -> object:
        from storage.output_s3 import S3OutputReader

        return S3OutputReader(logs.endpoint_url, logs.region)

    return OutputReader(s3_reader)  # type: ignore[arg-type]


class JobServicer(pb_grpc.JobServiceServicer):
    def __init__(self, service: JobService, store: ReplicatedState, hub: EventHub, logs: LogsConfig | None = None) -> None:
        self._svc = service
        self._store = store
        self._hub = hub
        self._outputs = output_reader(logs or LogsConfig())

    @guarded
    def CreateJob(self, request: pb.CreateJobRequest, context: grpc.ServicerContext) -> pb.Job:
        return cv.job_to_pb(self._svc.create_job(cv.spec_from_pb(request.spec), request.idempotency_key))

    @guarded
    def CreateJobs(self, request: pb.CreateJobsRequest, context: grpc.ServicerContext) -> pb.CreateJobsResponse:
        items = convert_each(request.jobs, lambda req: (cv.spec_from_pb(req.spec), req.idempotency_key))
        resp = pb.CreateJobsResponse()
        fill_results(resp.results, self._svc.create_jobs(items), lambda job, entry: cv.job_to_pb(job, entry.job), "CreateJobs")
        return resp

    @guarded
    def GetJob(self, request: pb.GetJobRequest, context: grpc.ServicerContext) -> pb.Job:
        return cv.job_to_pb(self._svc.get_job(request.job_id))

    @guarded
    def ListJobs(self, request: pb.ListJobsRequest, context: grpc.ServicerContext) -> pb.ListJobsResponse:
        status = cv.JOB_STATUS_FROM_PB.get(request.status) if request.status else None
        page = self._svc.list_jobs(request.queue, status, request.name_prefix, request.page_size, request.page_token)
        return pb.ListJobsResponse(jobs=[cv.job_to_pb(j) for j in page.items], next_page_token=page.next_token)

    @guarded
    def UpdateJob(self, request: pb.UpdateJobRequest, context: grpc.ServicerContext) -> pb.Job:
        return cv.job_to_pb(self._svc.update_job(request.job_id, cv.spec_from_pb(request.spec)))

    @guarded
    def PauseJob(self, request: pb.PauseJobRequest, context: grpc.ServicerContext) -> pb.Job:
        return cv.job_to_pb(self._svc.pause_job(request.job_id))

    @guarded
    def ResumeJob(self, request: pb.ResumeJobRequest, context: grpc.ServicerContext) -> pb.Job:
        return cv.job_to_pb(self._svc.resume_job(request.job_id))

    @guarded
    def DeleteJob(self, request: pb.DeleteJobRequest, context: grpc.ServicerContext) -> pb.Job:
        return cv.job_to_pb(self._svc.delete_job(request.job_id))

    @guarded
    def TriggerJob(self, request: pb.TriggerJobRequest, context: grpc.ServicerContext) -> pb.Run:
        return cv.run_to_pb(self._svc.trigger_job(request.job_id))

    @guarded
    def GetRun(self, request: pb.GetRunRequest, context: grpc.ServicerContext) -> pb.Run:
        return cv.run_to_pb(self._svc.get_run(request.run_id))

    @guarded
    def ListRuns(self, request: pb.ListRunsRequest, context: grpc.ServicerContext) -> pb.ListRunsResponse:
        status = cv.RUN_STATUS_FROM_PB.get(request.status) if request.status else None
        page = self._svc.list_runs(request.job_id, status, request.page_size, request.page_token)
        return pb.ListRunsResponse(runs=[cv.run_to_pb(r) for r in page.items], next_page_token=page.next_token)

    @guarded
    def CancelRun(self, request: pb.CancelRunRequest, context: grpc.ServicerContext) -> pb.Run:
        return cv.run_to_pb(self._svc.cancel_run(request.run_id))

    @guarded
    def GetRunOutput(self, request: pb.GetRunOutputRequest, context: grpc.ServicerContext) -> pb.RunOutput:
        run = self._svc.get_run(request.run_id)
        out = pb.RunOutput(run_id=run.run_id, attempt=request.attempt or run.attempt, result=run.result, log_uri=run.log_uri)
        if request.attempt and request.attempt != run.attempt:
            out.missing_reason = f"only the latest attempt ({run.attempt}) of run {run.run_id} is recorded"
        elif not run.log_uri:
            missing = run.error[run.error.find(MISSING_MARK) :] if MISSING_MARK in run.error else ""
            out.missing_reason = missing or f"output missing: no log is stored for run {run.run_id} (status {run.status.value})"
        else:
            try:
                log, result = self._outputs.read(run.log_uri)
                out.log = log
                out.result = result or run.result
            except OutputMissing as exc:
                out.missing_reason = f"output missing: {exc}"
        return out

    @guarded
    def PreviewSchedule(self, request: pb.PreviewScheduleRequest, context: grpc.ServicerContext) -> pb.PreviewScheduleResponse:
        schedule = cv.schedule_from_pb(request.spec)
        after = cv.ts_ms(request.after) if request.HasField("after") else None
        resp = pb.PreviewScheduleResponse()
        for ms, note in self._svc.preview(schedule, after, request.count):
            cv.to_ts(ms, resp.times.add())
            resp.notes.append(note)
        return resp

    @guarded_stream
    def WatchRuns(self, request: pb.WatchRunsRequest, context: grpc.ServicerContext) -> Iterator[pb.RunEvent]:
        job_id, queue = request.job_id, request.queue
        unknown = sorted(set(request.kinds) - RUN_EVENT_KINDS)
        if unknown:
            raise ValidationError(f"unknown event kind(s) {unknown}: choose from {sorted(RUN_EVENT_KINDS)}")

        def accept(run: Run) -> bool:
            return (not job_id or run.job_id == job_id) and (not queue or run.queue == queue)

        sub = self._hub.subscribe(accept, frozenset(request.kinds) or None)
        try:
            if request.include_existing:
                for run in self._store.read(lambda m: _existing(m, job_id, accept)):
                    yield pb.RunEvent(run=cv.run_to_pb(run), kind="existing")
            while context.is_active():
                if sub.overflowed:
                    raise Overloaded("this watcher fell too far behind the applied changes; watch again")
                change = sub.get(WATCH_POLL_S)
                if change is None:
                    continue
                event = pb.RunEvent(run=cv.run_to_pb(change.run), kind=change.kind)
                cv.to_ts(change.observed_ms, event.observed_at)
                yield event
        finally:
            sub.close()


def _existing(m: JobStateMachine, job_id: str, accept: Callable[[Run], bool]) -> list[Run]:
    """The PENDING and LEASED runs the watch accepts, by scheduled time, at most ``MAX_EXISTING``:
    from the index of active runs, never a scan of every run kept (finished ones included)."""
    ids = m.active_by_job.get(job_id, ()) if job_id else (i for ids in m.active_by_job.values() for i in ids)
    runs = sorted((m.runs[run_id] for run_id in ids), key=lambda r: (r.scheduled_ms, r.run_id))
    return [copy.copy(r) for r in runs if accept(r)][:MAX_EXISTING]
