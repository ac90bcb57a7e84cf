"""LeaseService over gRPC: conversion around ``raftsched.cluster.node.lease_service.LeaseService``.

Who the caller is, as an executor, is decided in one place: ``_executor_id``
(today the request's ``executor_id``; with tokens, the token's). The state
machine then refuses renewals and completions from anyone but the holder.
"""

from __future__ import annotations

import grpc

from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.model import Run, RunExtra
from raftsched.cluster.domain.run_history import last_heartbeat
from raftsched.cluster.node.lease_service import Completion, LeaseService
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc import convert as cv
from raftsched.rpc.server.errors import convert_each, fill_results, guarded

_OUTCOMES = {pb.OUTCOME_SUCCEEDED: True, pb.OUTCOME_FAILED: False}


class LeaseServicer(pb_grpc.LeaseServiceServicer):
    def __init__(self, service: LeaseService) -> None:
        self._svc = service

    @guarded
    def AcquireLease(self, request: pb.AcquireLeaseRequest, context: grpc.ServicerContext) -> pb.AcquireLeaseResponse:
        wait_ms = cv.span_in(request.wait, "wait") if request.HasField("wait") else 0
        grants = self._svc.acquire(
            _executor_id(request, context),
            list(request.queues),
            request.max_runs,
            wait_ms,
            alive=context.is_active,
            types=list(request.types),
        )
        resp = pb.AcquireLeaseResponse()
        for g in grants:
            extra = dict(g.run.extra) if g.run.extra else {}  # a run's own payload or type (TriggerJob, a notification)
            lease = resp.leases.add(
                lease_id=g.run.lease_id, fencing_token=g.run.fencing_token,
                type=extra.get(RunExtra.TYPE, g.spec.type), payload=extra.get(RunExtra.PAYLOAD, g.spec.payload),
            )  # fmt: skip
            cv.to_ts(g.run.lease_expires_ms, lease.expires_at)
            cv.run_to_pb(g.run, lease.run)
            cv.to_dur(g.spec.timeout_ms, lease.timeout)
            details, at_ms = last_heartbeat(g.run)
            if details:
                lease.last_heartbeat_details = details
                cv.to_ts(at_ms, lease.last_heartbeat_at)
        return resp

    @guarded
    def RenewLease(self, request: pb.RenewLeaseRequest, context: grpc.ServicerContext) -> pb.RenewLeaseResponse:
        lim.check_count("leases", request.leases, lim.MAX_RENEW_BATCH, "renew in several calls")  # before any is read
        refs = [(ref.lease_id, ref.fencing_token) for ref in request.leases]
        details = {ref.lease_id: bytes(ref.details) for ref in request.leases if ref.details}
        resp = pb.RenewLeaseResponse()
        for r in self._svc.renew(_executor_id(request, context), refs, details):
            item = resp.leases.add(lease_id=r.lease_id, ok=r.ok, cancel_requested=r.cancel_requested, error=r.error)
            if r.ok:
                cv.to_ts(r.expires_ms, item.expires_at)
        return resp

    @guarded
    def CompleteRun(self, request: pb.CompleteRunRequest, context: grpc.ServicerContext) -> pb.CompleteRunResponse:
        run = self._svc.complete(_completion(request, context))
        return pb.CompleteRunResponse(run=cv.run_to_pb(run))

    @guarded
    def CompleteRuns(self, request: pb.CompleteRunsRequest, context: grpc.ServicerContext) -> pb.CompleteRunsResponse:
        lim.check_count("runs", request.runs, lim.MAX_COMPLETE_BATCH, "split the batch")  # before any item is read
        answers = self._svc.complete_many(convert_each(request.runs, lambda item: _completion(item, context)))
        resp = pb.CompleteRunsResponse()
        fill_results(resp.results, answers, _status_only if request.status_only else _with_run, "CompleteRuns")
        return resp


def _with_run(run: Run, entry: pb.CompleteRunResult) -> None:
    cv.run_to_pb(run, entry.run)


def _status_only(run: Run, entry: pb.CompleteRunResult) -> None:
    """``CompleteRunsRequest.status_only``: the item's status (already 0) is the whole answer."""


def _executor_id(
    request: pb.AcquireLeaseRequest | pb.RenewLeaseRequest | pb.CompleteRunRequest, context: grpc.ServicerContext
) -> str:
    """The executor the caller acts as: the one place that decides it."""
    return request.executor_id


def _completion(request: pb.CompleteRunRequest, context: grpc.ServicerContext) -> Completion:
    if request.outcome not in _OUTCOMES:
        raise ValidationError("outcome must be OUTCOME_SUCCEEDED or OUTCOME_FAILED")
    return Completion(
        request.lease_id,
        request.fencing_token,
        _OUTCOMES[request.outcome],
        bytes(request.result),
        request.error,
        request.log_uri,
        _executor_id(request, context),
        request.non_retryable,
        cv.span_in(request.retry_after, "retry_after") if request.HasField("retry_after") else 0,
    )
