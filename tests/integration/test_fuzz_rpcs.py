"""Random and extreme messages to every RPC of a running 3-node cluster (hypothesis): never INTERNAL (nor
UNKNOWN), never a crashed node, and every node still serves afterwards. Plus two requests once found to crash a node
that broke a cluster: ``after = 2**63-1 s`` and a page token of 5,000 nines are INVALID_ARGUMENT, and
ListJobs still answers OK on every node afterwards.

Messages are built from the request types' descriptors, so a field added to the proto is fuzzed too:
strings and bytes of every size up to a few hundred KB, integers at their extremes, unknown enum values,
Durations and Timestamps far outside what protobuf allows, long repeated fields, and valid specs with one
field made extreme.
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor as F
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc import convert as cv

pytestmark = pytest.mark.integration

EXAMPLES = 600
#: how long a fuzzed long poll may wait and a watch is read: each is what most of a call costs, and the server's
#: handling of the request (the fuzz's subject) is over within the first milliseconds of either
WAIT_NANOS = 200_000_000
WATCH_S = 0.3
BAD = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}

STRINGS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", "default", "shell", "noop", "L1", "L1001", "j-1", "*/5 * * * *", "Europe/Berlin", "UTC", ".."]),
    st.sampled_from(["file:///etc/passwd", "s3://other/x/attempt-1-token-1.log", "data:,", "\x00", "é" * 300]),
    st.builds(
        lambda ch, n: ch * n,
        st.sampled_from(["x", "9", "*", "/", "é"]),
        st.sampled_from([255, 256, 257, 1025, 5000, 70_000, 300_000]),
    ),
)
INT32 = st.one_of(st.integers(-5, 1100), st.sampled_from([-(2**31), 2**31 - 1, 999, 1000, 1001, 10_001]))
INT64 = st.one_of(st.integers(-5, 5000), st.sampled_from([-(2**63), 2**63 - 1, 2**62, 253_402_300_800, 315_576_000_001]))
DOUBLES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 1.0, 2.0, 100.0, 1e308]))
SCALARS = {
    F.TYPE_STRING: STRINGS,
    F.TYPE_BYTES: st.one_of(st.binary(max_size=40), st.sampled_from([b"x" * 1_048_577, b"{}", b""])),
    F.TYPE_INT32: INT32,
    F.TYPE_INT64: INT64,
    F.TYPE_BOOL: st.booleans(),
    F.TYPE_DOUBLE: DOUBLES,
    F.TYPE_ENUM: st.integers(-3, 10),
}
REPEATS = st.one_of(st.integers(0, 3), st.sampled_from([101, 1001]))


@st.composite
def message(draw: Any, cls: Any, depth: int = 0) -> Any:
    msg = cls()
    for field in cls.DESCRIPTOR.fields:
        if not draw(st.booleans()):
            continue
        repeated = field.is_repeated
        count = draw(REPEATS) if repeated else 1
        if field.message_type is not None and field.message_type.GetOptions().map_entry:  # a map: keys and values
            entries = draw(st.dictionaries(SCALARS[F.TYPE_STRING], SCALARS[F.TYPE_STRING], max_size=20))
            getattr(msg, field.name).update(entries)
        elif field.type == F.TYPE_MESSAGE:
            if depth > 3:
                continue
            sub = draw(message(field.message_type._concrete_class, depth + 1))
            if repeated:
                getattr(msg, field.name).extend([sub] * count)
            else:
                getattr(msg, field.name).CopyFrom(sub)
        elif field.type in SCALARS:
            value = draw(SCALARS[field.type])
            if repeated:
                getattr(msg, field.name).extend([value] * count)
            else:
                setattr(msg, field.name, value)
    return msg


def valid_spec() -> pb.JobSpec:
    spec = pb.JobSpec(name="fuzz", queue="fuzz-q", type="noop", payload=b"{}")
    cv.to_dur(3_600_000, spec.every)
    return spec


@st.composite
def mutated_spec(draw: Any) -> pb.JobSpec:
    """A valid spec with one field replaced by a random (often extreme) value."""
    spec = valid_spec()
    noise = draw(message(pb.JobSpec))
    name = draw(st.sampled_from([f.name for f in pb.JobSpec.DESCRIPTOR.fields]))
    field = pb.JobSpec.DESCRIPTOR.fields_by_name[name]
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        getattr(spec, name).update(getattr(noise, name))
    elif field.is_repeated:
        getattr(spec, name).extend(getattr(noise, name))
    elif field.type == F.TYPE_MESSAGE:
        if noise.HasField(name):
            getattr(spec, name).CopyFrom(getattr(noise, name))
    else:
        setattr(spec, name, getattr(noise, name))
    return spec


SERVICES = {
    "JobService": (pb_grpc.JobServiceStub, pb.DESCRIPTOR.services_by_name["JobService"]),
    "LeaseService": (pb_grpc.LeaseServiceStub, pb.DESCRIPTOR.services_by_name["LeaseService"]),
    "ClusterService": (pb_grpc.ClusterServiceStub, pb.DESCRIPTOR.services_by_name["ClusterService"]),
}
METHODS = [(svc, m.name, m.input_type._concrete_class) for svc, (_, d) in SERVICES.items() for m in d.methods]


def base_requests(known: dict[str, list[Any]]) -> dict[str, Any]:
    """A valid request of each method, naming things that exist (jobs, runs, leases made before the fuzz)."""
    job, run = known["jobs"][0], known["runs"][0]
    lease = known["leases"][0]
    ref = pb.LeaseRef(lease_id=lease.lease_id, fencing_token=lease.fencing_token)
    done = pb.CompleteRunRequest(lease_id=lease.lease_id, fencing_token=lease.fencing_token, outcome=pb.OUTCOME_FAILED)
    return {
        "CreateJob": pb.CreateJobRequest(spec=valid_spec()),
        "CreateJobs": pb.CreateJobsRequest(jobs=[pb.CreateJobRequest(spec=valid_spec())] * 2),
        "GetJob": pb.GetJobRequest(job_id=job),
        "ListJobs": pb.ListJobsRequest(page_size=2, queue="fuzz-q"),
        "UpdateJob": pb.UpdateJobRequest(job_id=job, spec=valid_spec()),
        "PauseJob": pb.PauseJobRequest(job_id=job),
        "ResumeJob": pb.ResumeJobRequest(job_id=job),
        "DeleteJob": pb.DeleteJobRequest(job_id=known["jobs"][-1]),
        "TriggerJob": pb.TriggerJobRequest(job_id=job),
        "BackfillJob": pb.BackfillJobRequest(
            job_id=job, start_time=Timestamp(seconds=1_700_000_000), end_time=Timestamp(seconds=1_900_000_000), dry_run=True
        ),
        "GetRun": pb.GetRunRequest(run_id=run),
        "ListRuns": pb.ListRunsRequest(job_id=job, page_size=2),
        "CancelRun": pb.CancelRunRequest(run_id=known["runs"][-1]),
        "GetRunOutput": pb.GetRunOutputRequest(run_id=run),
        "ExplainRun": pb.ExplainRunRequest(run_id=run),
        "RetryRun": pb.RetryRunRequest(run_id=known["runs"][-1], request_id="fuzz-retry"),
        "WatchRuns": pb.WatchRunsRequest(include_existing=True, queue="fuzz-q"),
        "PreviewSchedule": pb.PreviewScheduleRequest(spec=valid_spec(), count=5),
        "AcquireLease": pb.AcquireLeaseRequest(executor_id="fuzz", queues=["fuzz-q"], max_runs=2),
        "RenewLease": pb.RenewLeaseRequest(executor_id="fuzz", leases=[ref]),
        "CompleteRun": done,
        "CompleteRuns": pb.CompleteRunsRequest(runs=[done]),
        "GetClusterStatus": pb.GetClusterStatusRequest(),
        "AddNode": pb.AddNodeRequest(),
        "RemoveNode": pb.RemoveNodeRequest(),
        "Backup": pb.BackupRequest(),
        "WhoAmI": pb.WhoAmIRequest(),
    }


@st.composite
def request(draw: Any, bases: dict[str, Any]) -> tuple[str, str, Any]:
    """Half the time a fully random message; else a valid one with up to two fields made random."""
    service, method, cls = draw(st.sampled_from(METHODS))
    noise = draw(message(cls))
    if draw(st.booleans()):
        req = noise
    else:
        req = cls()
        req.CopyFrom(bases[method])
        names = [f.name for f in cls.DESCRIPTOR.fields]
        for name in draw(st.lists(st.sampled_from(names), max_size=2)) if names else []:
            req.ClearField(name)
            field = cls.DESCRIPTOR.fields_by_name[name]
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                getattr(req, name).update(getattr(noise, name))
            elif field.is_repeated:
                getattr(req, name).extend(getattr(noise, name))
            elif field.type == F.TYPE_MESSAGE:
                if noise.HasField(name):
                    getattr(req, name).CopyFrom(getattr(noise, name))
            else:
                setattr(req, name, getattr(noise, name))
    if "spec" in cls.DESCRIPTOR.fields_by_name and draw(st.integers(0, 3)) == 0:
        req.spec.CopyFrom(draw(mutated_spec()))
    if method == "AcquireLease" and (req.wait.seconds, req.wait.nanos) > (0, WAIT_NANOS):
        req.wait.seconds, req.wait.nanos = 0, WAIT_NANOS  # a long poll may wait up to 60 s: keep the fuzz fast
    return service, method, req


def prepare(stubs: dict[str, Any]) -> dict[str, list[Any]]:
    """Jobs, runs and leases for the valid requests to name."""
    jobs = [stubs["JobService"].CreateJob(pb.CreateJobRequest(spec=valid_spec()), timeout=10).job_id for _ in range(3)]
    runs = [stubs["JobService"].TriggerJob(pb.TriggerJobRequest(job_id=j), timeout=10).run_id for j in jobs * 4]
    leases = (
        stubs["LeaseService"]
        .AcquireLease(pb.AcquireLeaseRequest(executor_id="fuzz", queues=["fuzz-q"], max_runs=6), timeout=10)
        .leases
    )
    assert leases, "no lease to fuzz with"
    return {"jobs": jobs, "runs": runs, "leases": list(leases)}


def call(stubs: dict[str, Any], service: str, method: str, req: Any) -> grpc.StatusCode:
    fn = getattr(stubs[service], method)
    try:
        if method in ("WatchRuns", "Backup"):  # server streams: read them to their end (or the timeout)
            stream = fn(req, timeout=WATCH_S if method == "WatchRuns" else 8.0)
            for _ in stream:
                pass
        else:
            fn(req, timeout=8.0)
        return grpc.StatusCode.OK
    except grpc.RpcError as exc:
        return exc.code()


def stubs_for(address: str, channels: list[grpc.Channel]) -> dict[str, Any]:
    ch = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 16 * 1024 * 1024)])
    channels.append(ch)
    return {name: stub(ch) for name, (stub, _) in SERVICES.items()}


def test_random_and_extreme_messages_to_every_rpc(cluster: LocalCluster) -> None:
    channels: list[grpc.Channel] = []
    nodes = [stubs_for(a, channels) for a in cluster.addresses]
    seen: dict[str, set[str]] = {}
    try:
        bases = base_requests(prepare(nodes[0]))

        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(req=request(bases), node=st.integers(0, 2))
        def fuzz(req: tuple[str, str, Any], node: int) -> None:
            service, method, message_ = req
            code = call(nodes[node], service, method, message_)
            seen.setdefault(method, set()).add(code.name)
            assert code not in BAD, f"{method} answered {code.name} to {str(message_)[:500]!r}"

        fuzz()
        assert {m for _, m, _ in METHODS} <= set(seen), f"methods never called: {set(m for _, m, _ in METHODS) - set(seen)}"
        for node in cluster.nodes.values():
            assert node.alive(), f"node {node.node_id} died; see {node.log_path}"
        for stubs in nodes:
            stubs["ClusterService"].GetClusterStatus(pb.GetClusterStatusRequest(), timeout=10)
            stubs["JobService"].ListJobs(pb.ListJobsRequest(page_size=1000), timeout=10)
            stubs["JobService"].CreateJob(pb.CreateJobRequest(spec=valid_spec()), timeout=10)
    finally:
        for ch in channels:
            ch.close()


def test_the_requests_that_broke_a_cluster_are_invalid_and_listing_still_works(cluster: LocalCluster) -> None:
    channels: list[grpc.Channel] = []
    try:
        nodes = [stubs_for(a, channels) for a in cluster.addresses]
        spec = pb.JobSpec(name="overflow", type="noop")
        spec.after.seconds = 2**63 - 1
        with pytest.raises(grpc.RpcError) as err:
            nodes[0]["JobService"].CreateJob(pb.CreateJobRequest(spec=spec), timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "spec.after" in err.value.details()
        spec.after.seconds = 200 * 365 * 86_400  # a valid Duration, but past what the cluster keeps
        with pytest.raises(grpc.RpcError) as err:
            nodes[1]["JobService"].CreateJob(pb.CreateJobRequest(spec=spec), timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "after is" in err.value.details()
        for method, req in (
            ("ListRuns", pb.ListRunsRequest(page_token="9" * 5000)),
            ("ListJobs", pb.ListJobsRequest(page_token="9" * 5000)),
            ("ListRuns", pb.ListRunsRequest(page_token="9" * 500)),
        ):
            with pytest.raises(grpc.RpcError) as err:
                getattr(nodes[2]["JobService"], method)(req, timeout=10)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "page_token" in err.value.details()
        for _ in range(3):
            nodes[0]["JobService"].CreateJob(pb.CreateJobRequest(spec=valid_spec()), timeout=10)
        first = nodes[0]["JobService"].ListJobs(pb.ListJobsRequest(page_size=2), timeout=10)
        assert first.next_page_token
        nxt = nodes[1]["JobService"].ListJobs(pb.ListJobsRequest(page_size=2, page_token=first.next_page_token), timeout=10)
        assert {j.job_id for j in first.jobs}.isdisjoint(j.job_id for j in nxt.jobs)  # another node's token works
        for stubs in nodes:
            stubs["JobService"].ListJobs(pb.ListJobsRequest(page_size=1000), timeout=10)
    finally:
        for ch in channels:
            ch.close()
