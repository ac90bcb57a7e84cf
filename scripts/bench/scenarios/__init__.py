"""The scenarios, listed once: a scenario is a function ``scenario_<name>(bench)`` in ``SCENARIOS``.

A scenario writes into ``bench.results`` and explains any ``None`` in
``bench.notes``; numbers are measured or ``None``, never estimated. They run
in the order listed: the ones outside ``CLUSTER_SCENARIOS`` first (the raw
Raft ceiling before the client processes start), then, on one 3-node
raftsched cluster, the cluster scenarios, which build on each other (the
fire-lag jobs feed the failover, the burst's runs feed the leases; ``grant_shapes`` makes backlogs of its
own, plain and shaped, after them).
``scenario_machine`` runs before all of them and ``scenario_node_stats``
after the cluster scenarios; neither can be left out. ``security`` (TLS +
tokens + fsync on against off), ``metrics_cost`` (the HTTP endpoint on
and scraped every second against off) and ``worker_vs_executor`` (the SDK's
Worker against `raftsched executor`) start clusters of their own, before
the shared one. ``OPT_IN_SCENARIOS`` run only when named (``steady``: a load to profile the nodes under).
"""

from __future__ import annotations

from collections.abc import Callable

from bench.harness.context import Bench
from bench.scenarios.burst import scenario_burst
from bench.scenarios.create import scenario_create
from bench.scenarios.etcd import scenario_etcd
from bench.scenarios.failover import scenario_failover
from bench.scenarios.fire_lag import scenario_fire_lag
from bench.scenarios.grant_shapes import scenario_grant_shapes
from bench.scenarios.leases import scenario_leases
from bench.scenarios.metrics_cost import scenario_metrics_cost
from bench.scenarios.raw_raft import scenario_raw_raft
from bench.scenarios.security import scenario_security
from bench.scenarios.steady import scenario_steady
from bench.scenarios.worker_vs_executor import scenario_worker_vs_executor

SCENARIOS: list[tuple[str, Callable[[Bench], None]]] = [
    ("raw_raft", scenario_raw_raft),
    ("etcd", scenario_etcd),
    ("create", scenario_create),
    ("fire_lag", scenario_fire_lag),
    ("failover", scenario_failover),
    ("burst", scenario_burst),
    ("leases", scenario_leases),
    ("grant_shapes", scenario_grant_shapes),
    ("steady", scenario_steady),
    ("security", scenario_security),
    ("metrics_cost", scenario_metrics_cost),
    ("worker_vs_executor", scenario_worker_vs_executor),
]
CLUSTER_SCENARIOS = {"create", "fire_lag", "failover", "burst", "leases", "grant_shapes", "steady"}
#: run only when named in --scenarios (not part of "all"): they start clusters of their own
OPT_IN_SCENARIOS: set[str] = {"steady"}
#: left out of a quick run's "all" (they would take the time its budget keeps for the lease scenarios); run when named
NOT_QUICK_SCENARIOS = {"worker_vs_executor", "grant_shapes"}
