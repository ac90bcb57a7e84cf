"""The backlog, built without the API: a state machine with ``n`` jobs, written as each node's snapshot.

Creating a million jobs through the API would take longer than the
measurement (the create rate is measured by ``scripts/bench.py``), so every
node's data dir gets the same snapshot file, as if the cluster had taken it.
"""

from __future__ import annotations

import json
import os

from cluster.app.local_cluster import LocalCluster
from cluster.domain import commands as c
from cluster.domain.model import At, Cron, Every, JobSpec
from cluster.domain.state import JobStateMachine
from cluster.node.config import load_config
from raft.snapshot_file import write_snapshot

NO_OP = b"\x01"  # pysyncobj's _COMMAND_TYPE.NO_OP entry
DAY_MS = 86_400_000


def build_state(n: int, now_ms: int) -> JobStateMachine:
    """``n`` jobs far in the future, a third each: every 1 h, a Berlin cron at 03:00, ``at`` in 30 days."""
    m = JobStateMachine()
    payload = json.dumps({"command": "echo report"}).encode()
    schedules = [Every(3_600_000), Cron("0 3 * * *", "Europe/Berlin"), At(now_ms + 30 * DAY_MS)]
    for i in range(n):
        spec = JobSpec(name=f"backlog-{i}", schedule=schedules[i % 3], payload=payload)
        result = m.apply_command(c.CreateJob(now_ms, f"j-backlog-{i:09d}", spec, "", "seeded"), i + 1)
        assert result.__class__.__name__ == "Ok", result
    return m


def seed(cluster: LocalCluster, state: bytes) -> int:
    """Every node's data dir gets its NODE file and the snapshot ``state``; the snapshot file's size in bytes."""
    cfg = load_config(cluster.config_path)
    raft_data = ((NO_OP, 2, 0), (NO_OP, 1, 0), [n.raft for n in cfg.nodes])
    for n in cfg.nodes:
        node_dir = cfg.node_dir(n.id)
        os.makedirs(node_dir, exist_ok=True)
        with open(os.path.join(node_dir, "NODE"), "w", encoding="utf-8") as f:
            json.dump({"node_id": n.id, "members": sorted(x.raft for x in cfg.nodes)}, f)
        write_snapshot(os.path.join(node_dir, "raft.snapshot"), raft_data, state)
    return os.path.getsize(os.path.join(cfg.node_dir(cfg.nodes[0].id), "raft.snapshot"))
