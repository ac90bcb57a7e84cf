"""Start (or stop) a local raftsched cluster on loopback with an executor and a sample job.

    python scripts/launch_cluster.py [--nodes 3] [--executors 1] [--dir local-cluster] [--no-sample] [--secure | --mtls]
    python scripts/launch_cluster.py --stop [--dir local-cluster]
    python scripts/launch_cluster.py --start-node n2 [--dir local-cluster]

Nodes run in the background (their own sessions), so this script returns;
their pids are kept in DIR/pids.json for --stop. Node i listens for Raft on
127.0.0.1:(7000+i), for gRPC on 127.0.0.1:(50050+i), as in docs/config.md, so
`raftsched ...` finds the cluster with no flags, and serves its HTTP endpoint
(/metrics, /healthz) on 127.0.0.1:(8080+i).

``--secure`` makes a CA, node certificates and tokens in DIR/secure (with the
``cryptography`` package), serves gRPC over TLS with tokens required, gives
each executor its own token, and prints the client settings to use;
``--mtls`` also requires client certificates.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from cluster.app.local_cluster import LocalCluster
from cluster.app.local_security import Grant
from protos.raftsched.v1 import scheduler_pb2 as pb
from rpc import convert as cv
from rpc.client.client import Client


def _pids_path(root: str) -> str:
    return os.path.join(root, "pids.json")


def stop(root: str) -> int:
    path = _pids_path(root)
    if not os.path.exists(path):
        print(f"no cluster recorded in {root} (no pids.json)")
        return 1
    with open(path, encoding="utf-8") as f:
        pids = json.load(f)
    for name, pid in pids.items():
        try:
            os.kill(pid, signal.SIGTERM)
            print(f"sent SIGTERM to {name} (pid {pid})")
        except ProcessLookupError:
            print(f"{name} (pid {pid}) was not running")
    deadline = time.monotonic() + 10
    for pid in pids.values():
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
    os.remove(path)
    return 0


def start_node(root: str, node_id: str) -> int:
    """Start one node of an existing local cluster again (after a kill)."""
    cluster = LocalCluster.open(root)
    if node_id not in cluster.nodes:
        print(f"no node {node_id!r} in {cluster.config_path}")
        return 1
    node = cluster.start(node_id)  # the config names the TLS files and tokens, if any
    pids = {}
    if os.path.exists(_pids_path(root)):
        with open(_pids_path(root), encoding="utf-8") as f:
            pids = json.load(f)
    pids[node_id] = node.pid
    with open(_pids_path(root), "w", encoding="utf-8") as f:
        json.dump(pids, f)
    print(f"{node_id}: grpc {node.grpc}  raft {node.raft}  pid {node.pid}  log {node.log_path}")
    if node.http:
        print(f"    metrics {cluster.http_url(node_id, '/metrics')}  health {cluster.http_url(node_id, '/healthz')}")
    return 0


def sample_job(client: Any) -> Any:
    spec = pb.JobSpec(
        name="hello",
        queue="default",
        type="shell",
        payload=json.dumps({"command": "echo hello from raftsched at $(date -u +%H:%M:%S)"}).encode(),
    )
    cv.to_dur(10_000, spec.every)
    return client.create_job(spec, idempotency_key="sample-hello")


def _executor_command(cluster: LocalCluster, name: str) -> list[str]:
    cmd = [sys.executable, "-m", "cluster.app.main", "executor", "--config", cluster.config_path, "--queue", "default"]
    cmd += ["--executor-id", name]
    cmd += ["--allow-type", "shell", "--allow-type", "http"]  # off unless allowed; the sample job is a shell job
    if cluster.security is not None:  # the CA comes from the config's [tls] ca_file
        cmd += [f for f in cluster.security.flags(name) if f not in ("--ca-file", cluster.security.ca_file)]
    return cmd


def _print_client_settings(cluster: LocalCluster) -> None:
    if cluster.security is None:
        return
    print("\nThe nodes serve TLS and require a token. For the `raftsched` client (the admin token):")
    for key, value in cluster.security.env().items():
        print(f"  export {key}={value}")
    print("  (or the flags: " + " ".join(cluster.security.flags()) + ")")
    print(
        f"More tokens: raftsched token create --name NAME --role reader, then add the table to {cluster.security.dir}/tokens.toml"
    )


def start(root: str, count: int, sample: bool, n_executors: int, secure: bool = False, mtls: bool = False) -> int:
    if os.path.exists(_pids_path(root)):
        print(f"a cluster seems to run from {root} already; stop it first: scripts/launch_cluster.sh --stop --dir {root}")
        return 1
    grants = {f"executor-{i + 1}": Grant(("executor", "reader")) for i in range(n_executors)}
    cluster = LocalCluster.create(
        root, count, base_ports=(7001, 50051, 8081), secure=secure, client_auth=mtls, tokens=grants, http=True
    )
    cluster.start_all()
    try:
        leader = cluster.wait_leader(30)
    except TimeoutError as exc:
        print(f"error: {exc}")
        cluster.stop_all()
        return 1
    pids = {n.node_id: n.pid for n in cluster.nodes.values()}
    executors = {}
    for i in range(n_executors):
        name = f"executor-{i + 1}"
        log_path = os.path.join(root, f"{name}.log")
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                _executor_command(cluster, name),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=root,
                start_new_session=True,
            )
        pids[name] = proc.pid
        executors[name] = (proc.pid, log_path)
    with open(_pids_path(root), "w", encoding="utf-8") as f:
        json.dump(pids, f)
    print(f"raftsched: {count}-node cluster on loopback, leader {leader}")
    print(f"  config: {cluster.config_path}")
    for n in cluster.nodes.values():
        print(f"  {n.node_id}: grpc {n.grpc}  raft {n.raft}  pid {n.pid}  log {n.log_path}")
        print(f"      metrics {cluster.http_url(n.node_id, '/metrics')}  health {cluster.http_url(n.node_id, '/healthz')}")
    for name, (pid, log_path) in executors.items():
        print(f"  {name}: queue default, types noop shell http  pid {pid}  log {log_path}")
        print(f"    run logs in {os.path.join(root, 'var', 'outputs')}")
    if sample:
        with Client(cluster.addresses, security=cluster.client_security()) as client:
            job = sample_job(client)
        print(f"  sample job: {job.job_id} ('hello', every 10 s)")
    addrs = ",".join(cluster.addresses)
    _print_client_settings(cluster)
    print("\nTry:")
    print("  raftsched cluster status")
    print("  raftsched job list")
    print("  raftsched run watch")
    print("  raftsched run logs <run id>")
    print(f"Stop: scripts/launch_cluster.sh --stop --dir {root}   (or: kill {' '.join(str(p) for p in pids.values())})")
    print(f"Addresses for clients: RAFTSCHED_CLUSTER={addrs}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--dir", default=os.path.join(os.getcwd(), "local-cluster"))
    p.add_argument("--no-sample", action="store_true", help="do not create the sample job")
    p.add_argument("--executors", type=int, default=1, help="executor processes to start (default 1)")
    p.add_argument("--stop", action="store_true", help="stop every node of the cluster in --dir")
    p.add_argument("--start-node", metavar="ID", help="start one node of the cluster in --dir again (after a kill)")
    p.add_argument("--secure", action="store_true", help="TLS and tokens: a CA, certificates and tokens made in DIR/secure")
    p.add_argument("--mtls", action="store_true", help="as --secure, and the nodes require client certificates")
    a = p.parse_args()
    root = os.path.abspath(a.dir)
    if a.stop:
        return stop(root)
    if a.start_node:
        return start_node(root, a.start_node)
    if a.nodes < 1:
        p.error("--nodes must be at least 1")
    return start(root, a.nodes, not a.no_sample, a.executors, a.secure, a.mtls)


if __name__ == "__main__":
    sys.exit(main())
