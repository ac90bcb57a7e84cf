"""JobService over gRPC: conversion around ``raftsched.cluster.node.job_service.JobService``.

Any node serves every RPC: writes are proposed through Raft (pysyncobj
forwards a follower's proposal to the leader), reads run after a read
barrier, and WatchRuns streams what this node applies. GetRunOutput reads
the log at the run's ``log_uri`` through the node's ``OutputReader`` port;
an output it cannot read is a ``missing_reason``, never an error.
"""

from __future__ import annotations

from typing import Any, Iterator

import grpc

from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.errors import Overloaded, ValidationError
from raftsched.cluster.domain.model import JobSpec, Run
from raftsched.cluster.node.event_hub import RUN_EVENT_KINDS, EventHub, RunChange
from raftsched.cluster.node.job_service import JobService
from raftsched.cluster.node.slots import Slots
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc import convert as cv
from raftsched.rpc.server.auth import caller_name
from raftsched.rpc.server.errors import convert_each, fill_results, guarded, guarded_stream

WATCH_POLL_S = 0.5
#: at most this many existing runs open a WatchRuns stream with include_existing
MAX_EXISTING = 10_000
DEFAULT_MAX_WATCH_STREAMS = 256


def _status(table: dict[Any, Any], value: int) -> Any:
    """A filter's enum value: unset is None ("any"), an unknown one INVALID_ARGUMENT."""
    if not value:
        return None
    if value not in table:
        raise ValidationError(f"status {value} is not a known status: leave it unset for any")
    return table[value]


