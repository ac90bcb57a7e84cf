"""Start (or resume, or stop) a local raftsched cluster on loopback with an executor and a sample job.

    scripts/launch_cluster.sh [--nodes 3] [--executors 1] [--dir local-cluster] [--no-sample]
                           [--secure | --mtls | --no-tokens] [--free-ports]
    scripts/launch_cluster.sh --stop [--dir local-cluster]
    scripts/launch_cluster.sh --start-node n2 [--dir local-cluster]
    scripts/launch_cluster.sh --pid n2|leader [--dir local-cluster]
    scripts/launch_cluster.sh --add-node [n4] [--dir local-cluster] [--free-ports]

Nodes and executors run in the background (their own sessions), so this
script returns and the cluster keeps running; their pids are kept in
DIR/pids.json for --stop, --pid and --start-node. Node i listens for Raft on
127.0.0.1:(7000+i), for gRPC on 127.0.0.1:(50050+i), as in docs/config.md,
and serves its HTTP endpoint (the web view at /, /metrics, /healthz) on 127.0.0.1:(8080+i)
(``--free-ports``: any free ports). It writes DIR/client.toml, which
``raftsched`` commands and executors run from DIR's parent (or below) find by
themselves: every command knows every node with no export or flag.

Run again while the cluster runs, it says so and starts only what is not
running. Run again after --stop (or a reboot), it resumes the same cluster
from DIR: same ports, jobs and history (the sample job's misfire policy is
FIRE_ONCE, so it fires once for everything it missed, not once per missed
instant). For a fresh cluster: --stop, then remove DIR.

Every local cluster requires tokens: loopback keeps the traffic off the
network, but any user of this machine can connect to a loopback port, and a
cluster without tokens would let each of them run shell commands as the
executor's owner. The tokens live in DIR/secure (0700, each token file
0600): ``admin.token`` (named in DIR/client.toml, so commands need no flag),
one per executor, and ``viewer.token`` (a reader, for the web view).
``--secure`` also makes a CA and node certificates there (with the
``cryptography`` package) and serves gRPC over TLS; ``--mtls`` also requires
client certificates. ``--no-tokens`` makes an open cluster, for a machine
where every local user is trusted: its executors then run with
``--allow-unauthenticated-cluster``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import grpc

from launch_nodes import add_node, start_node, write_client_config
from launch_procs import Recorded, alive, ours, port_in_use, read_pids, running, spawn_executor, stop_all, write_pids
from raftsched.cluster.app.local_cluster import LocalCluster, read_added
from raftsched.cluster.app.local_security import Grant
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client

#: node i uses these Raft, gRPC and HTTP ports + i - 1
BASE_PORTS = (7001, 50051, 8081)


def stop(root: str) -> int:
    pids = read_pids(root)
    if not pids:
        print(f"no cluster recorded in {root} (no pids.json): nothing to stop")
        return 0
    config = os.path.join(root, "cluster.toml")
    procs = [Recorded(name, pid) for name, pid in pids.items() if alive(pid) and ours(pid, config)]
    gone = sorted(set(pids) - {p.name for p in procs})
    print(f"stopping the cluster in {root}" + (f" ({', '.join(gone)} not running)" if gone else ""), flush=True)
    # executors first: they finish (or hand back) their runs while the nodes still answer
    stop_all([p for p in procs if not p.name.startswith("n")], grace_s=15.0)
    stop_all([p for p in procs if p.name.startswith("n")], grace_s=15.0)
    os.remove(os.path.join(root, "pids.json"))
    print(f"stopped. Its data stays in {root}: scripts/launch_cluster.sh resumes it (remove the directory for a fresh one)")
    return 0


def wait_leader(cluster: LocalCluster, timeout_s: float) -> str | None:
    """The leader once every node that answers names the same one, and it answers too (the
    processes may be this run's or an earlier one's)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        answers = {n: cluster.status(n) for n in cluster.nodes}
        leaders = {s.leader_id for s in answers.values() if s is not None}
        if len(leaders) == 1:
            (leader,) = leaders
            if leader and answers.get(leader) is not None:
                return leader
        time.sleep(0.1)
    return None


