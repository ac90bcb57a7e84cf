"""The gauges Prometheus reads at scrape time: runs, queues and jobs from the state, and Raft's indexes.

One read of the node's applied state per scrape (``Replica.read``
with ``barrier=False``: no Raft round, just the state lock for as long as it
takes to copy three small tables the state machine keeps up to date in
apply: run counts by status, PENDING runs per queue, job counts by status).
A follower's gauges may trail the leader's by the entries it has not
applied yet. The Raft gauges read pysyncobj's counters without a lock.
"""

from __future__ import annotations

from typing import Iterator, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from raftsched.cluster.domain.model import JobStatus, RunStatus
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.fitness import CLOCK, STORAGE, FitnessView
from raftsched.cluster.node.replica import Replica
from raftsched.rpc.http.metrics import BY_NAME

StateTables = tuple[dict[RunStatus, int], dict[str, int], dict[JobStatus, int]]


class RaftGauges(Protocol):
    def is_leader(self) -> bool: ...

    @property
    def term(self) -> int: ...

    @property
    def commit_index(self) -> int: ...

    @property
    def applied_index(self) -> int: ...


def _tables(m: JobStateMachine) -> StateTables:
    return dict(m.run_counts), m.queue_depths(), dict(m.job_counts)


def _family(name: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, BY_NAME[name].help, labels=list(labels) or None)


class StateCollector(Collector):
    def __init__(self, replica: Replica, raft: RaftGauges) -> None:
        self._replica = replica
        self._raft = raft

    def describe(self) -> Iterator[Metric]:
        """The families without samples (so registering reads nothing)."""
        for name in ("raftsched_runs", "raftsched_queue_depth", "raftsched_jobs"):
            yield _family(name, BY_NAME[name].labels)
        for name in ("raftsched_raft_term", "raftsched_raft_commit_index", "raftsched_raft_applied_index", "raftsched_is_leader"):
            yield _family(name)

    def collect(self) -> Iterator[Metric]:
        runs, queues, jobs = self._replica.read(_tables, barrier=False)
        family = _family("raftsched_runs", ("status",))
        for status, n in runs.items():
            family.add_metric([status.value], n)
        yield family
        family = _family("raftsched_queue_depth", ("queue",))
        for queue, n in sorted(queues.items()):
            family.add_metric([queue], n)
        yield family
        family = _family("raftsched_jobs", ("status",))
        for job_status, n in jobs.items():
            family.add_metric([job_status.value], n)
        yield family
        raft = self._raft
        for name, value in (
            ("raftsched_raft_term", raft.term),
            ("raftsched_raft_commit_index", raft.commit_index),
            ("raftsched_raft_applied_index", raft.applied_index),
            ("raftsched_is_leader", 1 if raft.is_leader() else 0),
        ):
            family = _family(name)
            family.add_metric([], value)
            yield family


class FitnessCollector(Collector):
    """``raftsched_clock_offset_seconds{peer}`` (each peer measured lately: its clock minus this node's),
    ``raftsched_clock_ok`` and ``raftsched_storage_ok`` (1/0: this node's own, ``raftsched.cluster.node.fitness``)."""

    def __init__(self, view: FitnessView, names: dict[str, str]) -> None:
        self._view = view
        self._names = names  # Raft address -> node id

    def describe(self) -> Iterator[Metric]:
        yield _family("raftsched_clock_offset_seconds", ("peer",))
        yield _family("raftsched_clock_ok")
        yield _family("raftsched_storage_ok")

    def collect(self) -> Iterator[Metric]:
        family = _family("raftsched_clock_offset_seconds", ("peer",))
        for address, offset in sorted(self._view.offsets().items()):
            if offset.measured:
                family.add_metric([self._names.get(address, address)], offset.offset_ms / 1000.0)
        yield family
        fitness = self._view.fitness
        for name, kind in (("raftsched_clock_ok", CLOCK), ("raftsched_storage_ok", STORAGE)):
            family = _family(name)
            family.add_metric([], 1 if fitness.ok(kind) else 0)
            yield family
