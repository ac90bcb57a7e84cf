"""The client's request ids: one per mutating call, the same on each of its retries, the caller's request untouched."""

from __future__ import annotations

import pytest

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.client import MUTATING, with_request_id

pytestmark = pytest.mark.unit


def test_a_mutating_request_gets_an_id_on_a_copy() -> None:
    mine = pb.TriggerJobRequest(job_id="j1")
    sent = with_request_id("TriggerJob", mine)
    assert sent.request_id.startswith("rq-") and sent.job_id == "j1"
    assert mine.request_id == ""  # reusing it for a new call must not repeat this call's id
    assert with_request_id("TriggerJob", mine).request_id != sent.request_id


def test_an_id_given_is_kept_and_reads_get_none() -> None:
    given = pb.CancelRunRequest(run_id="r", request_id="mine")
    assert with_request_id("CancelRun", given) is given
    read = pb.GetRunRequest(run_id="r")
    assert with_request_id("GetRun", read) is read


def test_each_create_jobs_item_gets_its_own_id() -> None:
    batch = pb.CreateJobsRequest(jobs=[pb.CreateJobRequest(), pb.CreateJobRequest(request_id="kept")])
    sent = with_request_id("CreateJobs", batch)
    ids = [j.request_id for j in sent.jobs]
    assert ids[1] == "kept" and ids[0].startswith("rq-") and batch.jobs[0].request_id == ""


def test_every_mutating_job_service_method_has_a_request_id_field() -> None:
    service = pb.DESCRIPTOR.services_by_name["JobService"]
    for method in service.methods:
        fields = method.input_type.fields_by_name
        if method.name == "CreateJobs":
            assert "request_id" in method.input_type.fields_by_name["jobs"].message_type.fields_by_name
        elif method.name in MUTATING:
            assert "request_id" in fields, method.name
        else:
            assert "request_id" not in fields, method.name  # reads change nothing: no id
