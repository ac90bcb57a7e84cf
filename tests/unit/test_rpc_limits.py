"""The gRPC edge: Durations and Timestamps that overflow are INVALID_ARGUMENT naming the field, records always
convert back (clamped, never an error of a read), repeated fields are counted before any item is converted, and
open watches are capped."""

from __future__ import annotations

import threading
import time
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.model import Every, Job, JobSpec, JobStatus, Run
from raftsched.cluster.node.event_hub import EventHub
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.server import job_servicer, lease_servicer
from raftsched.rpc.server.job_servicer import JobServicer
from raftsched.rpc.server.lease_servicer import LeaseServicer

pytestmark = pytest.mark.unit


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class Context:
    def __init__(self) -> None:
        self.callbacks: list[Any] = []
        self.active = True

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)

    def is_active(self) -> bool:
        return self.active

    def add_callback(self, fn: Any) -> bool:
        self.callbacks.append(fn)
        return True


@pytest.mark.parametrize(
    "build, field",
    [
        (lambda s: s.after.CopyFrom(Duration(seconds=2**63 - 1)), "spec.after"),
        (lambda s: s.every.CopyFrom(Duration(seconds=lim.PB_MAX_DURATION_S + 1)), "spec.every"),
        (lambda s: s.every.CopyFrom(Duration(seconds=1, nanos=-5)), "spec.every"),
        (lambda s: s.every.CopyFrom(Duration(seconds=1, nanos=2_000_000_000)), "spec.every"),
        (lambda s: s.at.CopyFrom(Timestamp(seconds=lim.PB_MAX_TIMESTAMP_S + 1)), "spec.at"),
        (lambda s: s.at.CopyFrom(Timestamp(seconds=-(2**62))), "spec.at"),
        (lambda s: (s.after.CopyFrom(Duration(seconds=1)), s.lease_ttl.CopyFrom(Duration(seconds=-(2**63)))), "spec.lease_ttl"),
        (
            lambda s: (s.after.CopyFrom(Duration(seconds=1)), s.retry.max_backoff.CopyFrom(Duration(seconds=2**40))),
            "spec.retry.max_backoff",
        ),
    ],
)
def test_durations_and_timestamps_that_protobuf_calls_invalid_name_the_field(build: Any, field: str) -> None:
    spec = pb.JobSpec(name="x")
    build(spec)
    with pytest.raises(ValidationError, match=field.replace(".", "\\.") + " is not a valid"):
        cv.spec_from_pb(spec)


def test_records_always_convert_back_even_with_absurd_instants() -> None:
    huge = 2**70
    job = Job("j-1", JobSpec(name="x", schedule=Every(huge)), JobStatus.ACTIVE, 0, 0, huge, huge, huge)
    out = cv.job_to_pb(job)
    assert out.next_fire_time.seconds == lim.PB_MAX_TIMESTAMP_S and out.spec.every.seconds == lim.PB_MAX_DURATION_S
    run = Run("j-1@1", "j-1", "q", -huge, huge)
    assert cv.run_to_pb(run).fired_at.seconds == lim.PB_MAX_TIMESTAMP_S
    out.SerializeToString()


def test_create_jobs_counts_the_batch_before_converting_any_item(monkeypatch: pytest.MonkeyPatch) -> None:
    converted: list[Any] = []
    monkeypatch.setattr(job_servicer.cv, "spec_from_pb", lambda s: converted.append(s))
    item = pb.CreateJobRequest(spec=pb.JobSpec(name="n", payload=b"x" * 10))
    request = pb.CreateJobsRequest(jobs=[item] * 200_000)
    started = time.monotonic()
    with pytest.raises(Aborted) as err:
        JobServicer(None, EventHub(lambda: 0)).CreateJobs(request, Context())  # type: ignore[arg-type]
    assert time.monotonic() - started < 0.5
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "jobs has 200000 items; the limit is 1000" in err.value.details
    assert converted == []


def test_complete_runs_and_renewals_are_counted_before_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    converted: list[Any] = []
    monkeypatch.setattr(lease_servicer, "_completion", lambda r: converted.append(r))
    servicer = LeaseServicer(None)  # type: ignore[arg-type]
    with pytest.raises(Aborted) as err:
        servicer.CompleteRuns(pb.CompleteRunsRequest(runs=[pb.CompleteRunRequest(lease_id="L1")] * 1001), Context())
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "runs has 1001 items" in err.value.details
    with pytest.raises(Aborted) as err:
        servicer.RenewLease(pb.RenewLeaseRequest(executor_id="e", leases=[pb.LeaseRef(lease_id="L1")] * 10_001), Context())
    assert "leases has 10001 items" in err.value.details
    assert converted == []


def test_unknown_status_filters_are_invalid() -> None:
    servicer = JobServicer(None, EventHub(lambda: 0))  # type: ignore[arg-type]
    with pytest.raises(Aborted) as err:
        servicer.ListJobs(pb.ListJobsRequest(status=99), Context())  # type: ignore[arg-type]
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "status 99" in err.value.details


def test_watches_over_the_cap_are_resource_exhausted_and_slots_come_back() -> None:
    servicer = JobServicer(None, EventHub(lambda: 0), max_watch_streams=2)  # type: ignore[arg-type]
    contexts = [Context() for _ in range(3)]
    threads = [threading.Thread(target=list, args=(servicer.WatchRuns(pb.WatchRunsRequest(), ctx),)) for ctx in contexts[:2]]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while servicer.watches.open < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert servicer.watches.open == 2
    with pytest.raises(Aborted) as err:
        next(servicer.WatchRuns(pb.WatchRunsRequest(), contexts[2]))
    assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_watch_streams = 2" in err.value.details
    for cb in contexts[1].callbacks * 2:
        cb()  # the RPC ended (the client went away): its callback gives the slot back, once
    assert servicer.watches.open == 1
    contexts[0].active = contexts[1].active = False  # both streams end at their next poll
    for t in threads:
        t.join(5)
    assert servicer.watches.open == 0
