"""Each node's state in its LMDB environment (``state.mdb``), with real node processes on loopback:

* a node wiped and started again receives the leader's snapshot — a copy of its environment — installs it
  and serves every job, reads answered by itself;
* a damaged or foreign state file (the environment, or a snapshot the node needs) is refused at start,
  naming the file, and left as it is;
* a node upgraded from the version that kept its state in memory converts its snapshot (format 2: the
  state as one blob) into the environment on its first start, once, and its jobs go on firing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import grpc
import lmdb
import pytest

from raftsched.cluster.app.local_cluster import LocalCluster, write_config
from raftsched.cluster.domain import commands as cmds
from raftsched.cluster.domain.model import Every, JobSpec
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.config import load_config
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.raft.snapshot_file import read_snapshot, write_snapshot, write_snapshot_file
from raftsched.raft.snapshotter import BytesCopy
from raftsched.rpc.client.client import Client
from tests.conftest import running_cluster
from tests.helpers import every_spec, now_ms, wait_for

pytestmark = pytest.mark.integration

INSTALLED = "loaded the state of snapshot"


def _log(c: LocalCluster, node_id: str) -> str:
    with open(c.nodes[node_id].log_path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _job_ids_on(c: LocalCluster, node_id: str) -> set[str]:
    """Every job id, as ``node_id`` itself answers a linearizable ListJobs (page by page; none while it is down)."""
    ids: set[str] = set()
    token = ""
    with grpc.insecure_channel(c.nodes[node_id].grpc) as ch:
        stub = pb_grpc.JobServiceStub(ch)
        while True:
            try:
                page = stub.ListJobs(pb.ListJobsRequest(page_size=1000, page_token=token), timeout=10)
            except grpc.RpcError:
                return set()
            ids |= {j.job_id for j in page.jobs}
            token = page.next_page_token
            if not token:
                return ids


def test_a_wiped_node_receives_the_environment_copy_and_serves(tmp_path: Path) -> None:
    with running_cluster(str(tmp_path / "c"), "\n[raft]\nsnapshot_min_entries = 40\n") as c:
        with Client(c.addresses, deadline_s=30) as client:
            ids = {client.create_job(every_spec(f"j{i}", 3_600_000)).job_id for i in range(150)}
        var = Path(c.root) / "var"
        leader = c.wait_leader()
        wait_for(lambda: (c.status(leader) or pb.ClusterStatus()).last_snapshot_index > 40 or None, 30, "a snapshot")
        follower = next(n for n in c.nodes if n != leader)
        c.kill(follower)
        shutil.rmtree(var / follower)
        c.start(follower)
        wait_for(lambda: INSTALLED in _log(c, follower) or None, 60, "the wiped node to install the leader's snapshot")
        assert wait_for(lambda: _job_ids_on(c, follower) >= ids or None, 30, "the wiped node to serve every job")
        snap = read_snapshot(str(var / follower / "raft.snapshot"))
        assert snap.body_size > 0 and snap.index > 40  # the copy it received, kept as its own snapshot
        assert (var / follower / "state.mdb").stat().st_size > 0
        with Client(c.addresses, deadline_s=30) as client:  # and it takes part in what comes next
            later = client.create_job(every_spec("later", 3_600_000)).job_id
        assert wait_for(lambda: later in _job_ids_on(c, follower) or None, 30, "the wiped node to serve a new job")


def _node(config: str, node_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftsched.cluster.app.main", "node", "--config", config, "--node-id", node_id],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _node_dir(tmp_path: Path) -> Path:
    node_dir = tmp_path / "var" / "n1"
    node_dir.mkdir(parents=True)
    (node_dir / "NODE").write_text(json.dumps({"node_id": "n1", "members": []}))
    return node_dir


def _foreign_lmdb(path: Path) -> None:
    env = lmdb.open(str(path), subdir=False, map_size=1 << 20)
    with env.begin(write=True) as txn:
        txn.put(b"another-app", b"its data")
    env.close()


def _damaged_snapshot_and_no_state(node_dir: Path) -> Path:
    """A node whose state must come from its snapshot (it has none), and the snapshot's body is damaged."""
    snap = node_dir / "raft.snapshot"
    write_snapshot_file(str(snap), ((b"\x01", 9, 1), (b"\x01", 8, 1), []), BytesCopy(b"s" * 100_000).write_to)
    data = bytearray(snap.read_bytes())
    data[-500] ^= 0xFF
    snap.write_bytes(bytes(data))
    return snap


