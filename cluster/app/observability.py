"""Wires what makes a node operable: health, metrics and the HTTP endpoint.

* Health, always: a ``HealthMonitor`` polls Raft (a leader? a quorum?) every
  200 ms and flips the gRPC health service (``GrpcHealth``) both ways.
* With ``[[nodes]] http``: the node's metrics (``raftsched.rpc.http.NodeMetrics``), fed
  by the applied run events, the health monitor, the snapshot hook and the
  gRPC interceptor (``interceptors``: put them before the auth interceptor),
  and the HTTP endpoint on ``http_listen`` serving ``/metrics`` and
  ``/healthz`` (HTTPS with the node's certificate under ``[tls]``). Without
  ``http`` there are no metrics at all: nothing is counted that nobody reads.

With ``[auth]`` on, ``/metrics`` and ``/healthz`` stay public; every other
route of the router (the web view) asks for a token that may read: in an
``Authorization: Bearer`` header, or through the web view's sign-in form and
its session cookie (``raftsched.rpc.http.web.WebAuth``).

The web view (``serve_web_view``, once the node's services exist): the
pages at ``/`` on the same endpoint, reading through the job
service and the cluster status function GetClusterStatus answers with. Not
on an address that is not loopback without both ``[tls]`` and ``[auth]``
(``raftsched.cluster.node.exposure.http_exposure``: a warning at every start says so;
``/`` then says why), unless ``[cluster] allow_insecure_http = true``.

With ``[auth]`` on, the web view also acts (``raftsched.rpc.http.web.actions``):
pause, resume and trigger a job, retry and cancel a run, through the job
service the gRPC servicer calls, for a signed-in session whose token the
gRPC rules allow (``action_check``: ``raftsched.rpc.server.auth.decide`` on
the request the same call would make over gRPC, the job's or run's queue
and type looked up for a restricted token). Without ``[auth]`` it stays
read-only: its pages have no session to hold a CSRF token, nor a token to
decide who acts.

Every route but ``/metrics`` and ``/healthz`` answers only to the names the
node is reached by (``raftsched.rpc.http.router.allowed_hosts``: its ``http`` address,
its listen address, localhost): DNS rebinding.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from raftsched.cluster.domain.model import Member
from raftsched.cluster.node.clock import Clock
from raftsched.cluster.node.config import ClusterConfig
from raftsched.cluster.node.fitness import FitnessView
from raftsched.cluster.node.health import Health, HealthMonitor, check_health
from raftsched.cluster.node.replica import Replica
from raftsched.cluster.node.scope_lookup import ScopeReader
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.raft.adapter import RaftNode
from raftsched.rpc.http.metrics import NodeMetrics
from raftsched.rpc.http.ops import add_ops_routes
from raftsched.rpc.http.router import Authorizer, Request, Response, Router, allowed_hosts, bearer_reader
from raftsched.rpc.http.run_metrics import LeaderChanges, RunEventMetrics
from raftsched.rpc.http.server import HttpServer
from raftsched.rpc.http.state_collector import FitnessCollector, StateCollector
from raftsched.rpc.http.web import (
    ActionCheck,
    JobActor,
    JobReader,
    TokenVerdict,
    WebActions,
    WebAuth,
    WebView,
    add_web_routes,
    overview_of,
)
from raftsched.rpc.server.auth import Access, ScopeLookup, access_of, decide, is_restricted
from raftsched.rpc.server.errors import status_of
from raftsched.rpc.server.health import GrpcHealth
from raftsched.rpc.server.metrics_interceptor import MetricsInterceptor
from raftsched.rpc.server.tokens import TokenTable

log = logging.getLogger("raftsched.node")


def reader_authorizer(tokens: TokenTable | None) -> Authorizer | None:
    """With tokens on: let through a bearer token whose roles may read (as for ListJobs over gRPC)."""
    if tokens is None:
        return None
    check = token_check(tokens)
    return bearer_reader(lambda presented: bool(check(presented).holder))


def token_check(tokens: TokenTable) -> Callable[[str], TokenVerdict]:
    """The web view's check of a presented token: its name when its roles may read (as for ListJobs), else why not."""

    def check(presented: str) -> TokenVerdict:
        token = tokens.find(presented)
        if token is None:
            return TokenVerdict(refusal="it is not one of this cluster's tokens ([auth] tokens_file): paste the whole token")
        why = decide(token, "ListJobs", Access())
        return TokenVerdict(refusal=why) if why is not None else TokenVerdict(holder=token.name)

    return check


#: the request each web view action would send over gRPC, from the id it names
_ACTION_REQUESTS: dict[str, Callable[[str], Any]] = {
    "PauseJob": lambda job_id: pb.PauseJobRequest(job_id=job_id),
    "ResumeJob": lambda job_id: pb.ResumeJobRequest(job_id=job_id),
    "TriggerJob": lambda job_id: pb.TriggerJobRequest(job_id=job_id),
    "CancelRun": lambda run_id: pb.CancelRunRequest(run_id=run_id),
    "RetryRun": lambda run_id: pb.RetryRunRequest(run_id=run_id),
}


def action_check(tokens: TokenTable, lookup: ScopeLookup) -> ActionCheck:
    """The web view's check of an action: the gRPC decision (``AuthInterceptor.check``'s) for the signed-in
    token's name, on the request the same call would send (a restricted token: the queue and type of the
    job or run it names, looked up)."""
    by_name = {token.name: token for token in tokens.tokens}

    def check(holder: str, method: str, target_id: str) -> str | None:
        token = by_name.get(holder)
        if token is None:
            return f"token {holder!r} is not in this node's [auth] tokens_file"
        request = _ACTION_REQUESTS[method](target_id)
        return decide(token, method, access_of(method, request, lookup if is_restricted(token, method) else None))

    return check