class JobServicer(pb_grpc.JobServiceServicer):
    def __init__(self, service: JobService, hub: EventHub, max_watch_streams: int = DEFAULT_MAX_WATCH_STREAMS) -> None:
        self._svc = service
        self._hub = hub
        self.watches = Slots(max_watch_streams, "max_watch_streams", "WatchRuns streams")

    @guarded
    def CreateJob(self, request: pb.CreateJobRequest, context: grpc.ServicerContext) -> pb.Job:
        return cv.job_to_pb(self._svc.create_job(cv.spec_from_pb(request.spec), request.idempotency_key, request.request_id))

    @guarded
    def CreateJobs(self, request: pb.CreateJobsRequest, context: grpc.ServicerContext) -> pb.CreateJobsResponse:
        lim.check_count("jobs", request.jobs, lim.MAX_CREATE_BATCH, "split the batch")  # before any item is read
        items = convert_each(request.jobs, lambda req: (cv.spec_from_pb(req.spec), req.idempotency_key, req.request_id))
        resp = pb.CreateJobsResponse()
        fill_results(resp.results, self._svc.create_jobs(items), lambda job, entry: cv.job_to_pb(job, entry.job), "CreateJobs")
        return resp

    @guarded
    def GetJob(self, request: pb.GetJobRequest, context: grpc.ServicerContext) -> pb.Job:
        return cv.job_to_pb(self._svc.get_job(request.job_id))

    @guarded
    def ListJobs(self, request: pb.ListJobsRequest, context: grpc.ServicerContext) -> pb.ListJobsResponse:
        status = _status(cv.JOB_STATUS_FROM_PB, request.status)
        page = self._svc.list_jobs(
            request.queue, status, request.name_prefix, request.page_size, request.page_token, request.label_selector
        )
        return pb.ListJobsResponse(jobs=[cv.job_to_pb(j) for j in page.items], next_page_token=page.next_token)

    @guarded
    def UpdateJob(self, request: pb.UpdateJobRequest, context: grpc.ServicerContext) -> pb.Job:
        return cv.job_to_pb(self._svc.update_job(request.job_id, cv.spec_from_pb(request.spec), request.request_id))

    @guarded
    def PauseJob(self, request: pb.PauseJobRequest, context: grpc.ServicerContext) -> pb.Job:
        until = cv.instant_in(request.until, "until") if request.HasField("until") else 0
        return cv.job_to_pb(self._svc.pause_job(request.job_id, request.request_id, request.note, until))

    @guarded
    def ResumeJob(self, request: pb.ResumeJobRequest, context: grpc.ServicerContext) -> pb.Job:
        return cv.job_to_pb(self._svc.resume_job(request.job_id, request.request_id))

    @guarded
    def DeleteJob(self, request: pb.DeleteJobRequest, context: grpc.ServicerContext) -> pb.Job:
        return cv.job_to_pb(self._svc.delete_job(request.job_id, request.request_id))

    @guarded
    def TriggerJob(self, request: pb.TriggerJobRequest, context: grpc.ServicerContext) -> pb.Run:
        return self._runs_pb([self._svc.trigger_job(request.job_id, request.request_id, bytes(request.payload))])[0]

    @guarded
    def BackfillJob(self, request: pb.BackfillJobRequest, context: grpc.ServicerContext) -> pb.BackfillJobResponse:
        start = cv.instant_in(request.start_time, "start_time") if request.HasField("start_time") else 0
        if not request.HasField("end_time"):
            raise ValidationError("end_time is required: backfill the range [start_time, end_time)")
        end = cv.instant_in(request.end_time, "end_time")
        instants, runs = self._svc.backfill_job(request.job_id, start, end, request.dry_run)
        resp = pb.BackfillJobResponse(runs=self._runs_pb(runs))
        for t in instants:
            cv.to_ts(t, resp.instants.add())
        return resp

    @guarded
    def GetRun(self, request: pb.GetRunRequest, context: grpc.ServicerContext) -> pb.Run:
        return self._runs_pb([self._svc.get_run(request.run_id)])[0]

    @guarded
    def ListRuns(self, request: pb.ListRunsRequest, context: grpc.ServicerContext) -> pb.ListRunsResponse:
        status = _status(cv.RUN_STATUS_FROM_PB, request.status)
        page = self._svc.list_runs(
            request.job_id, status, request.page_size, request.page_token, label_selector=request.label_selector
        )
        return pb.ListRunsResponse(runs=self._runs_pb(page.items), next_page_token=page.next_token)

    def _runs_pb(self, runs: list[Run]) -> list[pb.Run]:
        """Runs with their job's labels."""
        labels = self._svc.run_labels(runs)
        return [cv.run_to_pb(r, labels=labels.get(r.job_id)) for r in runs]

    @guarded
    def CancelRun(self, request: pb.CancelRunRequest, context: grpc.ServicerContext) -> pb.Run:
        return cv.run_to_pb(self._svc.cancel_run(request.run_id, request.request_id))

    @guarded
    def RetryRun(self, request: pb.RetryRunRequest, context: grpc.ServicerContext) -> pb.Run:
        return cv.run_to_pb(self._svc.retry_run(request.run_id, request.request_id, caller_name()))

    @guarded
    def ExplainRun(self, request: pb.ExplainRunRequest, context: grpc.ServicerContext) -> pb.RunExplanation:
        return cv.explanation_to_pb(self._svc.explain_run(request.run_id))

    @guarded
    def GetRunOutput(self, request: pb.GetRunOutputRequest, context: grpc.ServicerContext) -> pb.RunOutput:
        return cv.run_output_to_pb(self._svc.get_run_output(request.run_id, request.attempt, request.offset))

    @guarded
    def PreviewSchedule(self, request: pb.PreviewScheduleRequest, context: grpc.ServicerContext) -> pb.PreviewScheduleResponse:
        schedule = cv.schedule_from_pb(request.spec)
        after = cv.instant_in(request.after, "after") if request.HasField("after") else None
        shape = JobSpec("preview", schedule, **cv.extras_from_pb(request.spec))
        resp = pb.PreviewScheduleResponse()
        for ms, note in self._svc.preview(schedule, after, request.count, shape):
            cv.to_ts(ms, resp.times.add())
            resp.notes.append(note)
        return resp

    @guarded_stream
    def WatchRuns(self, request: pb.WatchRunsRequest, context: grpc.ServicerContext) -> Iterator[pb.RunEvent]:
        job_id, queue = request.job_id, request.queue
        lim.check_chars("job_id", job_id, lim.MAX_ID_CHARS)
        lim.check_chars("queue", queue, lim.MAX_QUEUE_CHARS)
        lim.check_count("kinds", request.kinds, lim.MAX_WATCH_KINDS)
        unknown = sorted(set(request.kinds) - RUN_EVENT_KINDS)
        if unknown:
            raise ValidationError(f"unknown event kind(s) {lim.shown(unknown)}: choose from {sorted(RUN_EVENT_KINDS)}")

        def accept(run: Run) -> bool:
            return (not job_id or run.job_id == job_id) and (not queue or run.queue == queue)

        release = self.watches.take()
        context.add_callback(release)  # the RPC ended (also when the client went away between two events)
        try:
            yield from self._watch(request, context, accept)
        finally:
            release()

    def _watch(self, request: pb.WatchRunsRequest, context: grpc.ServicerContext, accept: Any) -> Iterator[pb.RunEvent]:
        resume = (request.resume_after.index, request.resume_after.position) if request.HasField("resume_after") else None
        if resume is not None and request.include_existing:
            raise ValidationError("give resume_after or include_existing, not both: a resumed watch has seen the existing runs")
        sub, replay = self._hub.subscribe(accept, frozenset(request.kinds) or None, resume)
        sent = resume or (0, 0)  # the point of the last change sent: nothing at or before it goes out again
        bookmarked: tuple[int, int] | None = None
        try:
            if request.include_existing:
                for run in self._svc.active_runs(request.job_id, accept, MAX_EXISTING):
                    yield pb.RunEvent(run=cv.run_to_pb(run), kind="existing")
            for change in replay:
                sent = change.point
                yield _event(change)
            quiet = True  # a bookmark opens the stream
            while context.is_active():
                sub.check()
                if sub.overflowed:
                    raise Overloaded("this watcher fell too far behind the applied changes; watch again (resume_after)")
                if request.bookmarks and quiet:
                    point = self._hub.bookmark(sub)
                    if point is not None and point != bookmarked and point > sent:
                        bookmarked = point
                        yield pb.RunEvent(kind="bookmark", index=point[0], position=point[1])
                live = sub.get(WATCH_POLL_S)
                quiet = live is None
                if live is None or live.point <= sent:
                    continue
                sent = live.point
                yield _event(live)
        finally:
            sub.close()


def _event(change: RunChange) -> pb.RunEvent:
    event = pb.RunEvent(run=cv.run_to_pb(change.run), kind=change.kind, index=change.log_index, position=change.position)
    cv.to_ts(change.observed_ms, event.observed_at)
    return event
