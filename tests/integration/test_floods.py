"""Long polls and watch streams never starve unary calls: with 300 open WatchRuns streams and 300 waiting
AcquireLease long polls spread over a 3-node cluster, GetJob still answers within a second on every node; a
node refuses the watch over its max_watch_streams with RESOURCE_EXHAUSTED naming the limit, and takes new ones
again once old ones end.

(Before: one pool of 64 server threads, each stream and each long poll holding one: 64 idle streams stopped a
node.) The calls come from this one process over many channels, each its own connection.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import grpc
import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc import convert as cv
from tests.conftest import running_cluster
from tests.helpers import wait_for

# GetJob's answer is timed (under 1 s): run in the suite's serial pass, with nothing beside it
pytestmark = [pytest.mark.integration, pytest.mark.alone]

STREAMS = 300
LONG_POLLS = 300
PER_CHANNEL = 25
CAP = 110  # per node: above the 100 streams and the 100 long polls each node gets here
LIMITS = f"\n[limits]\nmax_watch_streams = {CAP}\nmax_long_polls = {CAP}\n"


@pytest.fixture(scope="module")
def flood_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(str(tmp_path_factory.mktemp("floods")), LIMITS) as c:
        yield c


class Calls:
    """Many channels (own connections, not a shared subchannel) and the calls open on them."""

    def __init__(self) -> None:
        self.channels: list[grpc.Channel] = []
        self.calls: list[Any] = []

    def channel(self, address: str) -> grpc.Channel:
        ch = grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
        self.channels.append(ch)
        return ch

    def open(self, addresses: list[str], count: int, start: Any) -> list[Any]:
        opened = []
        for i in range(0, count, PER_CHANNEL):
            ch = self.channel(addresses[(i // PER_CHANNEL) % len(addresses)])
            opened += [start(ch) for _ in range(min(PER_CHANNEL, count - i))]
        self.calls += opened
        return opened

    def close(self) -> None:
        for call in self.calls:
            call.cancel()
        for ch in self.channels:
            ch.close()


def watch(ch: grpc.Channel) -> Any:
    return pb_grpc.JobServiceStub(ch).WatchRuns(pb.WatchRunsRequest(queue="flood-watch"), timeout=120)


def long_poll(ch: grpc.Channel) -> Any:
    req = pb.AcquireLeaseRequest(executor_id="flood", queues=["flood-empty"], max_runs=1)
    cv.to_dur(60_000, req.wait)
    return pb_grpc.LeaseServiceStub(ch).AcquireLease.future(req, timeout=120)


def test_get_job_answers_at_once_under_300_streams_and_300_long_polls(flood_cluster: LocalCluster) -> None:
    addresses = flood_cluster.addresses
    spec = pb.JobSpec(name="flood", queue="flood-q", type="noop")
    cv.to_dur(3_600_000, spec.every)
    calls = Calls()
    try:
        stubs = [pb_grpc.JobServiceStub(calls.channel(a)) for a in addresses]
        job = stubs[0].CreateJob(pb.CreateJobRequest(spec=spec), timeout=10)
        streams = calls.open(addresses, STREAMS, watch)
        polls = calls.open(addresses, LONG_POLLS, long_poll)
        time.sleep(3.0)  # every call reached its node and sits in its wait
        assert not any(f.done() for f in polls), [f.exception() for f in polls if f.done()][:3]
        assert all(s.is_active() for s in streams)
        worst = 0.0
        for _ in range(5):
            for stub in stubs:
                started = time.monotonic()
                assert stub.GetJob(pb.GetJobRequest(job_id=job.job_id), timeout=5).job_id == job.job_id
                worst = max(worst, time.monotonic() - started)
        assert worst < 1.0, f"GetJob took {worst:.3f} s with {STREAMS} streams and {LONG_POLLS} long polls open"
        print(f"slowest GetJob: {worst * 1000:.1f} ms with {STREAMS} streams and {LONG_POLLS} long polls open")

        # node n1 holds 100 of the streams: 10 more fit under its cap of 110, the next is refused
        extra = [watch(calls.channel(addresses[0])) for _ in range(CAP - STREAMS // 3)]
        time.sleep(1.0)
        assert all(s.is_active() for s in extra)
        with pytest.raises(grpc.RpcError) as err:
            next(watch(calls.channel(addresses[0])))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"max_watch_streams = {CAP}" in err.value.details()
        for s in extra:
            s.cancel()

        def accepted() -> bool:
            probe = watch(calls.channel(addresses[0]))
            calls.calls.append(probe)
            time.sleep(0.3)
            return probe.is_active()  # a refused watch ends at once with RESOURCE_EXHAUSTED

        wait_for(accepted, 10, "n1 to take a watch again once others ended")
    finally:
        calls.close()