def print_pid(root: str, which: str) -> int:
    """The pid of node ``which`` (or of the node that leads now), for ``kill``."""
    live = running(root)
    if which == "leader":
        cluster = LocalCluster.open(root)
        with Client(cluster.addresses, security=cluster.client_security(), unreachable_after_s=2.0) as client:
            try:
                which = client.cluster_status().leader_id
            except grpc.RpcError as exc:
                print(f"cannot ask who leads: {exc.details()}", file=sys.stderr)
                return 1
        if not which:
            print("no node leads right now (an election takes a second or two): try again", file=sys.stderr)
            return 1
    if which not in live:
        print(f"{which} is not running (running: {', '.join(live) or 'nothing'})", file=sys.stderr)
        return 1
    print(live[which])
    return 0


SAMPLE_KEY = "sample-hello"
#: the reader token a secure local cluster makes for the web view
VIEWER = "viewer"


def sample_job(client: Client) -> tuple[pb.Job | None, str]:
    """The sample job, created once (a relaunch finds it; one made by an older version of this script,
    with misfire FIRE_ALL, is changed to FIRE_ONCE); (job, what it is)."""
    for job in client.list_jobs(name_prefix="hello"):
        if job.idempotency_key != SAMPLE_KEY or job.status == pb.JOB_STATUS_DELETED:
            continue
        if job.spec.misfire == pb.MISFIRE_POLICY_FIRE_ONCE:
            return job, "every 10 s, misfire FIRE_ONCE"
        spec = pb.JobSpec()
        spec.CopyFrom(job.spec)
        spec.misfire = pb.MISFIRE_POLICY_FIRE_ONCE
        job = client.job("UpdateJob", pb.UpdateJobRequest(job_id=job.job_id, spec=spec))
        return job, "every 10 s, misfire now FIRE_ONCE"
    spec = pb.JobSpec(
        name="hello",
        queue="default",
        type="shell",
        payload=json.dumps({"command": "echo hello from raftsched at $(date -u +%H:%M:%S)"}).encode(),
        misfire=pb.MISFIRE_POLICY_FIRE_ONCE,  # after downtime: one run for what it missed, not one per instant
    )
    cv.to_dur(10_000, spec.every)
    try:
        return client.create_job(spec, idempotency_key=SAMPLE_KEY), "every 10 s, misfire FIRE_ONCE"
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
            raise
        return None, f"not created: {exc.details()}"


def _executor_command(cluster: LocalCluster, name: str) -> list[str]:
    cmd = [sys.executable, "-m", "raftsched.cluster.app.main", "executor", "--config", cluster.config_path, "--queue", "default"]
    cmd += ["--executor-id", name, "--grace", "5"]
    cmd += ["--allow-type", "shell", "--allow-type", "http"]  # off unless allowed; the sample job is a shell job
    if cluster.security is not None:  # the CA comes from the config's [tls] ca_file
        cmd += [f for f in cluster.security.flags(name) if f not in ("--ca-file", cluster.security.ca_file)]
    else:  # --no-tokens: the user said every local user is trusted
        cmd += ["--allow-unauthenticated-cluster"]
    return cmd


def _kind(cluster: LocalCluster) -> str:
    if cluster.security is None:
        return "plaintext, no tokens"
    return "TLS and tokens" if cluster.security.tls else "tokens"


def web_url(cluster: LocalCluster) -> str:
    """The web view of the cluster's first node ("" when its nodes serve no HTTP)."""
    first = next(iter(cluster.nodes.values()))
    return cluster.http_url(first.node_id, "/") if first.http else ""


def _print_web_view(cluster: LocalCluster) -> None:
    url = web_url(cluster)
    if not url:
        return
    print(f"  web view: {url}  (every node serves one: its http address above)")
    if cluster.security is not None:
        token = cluster.security.token_file(VIEWER if VIEWER in cluster.security.tokens else "admin")
        acts = (
            f"; to pause, trigger, retry or cancel from it: {cluster.security.token_file()}"
            if token != cluster.security.token_file()
            else ""
        )
        if not cluster.security.tls:
            print(
                f"      sign in with the token in {token} (it only looks){acts}"
                if acts
                else f"      sign in with the token in {token}"
            )
            return
        if acts:
            print(f"      the token in {token} only looks{acts}")
        print(f"      sign in with the token in {token}; the browser warns of the certificate: it is signed by")
        print(f"      this cluster's own CA ({cluster.security.ca_file}), which you may trust for 127.0.0.1")


