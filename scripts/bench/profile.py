"""How big and how long a benchmark run is: the full profile and the quick one (``--quick``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    raw_warmup_s: float = 1.0
    raw_measure_s: float = 5.0
    etcd_measure_s: float = 5.0
    create_measure_s: float = 10.0
    fire_rate: int = 2000
    fire_stagger_s: int = 2  # the every-1s jobs are created over this many whole seconds
    fire_warmup_s: float = 2.0
    #: the steady scenario's jobs are created over this part of a second: their instants fall in it every second
    steady_spread_s: float = 1.0
    fire_window_s: float = 10.0
    failover_jobs: int = 200
    failover_kills: int = 10
    failover_settle_s: float = 3.0
    burst_jobs: int = 100_000
    lease_measure_s: float = 5.0
    procs: int = 4
    threads: int = 16
    #: the whole run should end within this (the burst shrinks its lead time, the lease runs are skipped)
    budget_s: float = 600.0


FULL = Profile("full")
QUICK = Profile(
    "quick",
    raw_measure_s=3.0,
    etcd_measure_s=3.0,
    create_measure_s=5.0,
    fire_window_s=5.0,
    failover_kills=4,
    failover_settle_s=2.0,
    burst_jobs=20_000,
    lease_measure_s=3.0,
    budget_s=225.0,
)
