"""The node's Prometheus metrics: the contract table (docs/api.md, "Operating a cluster") and their registry.

``METRICS`` lists every ``raftsched_*`` metric once: name, kind, labels,
help. ``NodeMetrics`` builds them on a registry of its own (never the
process-global one, so that tests can build several), together with the
gauges read at scrape time (``raftsched.rpc.http.state_collector``) and the process's
CPU and memory (``process_*``, prometheus_client's collector). Who feeds what:

* the run events a node applies (``raftsched.rpc.http.run_metrics``): the two delay
  histograms, the finished, granted and expired counters — on the leader;
* the health monitor: ``raftsched_leader_changes_total``;
* the Raft adapter's hooks: ``raftsched_snapshot_seconds`` and ``raftsched_raft_log_commit_seconds``;
* the gRPC interceptor (``raftsched.rpc.server.metrics_interceptor``): the request
  counter and histogram.

Nothing here runs on the Raft thread but those few counter and histogram
updates; the gauges cost nothing until Prometheus asks.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, disable_created_metrics
from prometheus_client.exposition import choose_encoder

from raftsched.cluster.domain.model import RunStatus


@dataclass(frozen=True)
class MetricDef:
    name: str
    kind: str  # counter | gauge | histogram
    labels: tuple[str, ...]
    help: str


#: the statuses a run can finish in (``raftsched_runs_finished_total{status}``)
FINISHED_STATUSES = (
    RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.DEAD_LETTER, RunStatus.CANCELLED, RunStatus.SKIPPED, RunStatus.EXPIRED,
)  # fmt: skip

#: delays, from a few ms to minutes late
DELAY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: a Raft log commit: an fsync, from under a millisecond on a fast disk to seconds on a saturated one
LOG_COMMIT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
SNAPSHOT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

METRICS = (
    MetricDef(
        "raftsched_fire_delay_seconds", "histogram", (), "From a run's scheduled instant to when it became leasable (leader)"
    ),
    MetricDef(
        "raftsched_due_to_leased_seconds",
        "histogram",
        (),
        "From a run's scheduled instant (or a retry's due time) to its lease grant (leader)",
    ),
    MetricDef("raftsched_runs_finished_total", "counter", ("status",), "Runs reaching a final status (counted on the leader)"),
    MetricDef("raftsched_runs", "gauge", ("status",), "Runs now in each status (this node's applied state)"),
    MetricDef("raftsched_queue_depth", "gauge", ("queue",), "PENDING runs per queue (this node's applied state)"),
    MetricDef("raftsched_jobs", "gauge", ("status",), "Jobs in each status (this node's applied state)"),
    MetricDef("raftsched_leases_granted_total", "counter", (), "Leases granted (counted on the leader)"),
    MetricDef("raftsched_leases_expired_total", "counter", (), "Leases expired because their executor stopped renewing (leader)"),
    MetricDef("raftsched_raft_term", "gauge", (), "This node's current Raft term"),
    MetricDef("raftsched_raft_commit_index", "gauge", (), "This node's Raft commit index"),
    MetricDef("raftsched_raft_applied_index", "gauge", (), "The last Raft index this node applied"),
    MetricDef("raftsched_is_leader", "gauge", (), "1 on the leader, else 0"),
    MetricDef("raftsched_leader_changes_total", "counter", (), "Leadership changes this node saw"),
    MetricDef("raftsched_snapshot_seconds", "histogram", (), "Time to write a snapshot"),
    MetricDef(
        "raftsched_raft_log_commit_seconds",
        "histogram",
        (),
        "Time to commit a batch of Raft log entries to disk (fsynced unless journal_fsync is off)",
    ),
    MetricDef("raftsched_clock_offset_seconds", "gauge", ("peer",), "Each peer's wall clock minus this node's, as last measured"),
    MetricDef(
        "raftsched_clock_ok", "gauge", (), "1 while this node's clock agrees with a majority within max_clock_offset, else 0"
    ),
    MetricDef("raftsched_storage_ok", "gauge", (), "1 while this node can write its disk (Raft log and state), else 0"),
    MetricDef("raftsched_grpc_requests_total", "counter", ("method", "code"), "gRPC calls served, by method and status code"),
    MetricDef("raftsched_grpc_request_seconds", "histogram", ("method",), "gRPC call time (a stream: its life), by method"),
)
BY_NAME = {m.name: m for m in METRICS}


def _help(name: str) -> str:
    return BY_NAME[name].help


class NodeMetrics:
    """Every metric of one node, on its own registry."""

    def __init__(self) -> None:
        # no *_created series (prometheus_client's switch is process-wide; a node has one NodeMetrics):
        # half the lines, and Prometheus does not need them
        disable_created_metrics()
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.fire_delay = Histogram(
            "raftsched_fire_delay_seconds", _help("raftsched_fire_delay_seconds"), registry=r, buckets=DELAY_BUCKETS
        )
        self.due_to_leased = Histogram(
            "raftsched_due_to_leased_seconds", _help("raftsched_due_to_leased_seconds"), registry=r, buckets=DELAY_BUCKETS
        )
        finished = Counter("raftsched_runs_finished_total", _help("raftsched_runs_finished_total"), ("status",), registry=r)
        #: one child per final status, made now: every status shows (at 0) from the first scrape
        self.finished = {status: finished.labels(status.value) for status in FINISHED_STATUSES}
        self.leases_granted = Counter("raftsched_leases_granted_total", _help("raftsched_leases_granted_total"), registry=r)
        self.leases_expired = Counter("raftsched_leases_expired_total", _help("raftsched_leases_expired_total"), registry=r)
        self.leader_changes = Counter("raftsched_leader_changes_total", _help("raftsched_leader_changes_total"), registry=r)
        self.snapshot_seconds = Histogram(
            "raftsched_snapshot_seconds", _help("raftsched_snapshot_seconds"), registry=r, buckets=SNAPSHOT_BUCKETS
        )
        self.log_commit_seconds = Histogram(
            "raftsched_raft_log_commit_seconds",
            _help("raftsched_raft_log_commit_seconds"),
            registry=r,
            buckets=LOG_COMMIT_BUCKETS,
        )
        self._requests = Counter(
            "raftsched_grpc_requests_total", _help("raftsched_grpc_requests_total"), ("method", "code"), registry=r
        )
        self._request_seconds = Histogram(
            "raftsched_grpc_request_seconds",
            _help("raftsched_grpc_request_seconds"),
            ("method",),
            registry=r,
            buckets=REQUEST_BUCKETS,
        )
        self._request_children: dict[tuple[str, str], tuple[Counter, Histogram]] = {}
        ProcessCollector(registry=r)

    def observe_grpc(self, method: str, code: str, seconds: float) -> None:
        """A ``raftsched.rpc.server.metrics_interceptor.RequestObserver``."""
        children = self._request_children.get((method, code))
        if children is None:  # label lookups cost a lock and a dict each: keep the children
            children = self._request_children[(method, code)] = (
                self._requests.labels(method, code),
                self._request_seconds.labels(method),
            )
        children[0].inc()
        children[1].observe(seconds)

    def observe_snapshot(self, index: int, seconds: float) -> None:
        """The Raft adapter's snapshot hook (``RaftNode.on_snapshot``)."""
        self.snapshot_seconds.observe(seconds)

    def observe_log_commit(self, seconds: float) -> None:
        """The Raft adapter's log hook (``RaftNode.on_log_commit``; tick thread)."""
        self.log_commit_seconds.observe(seconds)

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The metrics in the format the ``Accept`` header asks for (Prometheus text by default): body, content type."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type
