"""The node's HTTP endpoint without a network: the router (routes, parameters, 404/405, HEAD, the
reader-token hook that the web view's routes go through), /healthz and /metrics as WSGI answers, the
health check and monitor over a fake Raft, and the gRPC health service flipping both ways."""

from __future__ import annotations

from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
from grpc_health.v1 import health_pb2

from raftsched.cluster.app.observability import Observability, reader_authorizer
from raftsched.cluster.domain.model import Member
from raftsched.cluster.node.config import parse_config
from raftsched.cluster.node.health import Health, HealthMonitor, check_health
from raftsched.rpc.http.metrics import NodeMetrics
from raftsched.rpc.http.ops import add_ops_routes
from raftsched.rpc.http.router import Request, Response, Router, allowed_hosts
from raftsched.rpc.server.health import SERVICES, GrpcHealth
from raftsched.rpc.server.tokens import Token, TokenTable, token_digest

pytestmark = pytest.mark.unit


def call(app: Any, path: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    environ: dict[str, Any] = {"REQUEST_METHOD": method, "PATH_INFO": path.split("?")[0]}
    if "?" in path:
        environ["QUERY_STRING"] = path.split("?", 1)[1]
    for key, value in (headers or {}).items():
        environ["HTTP_" + key.upper().replace("-", "_")] = value
    setup_testing_defaults(environ)
    got: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]]) -> None:
        got["status"], got["headers"] = int(status.split()[0]), dict(response_headers)

    body = b"".join(app(environ, start_response))
    return got["status"], got["headers"], body


class FakeRaft:
    def __init__(self) -> None:
        self.leader: str | None = "127.0.0.1:7001"
        self.quorum = True
        self.term = 3

    def leader_address(self) -> str | None:
        return self.leader

    def has_quorum(self) -> bool:
        return self.quorum


def test_routes_match_by_segment_and_answer_404_405_and_head() -> None:
    router = Router()
    router.add("/jobs/{job_id}", lambda r: Response.text(200, f"job {r.params['job_id']} q={r.query.get('x')}"), public=True)
    status, headers, body = call(router, "/jobs/j-1?x=2")
    assert (status, body, headers["Content-Length"]) == (200, b"job j-1 q=['2']\n", str(len(body)))
    status, _, body = call(router, "/jobs/j-1/runs")
    assert status == 404 and b"/jobs/j-1/runs" in body
    status, headers, _ = call(router, "/jobs/j-1", method="POST")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    status, headers, body = call(router, "/jobs/j-1", method="HEAD")
    assert status == 200 and body == b"" and headers["Content-Length"] == str(len(b"job j-1 q=None\n"))


def test_a_failing_page_is_a_500_naming_the_path() -> None:
    router = Router()

    def boom(request: Request) -> Response:
        raise RuntimeError("bug")

    router.add("/boom", boom, public=True)
    status, _, body = call(router, "/boom")
    assert status == 500 and b"/boom" in body and b"bug" in body


def test_with_tokens_only_public_routes_are_open_and_others_need_a_token_that_reads() -> None:
    secrets = {"viewer": "s-viewer-0123456789", "worker": "s-worker-0123456789"}
    table = TokenTable(
        [
            Token("viewer", token_digest(secrets["viewer"]), frozenset({"reader"})),
            Token("worker", token_digest(secrets["worker"]), frozenset({"executor"})),
        ]
    )
    router = Router(reader_authorizer(table))
    router.add("/", lambda r: Response.text(200, "the web view"))
    router.add("/open", lambda r: Response.text(200, "open"), public=True)
    assert call(router, "/open")[0] == 200
    status, headers, body = call(router, "/")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer") and b"reader token" in body
    assert call(router, "/", headers={"Authorization": "Bearer nope"})[0] == 401
    assert call(router, "/", headers={"Authorization": f"Bearer {secrets['worker']}"})[0] == 401  # executors do not read
    assert call(router, "/", headers={"Authorization": f"Bearer {secrets['viewer']}"})[0] == 200
    assert reader_authorizer(None) is None  # [auth] off: every route is open


