"""Scenario ``security``: what the safe defaults cost — TLS + tokens + fsync on, against all three off.

Three 3-node clusters, one after the other (never two at once: they would
share the two cores), each measured the same way in the same run:

* ``off``: plaintext gRPC, no tokens, ``[raft] fsync = false``;
* ``tls+tokens``: TLS and tokens, fsync off (where the cost comes from);
* ``on``: the defaults a real deployment runs with — gRPC over TLS, every
  call with a bearer token checked against the roles, and the Raft log, term
  and vote synced before anything depends on them.

On each: CreateJobs throughput (the ``create_batched`` client task, 100 jobs
a call) and end-to-end runs/s (``E2E_EXECUTORS`` `raftsched executor`
processes with tokens, no-op handler, draining a backlog of due one-off jobs;
the growth of a follower's SUCCEEDED count). ``security_*_ratio`` are on / off:
the target is at least 0.8 for both.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from typing import Any

from bench import stats as st
from bench.harness.common import REPO_ROOT, at_spec, r1
from bench.harness.context import Bench
from bench.harness.pool import merge_errors
from bench.harness.processes import stop_popen
from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.cluster.app.local_security import ADMIN, Grant
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client import Client

E2E_EXECUTORS = 4
E2E_CONCURRENCY = 32
E2E_QUEUE = "bench-security"
BATCH, THREADS = 100, 2
WARMUP_S = 1.0


#: (label, TLS and tokens, fsync): "on" against "off" is the verdict; the middle one shows where a cost comes from
VARIANTS = (("off", False, False), ("tls+tokens", True, False), ("on", True, True))


def _start(b: Bench, label: str, secure: bool, fsync: bool) -> LocalCluster:
    root = os.path.join(b.root, f"security-{label.replace('+', '-')}")
    grants = {f"sec-exec-{i}": Grant(("executor", "reader")) for i in range(E2E_EXECUTORS)}
    extra = "" if fsync else "\n[raft]\nfsync = false\n"
    cluster = LocalCluster.create(root, 3, extra, secure=secure, tokens=grants if secure else None)
    cluster.start_all()
    cluster.wait_leader(60)
    return cluster


def _task_security(cluster: LocalCluster) -> dict[str, str] | None:
    sec = cluster.security
    return None if sec is None else {"ca_file": sec.ca_file, "token": sec.tokens[ADMIN]}


def _create_rate(b: Bench, cluster: LocalCluster, label: str) -> tuple[float | None, dict[str, Any]]:
    assert b.pool is not None
    start = time.time() + 0.5
    until = start + WARMUP_S + b.profile.create_measure_s
    task = {
        "kind": "create_batched",
        "addresses": cluster.addresses,
        "until": until,
        "batch": BATCH,
        "threads": THREADS,
        "security": _task_security(cluster),
    }
    res = b.pool.run([dict(task) for _ in range(b.profile.procs)], f"CreateJobs ({label})", timeout=until - time.time() + 90)
    done = [t for r in res for t in r["done"]]
    return st.rate_in_window(done, start + WARMUP_S, until), merge_errors(res)


def _backlog(client: Client, count: int) -> None:
    """``count`` no-op one-off jobs due now on ``E2E_QUEUE``, 1,000 per CreateJobs call."""
    now = int(time.time() * 1000)
    for k in range(0, count, 1000):
        reqs = [
            pb.CreateJobRequest(spec=at_spec(f"sec-{k + i}", now, E2E_QUEUE), idempotency_key=uuid.uuid4().hex)
            for i in range(min(1000, count - k))
        ]
        client.job("CreateJobs", pb.CreateJobsRequest(jobs=reqs), timeout=60)


def _executors(cluster: LocalCluster) -> list[subprocess.Popen]:
    procs = []
    for i in range(E2E_EXECUTORS):
        name = f"sec-exec-{i}"
        args = [sys.executable, "-m", "raftsched.cluster.app.main", "executor", "--config", cluster.config_path]
        args += ["--executor-id", name, "--queue", E2E_QUEUE, "--concurrency", str(E2E_CONCURRENCY)]
        if cluster.security is not None:
            args += ["--token-file", cluster.security.token_file(name)]
        with open(os.path.join(cluster.root, f"{name}.log"), "ab") as log:
            procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, start_new_session=True))
    return procs


def _succeeded(client: Client) -> int:
    return int(client.cluster_status().runs.succeeded)


def _e2e_rate(b: Bench, cluster: LocalCluster) -> float | None:
    backlog = 15_000 if b.profile.name == "quick" else 40_000
    measure_s = max(5.0, b.profile.lease_measure_s)
    with Client(cluster.addresses, security=cluster.client_security()) as client:
        _backlog(client, backlog)
        deadline = time.time() + 60
        while client.cluster_status().pending_by_queue.get(E2E_QUEUE, 0) < backlog and time.time() < deadline:
            time.sleep(0.2)
        samples: list[tuple[float, int]] = [(time.time(), _succeeded(client))]
        procs = _executors(cluster)
        try:
            while samples[-1][1] == samples[0][1] and time.time() < deadline:
                time.sleep(0.1)
                samples.append((time.time(), _succeeded(client)))
            start = time.time() + WARMUP_S
            until = start + measure_s
            while time.time() < until + 0.2:
                time.sleep(0.1)
                samples.append((time.time(), _succeeded(client)))
        finally:
            stop_popen(procs)
    return st.counter_rate(samples, start, until) if samples[-1][1] > samples[0][1] else None


def scenario_security(b: Bench) -> None:
    b.say(
        "security: the same measurements with TLS + tokens + fsync off, TLS + tokens only, then all on (one cluster after another)"
    )
    rates: dict[str, dict[str, float | None]] = {}
    errors: dict[str, Any] = {}
    for label, secure, fsync in VARIANTS:
        cluster = _start(b, label, secure, fsync)
        try:
            create, errors[label] = _create_rate(b, cluster, label)
            e2e = _e2e_rate(b, cluster)
        finally:
            cluster.stop_all()
        rates[label] = {"create_jobs_batched_per_s": r1(create), "e2e_runs_per_s": r1(e2e)}
        b.say(
            f"  {label}: CreateJobs {create or 0:.0f} jobs/s, e2e {e2e or 0:.0f} runs/s (errors {errors[label].get('counts', {})})"
        )

    def ratio(key: str) -> float | None:
        on, off = rates["on"][key], rates["off"][key]
        return r1(on / off, 3) if on and off else None

    b.results["security_create_batched_ratio"] = ratio("create_jobs_batched_per_s")
    b.results["security_e2e_ratio"] = ratio("e2e_runs_per_s")
    b.extra["security"] = {"rates": rates, "errors": errors}
    note = (
        "on / off in the same run, each on its own fresh 3-node cluster: 'on' = gRPC over TLS + bearer tokens checked "
        "against the roles + [raft] fsync = true (the defaults of a real deployment); 'off' = plaintext, no tokens, "
        f"fsync = false. create_batched: {b.profile.procs} processes x {THREADS} threads of CreateJobs ({BATCH} jobs a "
        f"call); e2e: {E2E_EXECUTORS} executors with tokens (concurrency {E2E_CONCURRENCY}, no-op) on a backlog of "
        f"due one-off jobs, a follower's SUCCEEDED growth. Rates: {rates}"
    )
    b.notes["security_create_batched_ratio"] = b.notes["security_e2e_ratio"] = note
    b.say(f"  on/off: CreateJobs {b.results['security_create_batched_ratio']}, e2e {b.results['security_e2e_ratio']}")