def _print_client_settings(cluster: LocalCluster, client_config: str) -> None:
    if cluster.security is None:
        print("\nThis cluster takes calls without a token (--no-tokens): any user of this machine can create jobs")
        print("and have its executors run them as you. Use it only where every local user is trusted.")
        return
    if not cluster.security.tls:
        print(f"\nThe nodes require a token; {client_config} names the admin one ({cluster.security.token_file()}),")
        print("so `raftsched` commands run from here need no flag. Token files are readable by you only.")
        return
    print("\nThe nodes serve TLS and require a token. For the `raftsched` client (the admin token):")
    env = cluster.security.env()
    env.pop("RAFTSCHED_CA_FILE")  # the client config names the CA
    print(f"  export RAFTSCHED_CONFIG={client_config}")
    for key, value in env.items():
        print(f"  export {key}={value}")
    print("  (or the flags: " + " ".join(cluster.security.flags()) + ")")
    print(
        f"More tokens: raftsched token create --name NAME --role reader, then add the table to {cluster.security.dir}/tokens.toml"
    )


def _open_or_create(root: str, a: argparse.Namespace) -> tuple[LocalCluster, bool] | None:
    """The cluster in ``root``: the existing one (resumed), else a new one; None when it cannot be made."""
    if os.path.exists(os.path.join(root, "cluster.toml")):
        cluster = LocalCluster.open(root)
        wanted = "plaintext, no tokens" if a.no_tokens else ("TLS and tokens" if a.secure or a.mtls else "tokens")
        made_with = len(cluster.nodes) - len(read_added(root))  # the nodes of its config (--add-node adds others)
        if a.nodes != made_with or wanted != _kind(cluster):
            print(f"(the cluster in {root} keeps what it was made with: {len(cluster.nodes)} nodes, {_kind(cluster)}; "
                  "--nodes/--secure/--no-tokens apply to a new one)")  # fmt: skip
        return cluster, True
    taken = [] if a.free_ports else [p + i for i in range(a.nodes) for p in BASE_PORTS if port_in_use(p + i)]
    if taken:
        print(f"port(s) {', '.join(map(str, taken))} on 127.0.0.1 are in use (another cluster?): stop what uses them, "
              "or start with --free-ports")  # fmt: skip
        return None
    grants = {f"executor-{i + 1}": Grant(("executor", "reader")) for i in range(a.executors)}
    grants[VIEWER] = Grant(("reader",))  # to sign in to the web view with
    base = None if a.free_ports else BASE_PORTS  # None: free ports picked by LocalCluster
    cluster = LocalCluster.create(
        root, a.nodes, base_ports=base, secure=a.secure or a.mtls, client_auth=a.mtls, tokens=grants, http=True,
        auth=not a.no_tokens,
    )  # fmt: skip
    return cluster, False


def start(root: str, a: argparse.Namespace) -> int:
    opened = _open_or_create(root, a)
    if opened is None:
        return 1
    cluster, resumed = opened
    live = running(root)
    pids = {name: pid for name, pid in read_pids(root).items() if name in live}
    if resumed:
        missing = [n for n in [*cluster.nodes, *(f"executor-{i + 1}" for i in range(a.executors))] if n not in live]
        if missing:
            print(f"raftsched: resuming the cluster in {root} (its jobs and history are kept): starting {', '.join(missing)}")
        else:
            print(f"raftsched: the cluster in {root} already runs; nothing to start")
    else:
        print(f"raftsched: starting a new {len(cluster.nodes)}-node cluster in {root}", flush=True)
    for node_id in cluster.nodes:
        if node_id not in live:
            pids[node_id] = cluster.start(node_id).pid or 0
    write_pids(root, pids)
    leader = wait_leader(cluster, 30.0)
    if leader is None:
        print(f"error: the nodes agreed on no leader within 30 s; see their logs in {root}")
        return 1
    executors = {}
    for i in range(a.executors):
        name = f"executor-{i + 1}"
        if name not in live:
            pids[name] = spawn_executor(_executor_command(cluster, name), os.path.join(root, f"{name}.log"), root)
        executors[name] = pids[name]
    write_pids(root, pids)
    client_config = write_client_config(cluster)
    _summary(cluster, leader, pids, executors, client_config, a)
    return 0