def test_healthz_and_metrics_stay_open_under_auth() -> None:
    raft = FakeRaft()
    names = {"127.0.0.1:7001": "n1"}
    router = Router(lambda request: "no token")  # refuses everything that is not public
    metrics = NodeMetrics()
    add_ops_routes(router, lambda: check_health(raft, names), metrics.exposition)
    status, headers, body = call(router, "/healthz")
    assert (status, body) == (200, b"ok: leader n1, term 3, quorum reached\n")
    assert headers["Content-Type"] == "text/plain; charset=utf-8" and headers["Content-Length"] == str(len(body))
    raft.quorum = False
    status, _, body = call(router, "/healthz")
    assert status == 503 and body.startswith(b"no quorum") and b"n1" in body
    raft.leader = None
    status, _, body = call(router, "/healthz")
    assert status == 503 and body.startswith(b"no leader known")
    status, headers, body = call(router, "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain") and b"raftsched_leader_changes_total 0.0" in body
    status, headers, _ = call(router, "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert status == 200 and headers["Content-Type"].startswith("application/openmetrics-text")


def test_the_monitor_tells_listeners_of_each_change_once() -> None:
    raft = FakeRaft()
    seen: list[tuple[bool | None, bool]] = []
    monitor = HealthMonitor(raft, {"127.0.0.1:7001": "n1"})
    monitor.listeners.append(lambda before, now: seen.append((None if before is None else before.serving, now.serving)))
    monitor.poll()
    monitor.poll()  # nothing changed
    raft.quorum = False
    monitor.poll()
    raft.quorum = True
    monitor.poll()
    assert seen == [(None, True), (True, False), (False, True)]
    assert monitor.last is not None and monitor.last.leader == "n1"


def test_the_same_leader_elected_again_in_a_new_term_is_a_change() -> None:
    """A node that kept naming the old leader while it was away (pysyncobj keeps the id until it hears of
    another) still tells its listeners when that leader comes back in a new term."""
    raft = FakeRaft()
    seen: list[tuple[str | None, int]] = []
    monitor = HealthMonitor(raft, {"127.0.0.1:7001": "n1"})
    monitor.listeners.append(lambda before, now: seen.append((now.leader, now.term)))
    monitor.poll()
    raft.term = 5  # between two polls: it lost its lead and won the next election
    monitor.poll()
    monitor.poll()
    assert seen == [("n1", 3), ("n1", 5)]


def test_a_leader_that_joined_later_is_named_by_its_id_once_the_members_are_learned() -> None:
    """Seen by tests/fault/test_three_hosts.py: an original node named the new member, leading, by its Raft
    address on /healthz (its names came from the config's [[nodes]] only)."""
    cfg = parse_config('[[nodes]]\nid = "n1"\nraft = "127.0.0.1:7001"\ngrpc = "127.0.0.1:50051"\n')
    raft = FakeRaft()
    ops = Observability(cfg, "n1", None, raft, None, None)  # type: ignore[arg-type]  # no [[nodes]] http: no metrics
    raft.leader = "127.0.0.1:7004"
    ops.monitor.poll()
    assert ops.health().leader == "127.0.0.1:7004"
    ops.learn_members((Member("n1", "127.0.0.1:7001", "127.0.0.1:50051"), Member("n4", "127.0.0.1:7004", "127.0.0.1:50054")))
    assert ops.health().reason == "ok: leader n4, term 3, quorum reached"
    ops.monitor.poll()
    assert ops.monitor.last is not None and ops.monitor.last.leader == "n4"


def _check(servicer: Any, service: str) -> int:
    class Context:
        def set_code(self, code: Any) -> None:
            raise AssertionError(f"{service} is unknown to the health service")

    return int(servicer.Check(health_pb2.HealthCheckRequest(service=service), Context()).status)


def test_grpc_health_flips_for_the_server_and_every_service() -> None:
    health = GrpcHealth()
    names = ("", *SERVICES)
    assert set(SERVICES) == {"raftsched.v1.JobService", "raftsched.v1.LeaseService", "raftsched.v1.ClusterService"}
    assert {_check(health.servicer, n) for n in names} == {health_pb2.HealthCheckResponse.NOT_SERVING}  # until it looks
    health.on_health(None, Health(True, "n1", 1, "ok"))
    assert {_check(health.servicer, n) for n in names} == {health_pb2.HealthCheckResponse.SERVING}
    health.on_health(Health(True, "n1", 1, "ok"), Health(False, None, 1, "no leader"))
    assert {_check(health.servicer, n) for n in names} == {health_pb2.HealthCheckResponse.NOT_SERVING}
    health.on_health(Health(False, None, 1, ""), Health(True, "n2", 2, "ok"))
    assert {_check(health.servicer, n) for n in names} == {health_pb2.HealthCheckResponse.SERVING}
    health.shutting_down()
    health.on_health(None, Health(True, "n2", 2, "ok"))  # stopping: it stays NOT_SERVING
    assert {_check(health.servicer, n) for n in names} == {health_pb2.HealthCheckResponse.NOT_SERVING}


def test_request_headers_reach_the_handler_in_lower_case() -> None:
    router = Router()
    router.add("/h", lambda r: Response.text(200, r.header("X-Thing")), public=True)
    assert call(router, "/h", headers={"X-Thing": "v"})[2] == b"v\n"


# ------------------------------------------------------------------ Host (DNS rebinding)


def _named_router() -> Router:
    router = Router()
    router.add("/jobs", lambda r: Response.text(200, "jobs"), public=True)
    router.add("/signin", lambda r: Response.text(200, "in"), methods=("POST",), public=True)
    add_ops_routes(router, lambda: Health(True, "n1", 3, "ok"), NodeMetrics().exposition)
    router.allowed_hosts = allowed_hosts("10.0.0.1:8081", "0.0.0.0:8081", 8081, "http")
    router.home = "http://10.0.0.1:8081/"
    return router


@pytest.mark.parametrize("host", ["10.0.0.1:8081", "localhost:8081", "127.0.0.1:8081", "[::1]:8081", "LOCALHOST:8081"])
def test_the_names_a_node_is_reached_by_are_served(host: str) -> None:
    assert call(_named_router(), "/jobs", headers={"Host": host})[0] == 200


@pytest.mark.parametrize(
    "host", ["evil.example:8081", "attacker.test", "10.0.0.1:8082", "10.0.0.1", "localhost", "127.0.0.1:80", "0.0.0.0:8081"]
)
def test_another_name_is_421_saying_where_to_go_instead(host: str) -> None:
    router = _named_router()
    status, _, body = call(router, "/jobs", headers={"Host": host})
    assert status == 421 and f"does not answer to the name {host.lower()!r}".encode() in body
    assert b"http://10.0.0.1:8081/" in body and b"DNS rebinding" in body
    assert call(router, "/signin", "POST", headers={"Host": host})[0] == 421  # no post under a rebound name either


def test_no_host_is_400() -> None:
    environ: dict[str, Any] = {"REQUEST_METHOD": "GET", "PATH_INFO": "/jobs"}
    got: dict[str, Any] = {}
    body = b"".join(_named_router()(environ, lambda status, headers: got.update(status=status)))
    assert got["status"].startswith("400") and b"no Host header" in body


def test_metrics_and_healthz_answer_under_any_name() -> None:
    """Probes and Prometheus reach a node by addresses it cannot know (a pod's IP, a load balancer's name)."""
    router = _named_router()
    for path in ("/healthz", "/metrics"):
        assert call(router, path, headers={"Host": "10.244.3.17:8081"})[0] == 200


def test_allowed_hosts() -> None:
    assert allowed_hosts("10.0.0.1:8081", "0.0.0.0:8081", 8081, "http") == {
        "10.0.0.1:8081",
        "localhost:8081",
        "127.0.0.1:8081",
        "[::1]:8081",
    }
    https = allowed_hosts("Sched.Example.com:443", "10.0.0.1:8443", 8443, "https")
    assert {"sched.example.com", "sched.example.com:443", "10.0.0.1:8443", "localhost:8443"} <= https
    assert "sched.example.com:8443" not in https
    assert "[fd00::1]:8081" in allowed_hosts("[fd00::1]:8081", "[::]:8081", 8081, "http")
    assert "127.0.0.1:4242" in allowed_hosts("127.0.0.1:0", "127.0.0.1:0", 4242, "http")  # port 0: the real one
