"""Operating a cluster, end to end on real node processes: a real Prometheus server scrapes every node's
/metrics while an interval job fires; /healthz and gRPC health flip when a node loses its quorum and
flip back when it returns; reflection lists every service and a generic client built only from it
calls GetClusterStatus; with TLS and tokens on, health, reflection and /metrics need no token and a
call without one is counted as UNAUTHENTICATED."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import ssl
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
import warnings
from typing import Any, Iterator

import grpc
import pytest
from google.protobuf import descriptor_pool, message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from prometheus_client.parser import text_string_to_metric_families

from raftsched.cluster.app.local_cluster import LocalCluster, free_ports
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc.client.channel import ChannelSecurity, open_channel
from raftsched.rpc.client.client import Client
from tests.helpers import every_spec, wait_for

pytestmark = pytest.mark.integration

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
OUR_SERVICES = ("raftsched.v1.JobService", "raftsched.v1.LeaseService", "raftsched.v1.ClusterService")


def http_get(url: str, ca_file: str = "", timeout: float = 5.0) -> tuple[int, str]:
    """(status, body) of a GET; an HTTP error status is an answer too."""
    context = ssl.create_default_context(cafile=ca_file) if url.startswith("https") else None
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def health_status(address: str, service: str = "", security: ChannelSecurity | None = None) -> int | None:
    try:
        with open_channel(address, security) as ch:
            answer = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=2)
        return int(answer.status)
    except grpc.RpcError:
        return None


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A healthy 3-node cluster with HTTP endpoints and an every-second job firing."""
    c = LocalCluster.create(str(tmp_path_factory.mktemp("observed")), 3, http=True)
    c.start_all()
    try:
        c.wait_leader(30)
        with Client(c.addresses, deadline_s=10) as client:
            client.create_job(every_spec("tick", 1000, queue="observed"))
        yield c
    finally:
        c.stop_all()


# ------------------------------------------------------------------ Prometheus


class Prometheus:
    """A real Prometheus server on loopback with its own dir, scraping ``targets`` every second."""

    def __init__(self, root: str, targets: list[str]) -> None:
        os.makedirs(root, exist_ok=True)
        self.port = free_ports(1)[0]
        config = os.path.join(root, "prometheus.yml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: raftsched\n    scrape_interval: 1s\n    scrape_timeout: 1s\n"
                f"    static_configs:\n      - targets: {json.dumps(targets)}\n"
            )
        self.log_path = os.path.join(root, "prometheus.log")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    "prometheus",
                    f"--config.file={config}",
                    f"--storage.tsdb.path={os.path.join(root, 'data')}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=root,
                start_new_session=True,
            )

    def query(self, expression: str) -> float | None:
        """The value of an instant query with one result (None: no result yet, or not up)."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?query={urllib.parse.quote(expression)}"
        try:
            status, body = http_get(url, timeout=3)
        except OSError:
            return None
        answer = json.loads(body) if status == 200 else {}
        results = answer.get("data", {}).get("result", [])
        return float(results[0]["value"][1]) if len(results) == 1 else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _parsed(c: LocalCluster, node_id: str) -> dict[str, float]:
    """Every sample of a node's /metrics by name and labels (the parser of prometheus_client)."""
    status, body = http_get(c.http_url(node_id, "/metrics"))
    assert status == 200
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            out[s.name + json.dumps(s.labels, sort_keys=True)] = s.value
    return out


