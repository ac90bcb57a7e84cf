"""The node's Prometheus metrics: names and kinds exactly as the contract table (docs/api.md, "Operating a
cluster"), the gauges read from the state at scrape time, and the run events of a real state machine
turned into counters and histograms (with a fake leadership flag and clock)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import At, ConcurrencyPolicy, Every, JobSpec, RetryPolicy
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.clock import FakeClock
from raftsched.cluster.node.clock_guard import PeerOffset
from raftsched.cluster.node.event_hub import EventHub
from raftsched.cluster.node.fitness import Fitness, FitnessView
from raftsched.cluster.node.health import Health
from raftsched.cluster.node.replica import Replica
from raftsched.rpc.http.metrics import METRICS, NodeMetrics
from raftsched.rpc.http.run_metrics import LeaderChanges, RunEventMetrics
from raftsched.rpc.http.state_collector import FitnessCollector, StateCollector

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000
SEC = 1000

#: the contract table, as docs/api.md writes it: name -> (kind, labels)
CONTRACT: dict[str, tuple[str, tuple[str, ...]]] = {
    "raftsched_fire_delay_seconds": ("histogram", ()),
    "raftsched_due_to_leased_seconds": ("histogram", ()),
    "raftsched_runs_finished_total": ("counter", ("status",)),
    "raftsched_runs": ("gauge", ("status",)),
    "raftsched_queue_depth": ("gauge", ("queue",)),
    "raftsched_jobs": ("gauge", ("status",)),
    "raftsched_leases_granted_total": ("counter", ()),
    "raftsched_leases_expired_total": ("counter", ()),
    "raftsched_raft_term": ("gauge", ()),
    "raftsched_raft_commit_index": ("gauge", ()),
    "raftsched_raft_applied_index": ("gauge", ()),
    "raftsched_is_leader": ("gauge", ()),
    "raftsched_leader_changes_total": ("counter", ()),
    "raftsched_snapshot_seconds": ("histogram", ()),
    "raftsched_raft_log_commit_seconds": ("histogram", ()),
    "raftsched_grpc_requests_total": ("counter", ("method", "code")),
    "raftsched_grpc_request_seconds": ("histogram", ("method",)),
    "raftsched_clock_offset_seconds": ("gauge", ("peer",)),
    "raftsched_clock_ok": ("gauge", ()),
    "raftsched_storage_ok": ("gauge", ()),
}


class FakeRaft:
    def __init__(self, leader: bool = True) -> None:
        self.leader = leader
        self.term, self.commit_index, self.applied_index = 4, 120, 118

    def is_leader(self) -> bool:
        return self.leader


class Machine:
    """A real state machine fed like Raft feeds it, and a Replica in front of it for reads."""

    def __init__(self) -> None:
        self.m = JobStateMachine()
        self.index = 0
        self.store = Replica(self.m, FakeClock(), EventHub(lambda: 0), 1.0)

    def ok(self, cmd: c.Command) -> Any:
        self.index += 1
        result = self.m.apply(c.encode(cmd), self.index)
        assert type(result).__name__ == "Ok", result
        return result.value


def _node(leader: bool = True) -> tuple[NodeMetrics, FakeRaft, Machine]:
    metrics, raft, machine = NodeMetrics(), FakeRaft(leader), Machine()
    metrics.registry.register(StateCollector(machine.store, raft))
    offsets = {"127.0.0.1:7002": PeerOffset(-1200.0, True), "127.0.0.1:7003": PeerOffset(0.0, False)}
    view = FitnessView("127.0.0.1:7001", Fitness(), lambda: offsets, dict)
    metrics.registry.register(FitnessCollector(view, {"127.0.0.1:7002": "n2"}))
    return metrics, raft, machine


def _families(metrics: NodeMetrics) -> dict[str, Any]:
    body, content_type = metrics.exposition()
    assert content_type.startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def _exposed_name(name: str, kind: str) -> str:
    """The family name the text format's parser reports (a counter's without its ``_total``)."""
    return name.removesuffix("_total") if kind == "counter" else name


REPO = Path(__file__).resolve().parents[2]


def _table(path: Path, section: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """The metric table of a markdown section: name -> (kind, labels), from rows like
    ``| `a{x}`, `b` | counter, histogram | ... |`` (one kind per name, or one for all)."""
    text = path.read_text().split(section, 1)[1]
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| `raftsched_") or len(cells) < 2:
            continue
        names = re.findall(r"`(raftsched_[a-z_]+)(?:\{([a-z_,]+)\})?`", cells[0])
        kinds = [k.strip() for k in cells[1].split(",")]
        for i, (name, labels) in enumerate(names):
            out[name] = (kinds[i] if len(kinds) == len(names) else kinds[0], tuple(labels.split(",")) if labels else ())
    return out


def test_the_contract_tables_say_what_this_test_checks() -> None:
    assert _table(REPO / "docs" / "api.md", "## Operating a cluster") == CONTRACT
    assert _table(REPO / "docs" / "operations.md", "### Metrics") == CONTRACT


def test_metric_names_kinds_and_labels_are_the_contract_table_exactly() -> None:
    assert {m.name: (m.kind, m.labels) for m in METRICS} == CONTRACT
    metrics, _, machine = _node()
    machine.ok(c.CreateJob(T0, "j1", JobSpec(name="a", schedule=Every(SEC), type="noop", queue="q"), ""))
    machine.ok(c.Fire(T0 + SEC, (("j1", T0 + SEC),), 0, 5_000))  # a PENDING run: a queue to show
    metrics.observe_grpc("raftsched.v1.JobService/GetJob", "OK", 0.01)  # labelled children appear once used
    families = {name: f for name, f in _families(metrics).items() if name.startswith("raftsched_")}
    assert not [name for name in families if name.endswith("_created")]  # no *_created series
    assert set(families) == {_exposed_name(name, kind) for name, (kind, _) in CONTRACT.items()}
    for name, (kind, labels) in CONTRACT.items():
        family = families[_exposed_name(name, kind)]
        assert family.type == kind, name
        assert family.samples, f"{name} has no sample"
        for sample in family.samples:
            assert set(sample.labels) - {"le"} == set(labels), (name, sample)


def test_gauges_read_the_state_and_raft_at_scrape_time() -> None:
    metrics, raft, machine = _node(leader=False)
    spec = JobSpec(name="a", schedule=Every(SEC), type="noop", queue="reports")
    machine.ok(c.CreateJob(T0, "j1", spec, ""))
    machine.ok(c.CreateJob(T0, "j2", spec, ""))
    machine.ok(c.PauseJob(T0, "j2"))
    machine.ok(c.Fire(T0 + 3 * SEC, (("j1", T0 + SEC),), 0, 60_000))  # three instants, three PENDING runs
    get = metrics.registry.get_sample_value
    assert get("raftsched_runs", {"status": "PENDING"}) == 3
    assert get("raftsched_runs", {"status": "SUCCEEDED"}) == 0
    assert get("raftsched_queue_depth", {"queue": "reports"}) == 3
    assert get("raftsched_jobs", {"status": "ACTIVE"}) == 1 and get("raftsched_jobs", {"status": "PAUSED"}) == 1
    assert (get("raftsched_raft_term"), get("raftsched_raft_commit_index"), get("raftsched_raft_applied_index")) == (4, 120, 118)
    assert get("raftsched_is_leader") == 0
    raft.leader = True
    machine.ok(c.AcquireLeases(T0 + 3 * SEC, "x", ("reports",), 2))
    assert get("raftsched_is_leader") == 1
    assert get("raftsched_queue_depth", {"queue": "reports"}) == 1 and get("raftsched_runs", {"status": "LEASED"}) == 2


def test_run_events_feed_the_counters_and_histograms_on_the_leader_only() -> None:
    metrics, raft, machine = _node()
    now = [T0]
    hook = RunEventMetrics(metrics, raft.is_leader, lambda: now[0])
    retry = RetryPolicy(max_attempts=2, initial_backoff_ms=1000, jitter=0.0)
    spec = JobSpec(name="a", schedule=Every(10 * SEC), type="noop", queue="q", retry=retry, lease_ttl_ms=5 * SEC)
    machine.ok(c.CreateJob(T0, "j1", spec, ""))
    machine.m.drain_events()

    def apply(cmd: c.Command, at_ms: int) -> Any:
        value = machine.ok(cmd)
        now[0] = at_ms  # the leader's clock when the entry is applied
        hook.on_applied(machine.m.drain_events())
        return value

    get = metrics.registry.get_sample_value
    apply(c.Fire(T0 + 10 * SEC, (("j1", T0 + 10 * SEC),), 0, 60_000), T0 + 10 * SEC + 250)  # fired 250 ms late
    assert get("raftsched_fire_delay_seconds_count") == 1 and get("raftsched_fire_delay_seconds_sum") == pytest.approx(0.25)
    (grant,) = apply(c.AcquireLeases(T0 + 11 * SEC, "x", ("q",), 1), T0 + 11 * SEC)  # due at 10 s, leased at 11 s
    assert get("raftsched_leases_granted_total") == 1
    assert get("raftsched_due_to_leased_seconds_sum") == pytest.approx(1.0)
    apply(c.ExpireLeases(T0 + 17 * SEC, ((grant.run.lease_id, grant.run.fencing_token, 0.5),)), T0 + 17 * SEC)
    assert get("raftsched_leases_expired_total") == 1  # and the run waits for its retry (due at 18 s)
    assert get("raftsched_runs_finished_total", {"status": "DEAD_LETTER"}) == 0
    (grant,) = apply(c.AcquireLeases(T0 + 18_500, "x", ("q",), 1), T0 + 18_500)  # the retry: due 18 s, leased 18.5 s
    assert get("raftsched_due_to_leased_seconds_count") == 2
    assert get("raftsched_due_to_leased_seconds_sum") == pytest.approx(1.5)
    apply(c.CompleteRun(T0 + 19 * SEC, grant.run.lease_id, grant.run.fencing_token, False, error="boom"), T0 + 19 * SEC)
    assert get("raftsched_runs_finished_total", {"status": "DEAD_LETTER"}) == 1  # its last attempt failed
    manual = apply(c.TriggerJob(T0 + 19 * SEC, "j1"), T0 + 25 * SEC)
    assert manual.manual and get("raftsched_fire_delay_seconds_count") == 1  # a manual run has no fire delay
    apply(c.CancelRun(T0 + 19 * SEC, manual.run_id), T0 + 19 * SEC)
    assert get("raftsched_runs_finished_total", {"status": "CANCELLED"}) == 1

    raft.leader = False  # a follower applies the same entries and counts nothing
    apply(c.Fire(T0 + 30 * SEC, (("j1", T0 + 20 * SEC),), 0, 60_000), T0 + 30 * SEC)
    assert get("raftsched_fire_delay_seconds_count") == 1
    assert get("raftsched_runs_finished_total", {"status": "SUCCEEDED"}) == 0


def test_an_entry_of_many_grants_and_completions_counts_each() -> None:
    metrics, raft, machine = _node()
    raft.leader = True
    hook = RunEventMetrics(metrics, raft.is_leader, lambda: T0 + 10 * SEC)
    retry = RetryPolicy(max_attempts=1)
    for k in range(5):
        spec = JobSpec(name=f"j{k}", schedule=At(T0 + SEC), type="noop", queue="q", retry=retry)
        machine.ok(c.CreateJob(T0, f"j{k}", spec, ""))
    machine.ok(c.Fire(T0 + SEC, tuple((f"j{k}", T0 + SEC) for k in range(5)), 0, 60_000))
    grants = machine.ok(c.AcquireLeases(T0 + 2 * SEC, "x", ("q",), 5))
    for k, g in enumerate(grants[:4]):  # one entry's completions, as a batch of CompleteRuns applies them
        machine.ok(c.CompleteRun(T0 + 3 * SEC, g.run.lease_id, g.run.fencing_token, k != 3, error="boom" * (k == 3)))
    machine.ok(c.CancelRun(T0 + 3 * SEC, grants[4].run.run_id))
    hook.on_applied(machine.m.drain_events())
    get = metrics.registry.get_sample_value
    assert get("raftsched_fire_delay_seconds_count") == 5 and get("raftsched_leases_granted_total") == 5
    assert get("raftsched_due_to_leased_seconds_count") == 5
    assert get("raftsched_runs_finished_total", {"status": "SUCCEEDED"}) == 3
    assert get("raftsched_runs_finished_total", {"status": "DEAD_LETTER"}) == 1
    # a LEASED run asked to stop is not finished until its executor says so
    assert get("raftsched_runs_finished_total", {"status": "CANCELLED"}) == 0


def test_skipped_runs_count_as_finished_skipped() -> None:
    metrics, raft, machine = _node()
    hook = RunEventMetrics(metrics, raft.is_leader, lambda: T0)
    spec = JobSpec(name="a", schedule=Every(SEC), type="noop", concurrency=ConcurrencyPolicy.FORBID)
    machine.ok(c.CreateJob(T0, "j1", spec, ""))
    machine.ok(c.Fire(T0 + SEC, (("j1", T0 + SEC),), 0, 5_000))
    machine.ok(c.Fire(T0 + 2 * SEC, (("j1", T0 + 2 * SEC),), 0, 5_000))  # the first still runs: FORBID skips it
    events = machine.m.drain_events()
    hook.on_applied(events)
    assert [kind for kind, _ in events] == ["fired", "skipped"]
    assert metrics.registry.get_sample_value("raftsched_runs_finished_total", {"status": "SKIPPED"}) == 1


def test_leader_changes_count_a_new_leader_or_a_new_term_not_the_first_or_a_lost_quorum() -> None:
    metrics = NodeMetrics()
    changes = LeaderChanges(metrics)
    seen = [
        Health(False, None, 0, ""),
        Health(True, "n1", 1, ""),  # the first leader seen: not a change
        Health(False, "n1", 1, ""),  # quorum lost, same leader and term
        Health(False, None, 1, ""),
        Health(True, "n2", 2, ""),  # a change
        Health(True, "n2", 4, ""),  # re-elected in a new term: a change
    ]
    before = None
    for now in seen:
        changes.on_health(before, now)
        before = now
    assert metrics.registry.get_sample_value("raftsched_leader_changes_total") == 2


def test_grpc_requests_and_snapshots_are_observed() -> None:
    metrics = NodeMetrics()
    for code in ("OK", "OK", "UNAUTHENTICATED"):
        metrics.observe_grpc("raftsched.v1.JobService/ListJobs", code, 0.002)
    metrics.observe_snapshot(100, 0.3)
    get = metrics.registry.get_sample_value
    assert get("raftsched_grpc_requests_total", {"method": "raftsched.v1.JobService/ListJobs", "code": "OK"}) == 2
    assert get("raftsched_grpc_requests_total", {"method": "raftsched.v1.JobService/ListJobs", "code": "UNAUTHENTICATED"}) == 1
    assert get("raftsched_grpc_request_seconds_count", {"method": "raftsched.v1.JobService/ListJobs"}) == 3
    assert get("raftsched_snapshot_seconds_sum") == pytest.approx(0.3)
    metrics.observe_log_commit(0.004)
    metrics.observe_log_commit(0.2)
    assert get("raftsched_raft_log_commit_seconds_count") == 2
    assert get("raftsched_raft_log_commit_seconds_bucket", {"le": "0.005"}) == 1