def _summary(
    cluster: LocalCluster, leader: str, pids: dict[str, int], executors: dict[str, int], client_config: str, a: Any
) -> None:
    root = cluster.root
    print(f"  leader {leader}; config {cluster.config_path}")
    for n in cluster.nodes.values():
        print(f"  {n.node_id}: grpc {n.grpc}  raft {n.raft}  pid {pids.get(n.node_id)}  log {n.log_path}")
        if n.http:
            print(f"      metrics {cluster.http_url(n.node_id, '/metrics')}  health {cluster.http_url(n.node_id, '/healthz')}")
    for name, pid in executors.items():
        print(f"  {name}: queue default, types noop shell http  pid {pid}  log {os.path.join(root, name + '.log')}")
    print(f"  run output: {cluster.output_dir}")
    _print_web_view(cluster)
    if not a.no_sample:
        with Client(cluster.addresses, security=cluster.client_security()) as client:
            job, what = sample_job(client)
        print(f"  sample job: {job.job_id if job is not None else '-'} ('hello', {what})")
    _print_client_settings(cluster, client_config)
    shown = os.path.relpath(client_config)
    if os.path.basename(root) == "local-cluster":
        print(f"\nclient config: {shown} (raftsched finds it from {os.path.dirname(root)} and below: no export needed)")
    else:
        print(f"\nclient config: {shown} (for raftsched: export RAFTSCHED_CONFIG={client_config}, or --config {shown})")
    print("The cluster runs in the background. Try (after `. .venv/bin/activate`):")
    print("  raftsched cluster status")
    print("  raftsched job list")
    print("  raftsched run watch")
    if web_url(cluster):
        print(f"  and open {web_url(cluster)} in a browser")
    print(f"Stop: scripts/launch_cluster.sh --stop{_dir_flag(root)}   (running this script again resumes it)")


def _dir_flag(root: str) -> str:
    return "" if root == os.path.join(os.getcwd(), "local-cluster") else f" --dir {os.path.relpath(root)}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--dir", default=os.path.join(os.getcwd(), "local-cluster"))
    p.add_argument("--no-sample", action="store_true", help="do not create the sample job")
    p.add_argument("--executors", type=int, default=1, help="executor processes to start (default 1)")
    p.add_argument("--stop", action="store_true", help="stop every node and executor of the cluster in --dir")
    p.add_argument("--start-node", metavar="ID", help="start one node of the cluster in --dir again (after a kill)")
    p.add_argument("--pid", metavar="ID", help="print the pid of node ID, or of the node that leads now with 'leader'")
    p.add_argument(
        "--add-node", nargs="?", const="", metavar="ID",
        help="add a node to the running cluster (default: the next id, n4 after n1-n3) on the next free ports",
    )  # fmt: skip
    p.add_argument("--free-ports", action="store_true", help="a new cluster listens on free ports, not 7001-/50051-")
    p.add_argument("--secure", action="store_true", help="TLS and tokens: a CA, certificates and tokens made in DIR/secure")
    p.add_argument("--mtls", action="store_true", help="as --secure, and the nodes require client certificates")
    p.add_argument(
        "--no-tokens", action="store_true", help="no tokens: any local user may call the cluster (trusted machines only)"
    )
    a = p.parse_args()
    if a.no_tokens and (a.secure or a.mtls):
        p.error("--no-tokens cannot go with --secure or --mtls (they require tokens)")
    root = os.path.abspath(a.dir)
    if a.stop:
        return stop(root)
    if a.start_node:
        return start_node(root, a.start_node)
    if a.pid:
        return print_pid(root, a.pid)
    if a.add_node is not None:
        return add_node(root, a.add_node or None, None if a.free_ports else BASE_PORTS)
    if a.nodes < 1:
        p.error("--nodes must be at least 1")
    return start(root, a)


if __name__ == "__main__":
    sys.exit(main())