def test_prometheus_scrapes_every_node_while_a_job_fires(observed: LocalCluster, tmp_path: Any) -> None:
    targets = [n.http for n in observed.nodes.values()]
    if shutil.which("prometheus") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the prometheus binary is missing: CI installs it (scripts/install_system_packages.sh)")
        warnings.warn("no prometheus binary here: checking /metrics with prometheus_client's parser instead", stacklevel=1)
        values = wait_for(
            lambda: (lambda v: v if v[0] > 0 else None)(
                (
                    sum(_parsed(observed, n).get("raftsched_fire_delay_seconds_count{}", 0) for n in observed.nodes),
                    sum(_parsed(observed, n)["raftsched_is_leader{}"] for n in observed.nodes),
                )
            ),
            30,
            "a fire delay observed",
        )
        assert values[1] == 1
        return
    prom = Prometheus(str(tmp_path / "prometheus"), targets)
    try:
        up = wait_for(lambda: prom.query('count(up{job="raftsched"} == 1)') == 3, 60, f"Prometheus scraping {targets}")
        assert up
        fired = wait_for(lambda: prom.query("sum(raftsched_fire_delay_seconds_count)"), 30, "a fire delay in Prometheus")
        assert fired and fired > 0
        assert wait_for(lambda: prom.query("sum(raftsched_is_leader)"), 10, "is_leader in Prometheus") == 1
        assert prom.query('sum(raftsched_runs{status="PENDING"}) > 0') is not None  # the gauges are there too
        assert prom.query("count(raftsched_raft_term)") == 3
    finally:
        prom.stop()
        if prom.proc.returncode not in (0, -signal.SIGTERM):
            with open(prom.log_path, encoding="utf-8", errors="replace") as f:
                print(f.read()[-3000:])


# ------------------------------------------------------------------ reflection


def test_reflection_lists_every_service_and_a_generic_client_calls_get_cluster_status(observed: LocalCluster) -> None:
    address = observed.addresses[0]
    with grpc.insecure_channel(address) as ch:
        stub = reflection_pb2_grpc.ServerReflectionStub(ch)
        answers = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
        listed = {s.name for answer in answers for s in answer.list_services_response.service}
        assert {*OUR_SERVICES, "grpc.health.v1.Health"} <= listed
        # a client that knows nothing of raftsched's .proto: every type comes from the server
        pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(ch))
        method = pool.FindServiceByName("raftsched.v1.ClusterService").FindMethodByName("GetClusterStatus")
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        call = ch.unary_unary(
            "/raftsched.v1.ClusterService/GetClusterStatus",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_class.FromString,
        )
        status = call(request_class(), timeout=10)
    assert response_class is not pb.ClusterStatus
    assert status.leader_id in observed.nodes and status.DESCRIPTOR.full_name == "raftsched.v1.ClusterStatus"


# ------------------------------------------------------------------ health under a lost quorum


class HealthWatch:
    """Every status a ``Health.Watch`` stream of one node reports, collected on a thread."""

    def __init__(self, address: str) -> None:
        self._channel = grpc.insecure_channel(address)
        self._stream = health_pb2_grpc.HealthStub(self._channel).Watch(
            health_pb2.HealthCheckRequest(service="raftsched.v1.JobService")
        )
        self.seen: list[int] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for answer in self._stream:
                if not self.seen or self.seen[-1] != answer.status:
                    self.seen.append(int(answer.status))
        except grpc.RpcError:
            pass

    def close(self) -> None:
        self._stream.cancel()
        self._channel.close()


