"""Nodes of a local cluster one at a time: start one again after a kill (``--start-node``), or add a new one
(``--add-node``: AddNode, then the node started with ``--join``; the launcher knows it from then on, in
``added.json``, for ``--pid``, ``--stop``, ``--start-node`` and resuming).
"""

from __future__ import annotations

import os
import time

import grpc

from launch_procs import port_in_use, read_pids, running, write_pids
from raftsched.cluster.app.client_config import client_config_text
from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.client import Client


def start_node(root: str, node_id: str) -> int:
    """Start one node of an existing local cluster again (after a kill)."""
    cluster = LocalCluster.open(root)
    if node_id not in cluster.nodes:
        print(f"no node {node_id!r} in {cluster.config_path} (it has {', '.join(cluster.nodes)})")
        return 1
    pids = read_pids(root)
    if node_id in running(root):
        print(f"{node_id} already runs (pid {pids[node_id]})")
        return 0
    node = cluster.start(node_id)  # the config names the TLS files and tokens, if any
    pids[node_id] = node.pid or 0
    write_pids(root, pids)
    print(f"{node_id}: grpc {node.grpc}  raft {node.raft}  pid {node.pid}  log {node.log_path}", flush=True)
    others = [n for n in running(root) if n in cluster.nodes and n != node_id]
    wait_rejoined(cluster, node_id, others)
    return 0


def wait_rejoined(cluster: LocalCluster, node_id: str, others: list[str], timeout_s: float = 30.0) -> None:
    """Say when ``node_id`` has caught up with the others' commit index and it and every running node
    reach each other."""
    started = time.monotonic()
    target = max((s.commit_index for s in (cluster.status(n) for n in others) if s is not None), default=0)
    while time.monotonic() - started < timeout_s:
        mine = cluster.status(node_id)
        views = [cluster.status(n) for n in others]
        sees = all(v is not None and any(m.id == node_id and m.reachable for m in v.members) for v in views)
        seen = mine is not None and all(m.reachable for m in mine.members if m.id in others)
        if mine is not None and mine.applied_index >= target and sees and seen:
            print(f"{node_id} rejoined in {time.monotonic() - started:.1f} s: it applied the log up to index "
                  f"{mine.applied_index} and every running node reaches it")  # fmt: skip
            return
        time.sleep(0.2)
    print(f"{node_id} has not caught up after {timeout_s:.0f} s; see its log {cluster.nodes[node_id].log_path}")


def add_node(root: str, node_id: str | None, base_ports: tuple[int, ...] | None) -> int:
    """Add a node to the running local cluster in ``root``: the next free id (``n4`` after n1-n3) unless
    ``node_id``, on the next ports after the others' (``base_ports`` + its number - 1) when they are free, else
    on any free ports; AddNode, then start it with ``--join``; wait until it caught up."""
    cluster = LocalCluster.open(root)
    live = [n for n in running(root) if n in cluster.nodes]
    if not live:
        print(f"the cluster in {root} is not running: start it first (scripts/launch_cluster.sh)")
        return 1
    node_id = node_id or _next_id(cluster)
    if node_id in cluster.nodes:
        print(f"{node_id} is already a node of the cluster in {root} (its nodes: {', '.join(cluster.nodes)})")
        return 1
    number = int(node_id[1:]) if node_id[1:].isdigit() else 0
    wanted = tuple(p + number - 1 for p in base_ports) if base_ports and number else ()
    held = [p for p in wanted if port_in_use(p)]
    if held:
        print(f"{node_id}: port(s) {', '.join(map(str, held))} on 127.0.0.1 in use: it listens on free ports instead")
    node = cluster.new_node(node_id, wanted if wanted and not held else None, http=True)
    request = pb.AddNodeRequest(id=node_id, raft_address=node.raft, grpc_address=node.grpc, http_address=node.http)
    others = [cluster.nodes[n].grpc for n in live]
    try:
        with Client(others, security=cluster.client_security()) as client:
            client.cluster("AddNode", request, timeout=60)
    except grpc.RpcError as exc:
        print(f"AddNode {node_id} was refused: {exc.details()}")
        return 1
    cluster.remember_added(node_id)
    if cluster.security is not None:
        cluster.security.issue_node(node_id)
    pids = read_pids(root)
    env = cluster.security.env() if cluster.security is not None else {}  # it asks the members with the admin token
    pids[node_id] = cluster.start(node_id, join=others, env=env).pid or 0
    write_pids(root, pids)
    print(f"{node_id}: grpc {node.grpc}  raft {node.raft}  http {node.http}  pid {pids[node_id]}  log {node.log_path}")
    write_client_config(cluster)
    wait_rejoined(cluster, node_id, live)
    return 0


def _next_id(cluster: LocalCluster) -> str:
    taken = {int(n[1:]) for n in cluster.nodes if n[1:].isdigit()}
    return f"n{next(i for i in range(1, len(taken) + 2) if i not in taken)}"


def write_client_config(cluster: LocalCluster) -> str:
    path = os.path.join(cluster.root, "client.toml")
    sec = cluster.security
    ca = os.path.relpath(sec.ca_file, cluster.root) if sec is not None and sec.tls else ""
    token = os.path.relpath(sec.token_file(), cluster.root) if sec is not None else ""
    with open(path, "w", encoding="utf-8") as f:
        f.write(client_config_text(cluster.addresses, os.path.relpath(cluster.output_dir, cluster.root), ca, token))
    os.chmod(path, 0o600)
    return path
