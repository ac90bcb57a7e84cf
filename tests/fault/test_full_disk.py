"""A full disk never takes a node (or the cluster) down: real node processes, each node's data dir on a small
tmpfs of its own, one of which (the leader's, then a follower's) fills up under a steady stream of writes.

The full node stays up and says so — its process alive, GetClusterStatus answering, ``/healthz`` 503 naming
its path (``disk full: <path>``), ``raftsched_storage_ok`` 0, ``storage_ok`` false for it on every node — a
leader gives leadership up and another is elected within seconds, the cluster goes on acknowledging writes
(through a client that knows every node), and the full node keeps serving reads of what it applied. Once room
returns it is ``storage_ok`` again within 30 s and catches up; nothing acknowledged is lost (the history check
over every node); and its files reopen cleanly and hold the same jobs as the other nodes' files.
"""

from __future__ import annotations

import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.raft.lmdb_journal import LmdbJournal
from raftsched.rpc.client.client import Client
from raftsched.storage.lmdb_state import LmdbTableStore
from tests import tmpfs
from tests.conftest import _dump_logs
from tests.fault.test_durability import Writer
from tests.helpers import every_spec, wait_for
from tests.history import Expected
from tests.history_read import check_cluster

pytestmark = pytest.mark.fault

#: each node's data dir: room for the test's jobs, little more
DISK = 40 << 20
HOUR_MS = 3_600_000
#: snapshots every 150 entries: the others compact their logs past what the full node applied (which does not
#: hold them back: ``raftsched.raft.adapter``) and it catches up from the log it kept in memory, or from a snapshot
SMALL_SNAPSHOTS = "\n[raft]\nsnapshot_min_entries = 150\n"


@pytest.fixture()
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """Three nodes with HTTP endpoints, each data dir on a tmpfs of its own; killed and unmounted at the end."""
    if tmpfs.why_not():
        pytest.skip(f"the full-disk test needs a tmpfs: {tmpfs.why_not()}")
    root = tmp_path / "c"
    root.mkdir()
    c = LocalCluster.create(str(root), 3, extra_config=getattr(request, "param", ""), http=True)
    mounted = []
    try:
        for node_id in c.nodes:
            path = os.path.join(c.root, "var", node_id)
            os.makedirs(path, mode=0o700, exist_ok=True)
            os.chmod(os.path.join(c.root, "var"), 0o700)
            tmpfs.mount(path, DISK)
            mounted.append(path)
        c.start_all()
        c.wait_leader(30)
        yield c
    finally:
        for node_id in c.nodes:
            c.kill(node_id)
        _dump_logs(c)
        for path in mounted:
            tmpfs.unmount(path)


def _dir(c: LocalCluster, node_id: str) -> str:
    return os.path.join(c.root, "var", node_id)


