"""Scenario ``etcd``: LeaseGrant per second on a 3-member etcd, when installed (``etcd_lease_grants_per_s``)."""

from __future__ import annotations

import os
import shutil
import time

from bench import stats as st
from bench.baselines.etcd import EtcdCluster
from bench.harness.common import r1
from bench.harness.context import Bench
from bench.harness.pool import merge_errors


def _not_installed(b: Bench) -> None:
    b.results["etcd_lease_grants_per_s"] = None
    b.notes["etcd_lease_grants_per_s"] = "etcd is not installed: apt-get install etcd-server etcd-client"
    b.say("etcd: not installed (apt-get install etcd-server etcd-client); skipped")


def _grant_load(b: Bench, etcd: EtcdCluster) -> None:
    p = b.profile
    assert b.pool is not None
    start = time.time() + 1.0
    until = start + 1.0 + p.etcd_measure_s
    tasks = [{"kind": "etcd_grant", "etcd": etcd.endpoints, "until": until} for _ in range(p.procs)]
    res = b.pool.run(tasks, "etcd LeaseGrant", timeout=until - time.time() + 60)
    done = [t for r in res for t in r["done"]]
    lat = [x for r in res for x in r["lat"]]
    rate = st.rate_in_window(done, start + 1.0, until)
    b.results["etcd_lease_grants_per_s"] = r1(rate)
    b.extra["etcd"] = {"latency_ms": st.summarize(lat), "errors": merge_errors(res), "granted": len(done)}
    b.notes["etcd_lease_grants_per_s"] = (
        f"{(b.results.get('machine') or {}).get('etcd') or 'etcd'}, 3 members, default settings "
        "(WAL fsync on; our nodes do not fsync their Raft log by default), LeaseGrant over HTTP/1.1 keep-alive to the grpc-gateway, "
        f"{p.procs} processes x {p.threads} threads spread over the members, 1 s warm-up left out"
    )
    b.say(f"  etcd: {rate or 0:.0f} LeaseGrant/s, p50 {st.percentile(lat, 50) or 0:.1f} ms")


def scenario_etcd(b: Bench) -> None:
    p = b.profile
    binary = shutil.which("etcd")
    if binary is None:
        _not_installed(b)
        return
    b.say(
        f"etcd: 3 members on loopback, LeaseGrant(TTL 30) via the JSON gateway, {p.procs}x{p.threads} clients, {p.etcd_measure_s:.0f} s"
    )
    etcd = EtcdCluster(os.path.join(b.root, "etcd"), binary)
    try:
        etcd.start()
        etcd.wait_healthy()
        _grant_load(b, etcd)
    except (RuntimeError, TimeoutError, OSError) as exc:
        b.results["etcd_lease_grants_per_s"] = None
        b.notes["etcd_lease_grants_per_s"] = f"etcd run failed: {exc}"
        b.say(f"  etcd failed: {exc}")
    finally:
        etcd.stop()