def _garbage_state(node_dir: Path) -> Path:
    (node_dir / "state.mdb").write_bytes(b"\x00not a database" * 800)
    return node_dir / "state.mdb"


CASES = [
    ("garbage-state", _garbage_state, "is not a raftsched state file"),
    ("foreign-state", lambda d: _foreign_lmdb(d / "state.mdb") or d / "state.mdb", "no raftsched marker"),
    ("damaged-snapshot", _damaged_snapshot_and_no_state, "checksum mismatch"),
]


@pytest.mark.parametrize("label, make, needle", CASES, ids=[x[0] for x in CASES])
def test_a_damaged_or_foreign_state_file_is_refused_naming_it(tmp_path: Path, label: str, make, needle: str) -> None:  # type: ignore[no-untyped-def]
    config = write_config(str(tmp_path), 3)
    path = make(_node_dir(tmp_path))
    before = path.read_bytes()
    out = _node(config, "n1")
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr and str(path) in out.stderr, out.stderr
    assert "move it away" in out.stderr
    assert path.read_bytes() == before  # never rewritten


def _in_memory_version_data_dirs(c: LocalCluster, jobs: int, created_ms: int) -> set[str]:
    """What the version that kept its state in memory left in each data dir: NODE and a format-2 snapshot whose
    state is the snapshot codec's blob, at Raft index 2 (pysyncobj's two no-op entries), holding ``jobs`` jobs
    that fire every second."""
    m = JobStateMachine()
    for i in range(jobs):
        spec = JobSpec(name=f"old-{i}", schedule=Every(1000), type="noop")
        m.apply(cmds.encode(cmds.CreateJob(created_ms, f"j-old-{i:04d}", spec)), 1, i)
    m.apply(cmds.encode(cmds.Barrier(created_ms)), 2)
    cfg = load_config(c.config_path)
    raft_data = ((b"\x01", 2, 0), (b"\x01", 1, 0), [n.raft for n in cfg.nodes])
    for node in cfg.nodes:
        node_dir = cfg.node_dir(node.id)
        os.makedirs(node_dir, mode=0o700)
        with open(os.path.join(node_dir, "NODE"), "w", encoding="utf-8") as f:
            json.dump({"node_id": node.id, "members": sorted(n.raft for n in cfg.nodes)}, f)
        write_snapshot(os.path.join(node_dir, "raft.snapshot"), raft_data, m.snapshot())
    return set(m.jobs)


def test_a_node_of_the_in_memory_version_converts_its_snapshot_on_first_start(tmp_path: Path) -> None:
    with running_cluster(str(tmp_path / "c"), start=False) as c:
        created = now_ms()
        old = _in_memory_version_data_dirs(c, 50, created)
        c.start_all()
        c.wait_leader(30)
        for node_id in c.nodes:
            assert wait_for(lambda n=node_id: _job_ids_on(c, n) >= old or None, 30, f"{node_id} serving the old jobs")
            assert INSTALLED in _log(c, node_id) and (Path(c.root) / "var" / node_id / "state.mdb").exists()
        with Client(c.addresses, deadline_s=30) as client:  # the jobs fire on, once per instant
            first = "j-old-0000"
            wait_for(lambda: len(client.list_runs(job_id=first)) >= 3, 20, f"{first} to fire")
            instants = [r.scheduled_time.ToMilliseconds() for r in client.list_runs(job_id=first)]
            assert len(instants) == len(set(instants)) and min(instants) > created
        # the second start opens the environment: nothing is converted again
        node_id = next(n for n in c.nodes if n != c.wait_leader())
        converted = _log(c, node_id).count(INSTALLED)
        c.kill(node_id)
        time.sleep(0.5)
        c.start(node_id)
        assert wait_for(lambda: _job_ids_on(c, node_id) >= old or None, 30, f"{node_id} serving again")
        assert _log(c, node_id).count(INSTALLED) == converted