def grpc_words(exc: Exception) -> str | None:
    """A domain error as a gRPC client reads it: ``CODE: message`` (None: not a domain error)."""
    mapped = status_of(exc)
    return None if mapped is None else f"{mapped[0].name}: {mapped[1]}"


class Observability:
    def __init__(
        self,
        cfg: ClusterConfig,
        node_id: str,
        replica: Replica,
        raft: RaftNode,
        clock: Clock,
        tokens: TokenTable | None,
        fitness: FitnessView | None = None,
    ) -> None:
        me = cfg.node(node_id)
        self._raft = raft
        self._fitness = None if fitness is None else fitness.fitness
        #: Raft address -> node id (the membership keeper adds members that joined later)
        self.names = self._names = {n.raft: n.id for n in cfg.nodes}
        self.monitor = HealthMonitor(raft, self._names, fitness=self._fitness)
        self.grpc_health = GrpcHealth()
        self.monitor.listeners.append(self.grpc_health.on_health)
        self.metrics: NodeMetrics | None = None
        self.http: HttpServer | None = None
        self._node_id = node_id
        self._secure = cfg.tls is not None
        self._action_check = None if tokens is None else action_check(tokens, ScopeReader(replica))
        #: under [auth]: who may look at the web view (a bearer token, or a signed-in session)
        self.web_auth = None if tokens is None else WebAuth(token_check(tokens), node_id, secure=self._secure)
        #: the HTTP routes: the web view adds its own here (they need a reader token under [auth])
        self.router = Router(None if self.web_auth is None else self.web_auth.authorize)
        exposure = cfg.check_http_exposure(node_id)
        if exposure.warning:
            log.warning("%s", exposure.warning)
        #: why the web view is not served on this endpoint ("" when it is)
        self._no_web_view = "" if exposure.web_view else exposure.warning or ""
        if not me.http:
            return
        metrics = self.metrics = NodeMetrics()
        metrics.registry.register(StateCollector(replica, raft))
        if fitness is not None:
            metrics.registry.register(FitnessCollector(fitness, self._names))
        replica.on_applied.append(RunEventMetrics(metrics, raft.is_leader, clock.now_ms).on_applied)
        self.monitor.listeners.append(LeaderChanges(metrics).on_health)
        raft.on_snapshot(metrics.observe_snapshot)
        raft.on_log_commit(metrics.observe_log_commit)
        add_ops_routes(self.router, self.health, metrics.exposition)
        tls = None if cfg.tls is None else cfg.tls.for_node(node_id)
        self.http = HttpServer(me.http_listen, self.router, None if tls is None else (tls.cert_file, tls.key_file))
        self.router.allowed_hosts = allowed_hosts(me.http, me.http_listen, self.http.port, self.http.scheme)
        self.router.home = f"{self.http.scheme}://{me.http}/"

    def serve_web_view(
        self, jobs: JobReader, cluster_status: Callable[[], Any], now_ms: Callable[[], int], actor: JobActor | None = None
    ) -> None:
        """Add the web view's pages (``cluster_status()``: the node's ``pb.ClusterStatus``, as GetClusterStatus
        answers), and under ``[auth]`` its actions through ``actor`` (the job service). Nothing without an
        HTTP endpoint."""
        if self.http is None:
            return
        if self._no_web_view:
            why = self._no_web_view

            def off(request: Request) -> Response:
                return Response.text(403, f"no web view here: {why}")

            self.router.add("/", off, public=True)
            return
        scheme = "https" if self._secure else "http"
        actions = None
        if actor is not None and self.web_auth is not None and self._action_check is not None:
            actions = WebActions(actor, self.web_auth, self._action_check, grpc_words)
        view = WebView(jobs, lambda: overview_of(cluster_status()), now_ms, self._node_id, scheme, self.web_auth, actions)
        add_web_routes(self.router, view)

    def health(self) -> Health:
        """This node's health now (``/healthz``)."""
        return check_health(self._raft, self._names, self._fitness)

    def learn_members(self, members: tuple[Member, ...]) -> None:
        """The members as the log now says (the membership keeper hands them over): a leader that joined after
        this node started is named by its id, not its Raft address (the monitor reads the same dict)."""
        self._names.update({m.raft: m.node_id for m in members})

    @property
    def interceptors(self) -> list[Any]:
        """The gRPC interceptors to put first (outermost): the request metrics."""
        return [] if self.metrics is None else [MetricsInterceptor(self.metrics.observe_grpc)]

    def describe(self) -> str:
        if self.http is None:
            return "no HTTP endpoint (no [[nodes]] http)"
        if self._no_web_view:
            return f"HTTP on {self.http.scheme}://{self.http.address}: /metrics and /healthz (no web view: see the warning)"
        return f"HTTP on {self.http.scheme}://{self.http.address}: the web view at /, /metrics, /healthz"

    def start(self) -> None:
        self.monitor.start()
        if self.http is not None:
            self.http.start()

    def stop(self) -> None:
        """Health says NOT_SERVING from now on (load balancers move away first), then everything stops."""
        self.grpc_health.shutting_down()
        self.monitor.stop()
        if self.http is not None:
            self.http.stop()