def _http(c: LocalCluster, node_id: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(c.http_url(node_id, path), timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _storage_ok(c: LocalCluster, asked: str, about: str) -> bool | None:
    """What node ``asked`` says of ``about``'s disk (None: ``asked`` did not answer)."""
    status = c.status(asked, timeout=3)
    if status is None:
        return None
    return next(m.storage_ok for m in status.members if m.id == about)


def _seen_by_all(c: LocalCluster, about: str, ok: bool) -> bool:
    return all(_storage_ok(c, asked, about) is ok for asked in c.nodes)


def _check_unfit_and_serving(c: LocalCluster, victim: str, before: list[str]) -> None:
    """The full node is up, says why it is unfit, and serves reads of what it applied."""
    assert c.nodes[victim].alive(), "the node with the full disk exited"
    assert c.status(victim) is not None
    code, body = _http(c, victim, "/healthz")
    assert code == 503 and f"disk full: {_dir(c, victim)}" in body, (code, body)
    _, metrics = _http(c, victim, "/metrics")
    assert re.search(r"^raftsched_storage_ok 0(\.0)?$", metrics, re.M), "raftsched_storage_ok should be 0"
    with Client([c.nodes[victim].grpc], deadline_s=10) as one:
        assert set(before) <= {j.job_id for j in one.list_jobs(name_prefix="before-")}


def _check_files(c: LocalCluster) -> None:
    """Every node's Raft log and state reopen (their structure walked) and the states hold the same jobs."""
    jobs = {}
    for node_id in c.nodes:
        journal = LmdbJournal(os.path.join(_dir(c, node_id), "raft.lmdb"))
        journal._destroy()
        store = LmdbTableStore(os.path.join(_dir(c, node_id), "state.mdb"))
        try:
            with store.reading():
                jobs[node_id] = {job.job_id for job in JobStateMachine(store).iter_jobs()}
        finally:
            store.close()
    assert len({frozenset(ids) for ids in jobs.values()}) == 1, {n: len(ids) for n, ids in jobs.items()}


def _wait_compacted_past(c: LocalCluster, victim: str, others: list[str]) -> None:
    """Wait until the others took a snapshot past what the full node applied: it must then be sent one."""
    stuck = c.status(victim)
    assert stuck is not None

    def compacted() -> bool:
        statuses = [c.status(n) for n in others]
        return all(s is not None and s.last_snapshot_index > stuck.applied_index + 1 for s in statuses)

    wait_for(compacted, 60, "the others to snapshot past the full node")


def _settle(c: LocalCluster) -> None:
    """Wait until every node applied the same index, so that their files can be compared."""

    def same() -> bool:
        applied = {(s.applied_index if s else -1) for s in (c.status(n) for n in c.nodes)}
        return len(applied) == 1 and -1 not in applied

    wait_for(same, 30, "every node to apply the same index")


@pytest.mark.parametrize(
    "cluster, role",
    [("", "leader"), ("", "follower"), (SMALL_SNAPSHOTS, "follower")],
    ids=["leader", "follower", "follower-behind-a-snapshot"],
    indirect=["cluster"],
)
def test_a_node_whose_disk_fills_stays_up_steps_aside_and_catches_up(cluster: LocalCluster, role: str) -> None:
    c = cluster
    snapshots = "snapshot_min_entries" in Path(c.config_path).read_text(encoding="utf-8")
    with Client(c.addresses, deadline_s=30) as client:
        before = [client.create_job(every_spec(f"before-{i}", HOUR_MS), f"before-{i}").job_id for i in range(20)]
    leader = c.wait_leader()
    victim = leader if role == "leader" else next(n for n in c.nodes if n != leader)
    writer = Writer(c.addresses)
    writer.start()
    try:
        wait_for(lambda: len(writer.acked) > 20 or None, 30, "writes acknowledged before the disk fills")
        tmpfs.fill(_dir(c, victim))
        wait_for(lambda: _storage_ok(c, victim, victim) is False or None, 30, "the full node to notice")
        noticed = time.monotonic()
        wait_for(lambda: _seen_by_all(c, victim, False) or None, 10, "every node to show the full node's storage_ok false")
        others = [n for n in c.nodes if n != victim]
        if role == "leader":
            new = c.wait_leader(10, among=others)
            assert time.monotonic() - noticed < 8, "leadership should move away within seconds"
            assert new != victim
        else:
            assert c.wait_leader(10, among=others) == leader, "a follower's full disk does not move leadership"
        _check_unfit_and_serving(c, victim, before)
        acked = len(writer.acked)
        wait_for(lambda: len(writer.acked) > acked + 20 or None, 30, "the cluster to go on acknowledging writes")
        if snapshots:
            _wait_compacted_past(c, victim, others)
        if role == "leader":
            os.unlink(os.path.join(_dir(c, victim), tmpfs.FILLER))  # room returns: the filler goes
        else:
            tmpfs.grow(_dir(c, victim), 2 * DISK)  # room returns: the disk grows
        room = time.monotonic()
        wait_for(lambda: _seen_by_all(c, victim, True) or None, 30, "the node to be storage_ok again on every node")
        assert time.monotonic() - room < 30
        assert _http(c, victim, "/healthz")[0] == 200
    finally:
        writer.stop.set()
        writer.join(10)
    assert len(writer.acked) > 40
    check_cluster(c, Expected(acknowledged=before + writer.acked), job_prefix="")  # every acknowledged job on every node
    _settle(c)
    for node_id in c.nodes:
        assert c.terminate(node_id) == 0, f"{node_id} did not stop cleanly"
    _check_files(c)
