"""The `raftsched` command line and the node process lifecycle, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys

import lmdb
import pytest

from raftsched.cluster.app.local_cluster import LocalCluster, write_config

pytestmark = pytest.mark.integration


def raftsched(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftsched.cluster.app.main", *args], capture_output=True, text=True, timeout=timeout
    )


def test_cli_job_lifecycle(cluster: LocalCluster) -> None:
    addrs = ",".join(cluster.addresses)
    out = raftsched(
        "job", "create", "--cluster", addrs, "--name", "cli-report", "--cron", "0 6 * * *", "--tz", "Asia/Tokyo", "--json",
        "--payload", '{"command": "echo report"}',
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    job = json.loads(out.stdout)
    assert job["spec"]["cron"] == {"expression": "0 6 * * *", "timezone": "Asia/Tokyo"}
    listed = raftsched("job", "list", "--cluster", addrs)
    assert listed.returncode == 0 and "cli-report" in listed.stdout and "ACTIVE" in listed.stdout
    assert "JOB ID" in listed.stdout.splitlines()[0]
    paused = raftsched("job", "pause", job["job_id"], "--cluster", addrs, "--json")
    assert json.loads(paused.stdout)["status"] == "JOB_STATUS_PAUSED"
    run = raftsched("job", "trigger", job["job_id"], "--cluster", addrs, "--json")
    run_id = json.loads(run.stdout)["run_id"]
    runs = raftsched("run", "list", "--job", job["job_id"], "--cluster", addrs)
    assert run_id in runs.stdout and "PENDING" in runs.stdout
    status = raftsched("cluster", "status", "--cluster", addrs)
    assert status.returncode == 0 and "LEADER" in status.stdout


def test_cli_reports_errors_clearly(cluster: LocalCluster) -> None:
    addrs = ",".join(cluster.addresses)
    bad = raftsched("job", "create", "--cluster", addrs, "--name", "x", "--cron", "not a cron")
    assert bad.returncode == 1
    assert "INVALID_ARGUMENT" in bad.stderr and "not a cron" in bad.stderr
    bare = raftsched("job", "create", "--cluster", addrs, "--name", "x", "--every", "10s", "--payload", "echo hi")
    assert bare.returncode == 1  # a shell payload that is not the JSON object no executor could ever run
    assert "INVALID_ARGUMENT" in bare.stderr and '{"command": "..."' in bare.stderr and "'echo hi'" in bare.stderr
    missing = raftsched("job", "get", "j-missing", "--cluster", addrs)
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr and "j-missing" in missing.stderr
    usage = raftsched("job", "create", "--cluster", addrs, "--name", "x", "--every", "ten seconds")
    assert usage.returncode == 2 and "span" in usage.stderr


def test_preview_on_the_command_line(cluster: LocalCluster) -> None:
    out = raftsched("job", "preview", "--cluster", ",".join(cluster.addresses), "--cron", "0 12 29 2 *", "--count", "2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert len([line for line in lines if "-02-29" in line]) == 2


def test_sigterm_stops_a_node_cleanly_and_it_rejoins(cluster: LocalCluster) -> None:
    leader = cluster.wait_leader()
    follower = next(n for n in cluster.nodes if n != leader)
    assert cluster.terminate(follower) == 0
    cluster.start(follower)
    assert cluster.wait_leader() in cluster.nodes
    s = cluster.status(follower)
    assert s is not None and s.leader_id


def _node_dir(tmp_path, owner: str = "n1", members: list[str] | None = None):  # type: ignore[no-untyped-def]
    """var/n1 with a NODE file saying it belongs to ``owner`` (of a cluster of ``members``)."""
    node_dir = tmp_path / "var" / "n1"
    node_dir.mkdir(parents=True)
    (node_dir / "NODE").write_text(json.dumps({"node_id": owner, "members": members or []}))
    return node_dir


def _node(config: str, node_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftsched.cluster.app.main", "node", "--config", config, "--node-id", node_id],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_node_refuses_unknown_id_and_bad_config(tmp_path) -> None:
    config = write_config(str(tmp_path), 3)
    out = _node(config, "n9")
    assert out.returncode == 2 and "n9" in out.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster]\n[[nodes]]\nid = 'n1'\nraft = 'nope'\ngrpc = '127.0.0.1:1'\n")
    out = _node(str(bad), "n1")
    assert out.returncode == 2 and "host:port" in out.stderr


def test_node_refuses_a_data_dir_of_another_node(tmp_path) -> None:
    config = write_config(str(tmp_path), 3)
    _node_dir(tmp_path, owner="n2")
    out = _node(config, "n1")
    assert out.returncode == 2
    assert "belongs to node 'n2'" in out.stderr


def _lmdb_snapshot(path: str, meta: dict, state: bytes, magic: bytes = b"RSCHSNAP") -> None:
    env = lmdb.open(path, subdir=False, map_size=1 << 24, lock=False)
    with env.begin(write=True) as txn:
        txn.put(b"magic", magic)
        txn.put(b"meta", json.dumps(meta).encode())
        txn.put(b"state", state)
    env.close()


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


_META = {"format": 2, "index": 5, "term": 1, "entries": [["AQ==", 5, 1], ["AQ==", 4, 1]], "cluster": [], "size": 5}
SNAPSHOT_CASES = [
    ("bad-checksum", lambda p: _lmdb_snapshot(p, dict(_META, crc32=1), b"state"), "checksum mismatch"),
    (
        "newer-format",
        lambda p: _lmdb_snapshot(p, dict(_META, format=99, crc32=0), b"state"),
        "newer than this version understands",
    ),
    ("truncated", lambda p: _write(p, b"RSCH"), "truncated"),
    ("foreign", lambda p: _write(p, b"PK\x03\x04 a zip file, not ours" * 1000), "not a raftsched snapshot"),
    ("foreign-lmdb", lambda p: _lmdb_snapshot(p, _META, b"state", magic=b"SOMEAPP"), "not a raftsched snapshot"),
]


@pytest.mark.parametrize("label,make,needle", SNAPSHOT_CASES, ids=[c[0] for c in SNAPSHOT_CASES])
def test_node_refuses_a_damaged_snapshot(tmp_path, label: str, make, needle: str) -> None:  # type: ignore[no-untyped-def]
    config = write_config(str(tmp_path), 3)
    node_dir = _node_dir(tmp_path)
    make(str(node_dir / "raft.snapshot"))
    content = (node_dir / "raft.snapshot").read_bytes()
    out = _node(config, "n1")
    assert out.returncode == 2
    assert f"snapshot {node_dir / 'raft.snapshot'}" in out.stderr or f"{node_dir / 'raft.snapshot'} is not" in out.stderr
    assert needle in out.stderr
    assert (node_dir / "raft.snapshot").read_bytes() == content  # never overwritten


def test_node_refuses_non_loopback_without_secret(tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[cluster]\ndata_dir='var'\n[[nodes]]\nid='n1'\nraft='10.9.9.9:7001'\ngrpc='127.0.0.1:50999'\n")
    out = _node(str(cfg), "n1")
    assert out.returncode == 2 and "secret_file" in out.stderr


def test_node_refuses_a_damaged_raft_log(tmp_path) -> None:
    config = write_config(str(tmp_path), 3)
    node_dir = _node_dir(tmp_path)
    (node_dir / "raft.lmdb").mkdir()
    garbage = b"\x00garbage, not a database" * 400
    (node_dir / "raft.lmdb" / "data.mdb").write_bytes(garbage)
    out = _node(config, "n1")
    assert out.returncode == 2
    assert str(node_dir / "raft.lmdb") in out.stderr and "move it away" in out.stderr
    assert (node_dir / "raft.lmdb" / "data.mdb").read_bytes() == garbage  # never overwritten


def test_node_refuses_a_data_dir_of_another_cluster(tmp_path) -> None:
    config = write_config(str(tmp_path), 3)
    _node_dir(tmp_path, members=["10.1.1.1:7001", "10.1.1.2:7001"])
    out = _node(config, "n1")
    assert out.returncode == 2
    assert "another cluster's data" in out.stderr and "10.1.1.1:7001" in out.stderr


def test_node_refuses_a_truncated_raft_log(tmp_path) -> None:
    from raftsched.raft.lmdb_journal import LmdbJournal

    config = write_config(str(tmp_path), 3)
    node_dir = _node_dir(tmp_path)
    journal = LmdbJournal(str(node_dir / "raft.lmdb"))
    for i in range(1, 3000):
        journal.add(b"\x01" + b"x" * 200, i, 1)
    journal._destroy()
    data = node_dir / "raft.lmdb" / "data.mdb"
    with open(data, "r+b") as f:
        f.truncate(12288)  # the log's pages are gone: only the first pages are left
    before = data.read_bytes()
    out = _node(config, "n1")
    assert out.returncode == 2, out.stderr
    assert str(node_dir / "raft.lmdb") in out.stderr and "move it away" in out.stderr
    assert data.read_bytes() == before  # never overwritten


def test_node_refuses_a_truncated_lmdb_snapshot(tmp_path) -> None:
    from raftsched.raft.snapshot_file import write_snapshot

    config = write_config(str(tmp_path), 3)
    node_dir = _node_dir(tmp_path)
    snap = node_dir / "raft.snapshot"
    write_snapshot(str(snap), ((b"\x01", 5, 1), (b"\x01", 4, 1), []), b"s" * 200_000)
    with open(snap, "r+b") as f:
        f.truncate(16384)
    out = _node(config, "n1")
    assert out.returncode == 2, out.stderr
    assert "truncated" in out.stderr and str(snap) in out.stderr