def test_health_flips_when_a_node_is_cut_off_from_quorum_and_back(tmp_path: Any) -> None:
    c = LocalCluster.create(str(tmp_path / "cluster"), 3, http=True)
    c.start_all()
    watch = None
    try:
        leader = c.wait_leader(30)
        for n in c.nodes:
            assert wait_for(lambda n=n: http_get(c.http_url(n, "/healthz"))[0] == 200, 10, f"{n} healthy"), n
            assert wait_for(lambda n=n: health_status(c.nodes[n].grpc) == SERVING, 10, f"{n} gRPC SERVING")
        alone = next(n for n in c.nodes if n != leader)  # a follower; the leader is among the two killed
        address = c.nodes[alone].grpc
        watch = HealthWatch(address)
        wait_for(lambda: watch.seen == [SERVING], 10, "the watch's first answer")
        others = [n for n in c.nodes if n != alone]
        for n in others:
            c.kill(n)
        status, body = wait_for(
            lambda: (lambda a: a if a[0] == 503 else None)(http_get(c.http_url(alone, "/healthz"))), 15, "/healthz 503"
        )
        assert body.startswith(("no quorum", "no leader"))
        for service in ("", *OUR_SERVICES):
            assert wait_for(lambda s=service: health_status(address, s) == NOT_SERVING, 5, f"{service!r} NOT_SERVING")
        wait_for(lambda: watch.seen[-1] == NOT_SERVING, 5, "the watch to see NOT_SERVING")
        for n in others:
            c.start(n)
        c.wait_leader(30)
        wait_for(lambda: http_get(c.http_url(alone, "/healthz"))[0] == 200, 20, "/healthz 200 again")
        for service in ("", *OUR_SERVICES):
            assert wait_for(lambda s=service: health_status(address, s) == SERVING, 5, f"{service!r} SERVING again")
        wait_for(lambda: watch.seen[-1] == SERVING, 5, "the watch to see SERVING again")
        seen = list(watch.seen)  # each change of status once: SERVING and NOT_SERVING alternate
        assert seen[:3] == [SERVING, NOT_SERVING, SERVING] and seen[-1] == SERVING, seen
        # it saw the leader go and another (or the same in a new term) come: when the others come back before
        # its election timeout, it first sees its old leader again, and the new term a health poll later. It may
        # lose that leader once more: its own term rose while it campaigned alone, and the first vote it asks
        # for after the others return ends their new leader's term (pysyncobj has no pre-vote). Every time it
        # was NOT_SERVING is a leader it lost, so it counted at least that many leader changes.
        lost = seen.count(NOT_SERVING)
        assert wait_for(
            lambda: _parsed(c, alone)["raftsched_leader_changes_total{}"] >= lost, 10, f"{lost} leader change(s) counted"
        ), seen
    finally:
        if watch is not None:
            watch.close()
        c.stop_all()


# ------------------------------------------------------------------ with TLS and tokens


def test_with_tls_and_tokens_health_reflection_and_metrics_need_no_token(tmp_path: Any) -> None:
    c = LocalCluster.create(str(tmp_path / "secure"), 3, secure=True, http=True)
    c.start_all()
    try:
        c.wait_leader(30)
        assert c.security is not None
        no_token = dataclasses.replace(c.client_security(), token="")  # TLS, but no token
        node = next(iter(c.nodes))
        address = c.nodes[node].grpc
        assert wait_for(lambda: health_status(address, "raftsched.v1.JobService", no_token) == SERVING, 10, "SERVING over TLS")
        with open_channel(address, no_token) as ch:
            answers = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
            )
            assert {*OUR_SERVICES, "grpc.health.v1.Health"} <= {s.name for a in answers for s in a.list_services_response.service}
            with pytest.raises(grpc.RpcError) as refused:
                pb_grpc.JobServiceStub(ch).ListJobs(pb.ListJobsRequest(), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
        url = c.http_url(node, "/metrics")
        assert url.startswith("https://")
        status, body = http_get(url, ca_file=c.security.ca_file)
        assert status == 200
        samples = {
            s.name + json.dumps(s.labels, sort_keys=True): s.value
            for f in text_string_to_metric_families(body)
            for s in f.samples
        }
        key = "raftsched_grpc_requests_total" + json.dumps(
            {"code": "UNAUTHENTICATED", "method": "raftsched.v1.JobService/ListJobs"}, sort_keys=True
        )
        assert samples.get(key, 0) >= 1, sorted(k for k in samples if k.startswith("raftsched_grpc_requests_total"))
        assert http_get(c.http_url(node, "/healthz"), ca_file=c.security.ca_file)[0] == 200
        with pytest.raises(OSError):  # plain HTTP to the HTTPS port gets no answer
            urllib.request.urlopen(f"http://{c.nodes[node].http}/healthz", timeout=5).read()
    finally:
        c.stop_all()
