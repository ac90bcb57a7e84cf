"""Shared fixtures: real 3-node clusters on loopback, each in its own temp dir; an S3 server
(moto_server) on loopback with a bucket; the tier check; every LMDB environment a test opens closed by it.

Every collected test must carry exactly one tier marker (``tests.tiers``):
the session stops before running anything when one does not, so that no
``-m <tier>`` run can skip a test silently.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from typing import Any, Iterator

import pytest

from raftsched.cluster.app.local_cluster import PORT_RANGE_ENV, LocalCluster, share_of_range
from raftsched.rpc.client.client import Client
from tests import lmdb_leaks
from tests.moto_server import BUCKET, MotoServer, aws_environment
from tests.run_order import longest_first
from tests.tiers import tier_problems


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects anything
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    problems = tier_problems(items)
    if problems:
        raise pytest.UsageError(f"{len(problems)} collected test(s) without a proper tier:\n  " + "\n  ".join(problems))
    items[:] = longest_first(items)  # the longest files start first on the workers (``tests.run_order``)


lmdb_leaks.install()


def pytest_configure(config: pytest.Config) -> None:
    """Each xdist worker (and every process it starts) picks local ports from its own share of the range:
    two workers' clusters are never handed the same port between one's check and its node's bind."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and PORT_RANGE_ENV not in os.environ:
        shares = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        os.environ[PORT_RANGE_ENV] = share_of_range(int(worker[2:]), shares)


@pytest.fixture(autouse=True)
def lmdb_closed() -> Iterator[None]:
    """Fails a test that leaves an LMDB environment open (after closing it on this thread: ``tests.lmdb_leaks``)."""
    before = lmdb_leaks.open_now()
    yield
    left = lmdb_leaks.close_new(before)
    if left:
        pytest.fail(
            f"the test left {len(left)} LMDB environment(s) open: {', '.join(left)}; close them in the test "
            "(one the garbage collector closes, on whatever thread runs it, can crash the process: storage/disk/lmdb_owner.py)"
        )


def _dump_logs(cluster: LocalCluster) -> None:
    for node in cluster.nodes.values():
        if os.path.exists(node.log_path):
            with open(node.log_path, encoding="utf-8", errors="replace") as f:
                tail = f.readlines()[-30:]
            print(f"----- {node.node_id} log tail ({node.log_path}) -----\n" + "".join(tail))


@contextlib.contextmanager
def started_cluster(root: str, count: int = 3, **options: Any) -> Iterator[LocalCluster]:
    """A cluster of ``count`` nodes made with ``options`` (``LocalCluster.create``: ``auth``, ``secure``,
    ``tokens``...), started, with a leader; stopped at the end, its nodes' log tails printed."""
    c = LocalCluster.create(root, count, **options)
    c.start_all()
    try:
        c.wait_leader(30)
        yield c
    finally:
        c.stop_all()
        _dump_logs(c)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with started_cluster(str(tmp_path_factory.mktemp("cluster"))) as c:
        yield c


@contextlib.contextmanager
def running_cluster(root: str, extra_config: str = "", start: bool = True) -> Iterator[LocalCluster]:
    """A 3-node cluster that is SIGKILLed (and its data removed) at the end, whatever a test did to it
    (``start=False``: created, not started; the test starts it)."""
    c = LocalCluster.create(root, 3, extra_config=extra_config)
    try:
        if start:
            c.start_all()
            c.wait_leader(30)
        yield c
    finally:
        for node_id in c.nodes:
            c.kill(node_id)
        _dump_logs(c)
        shutil.rmtree(os.path.join(c.root, "var"), ignore_errors=True)


@pytest.fixture()
def fresh_cluster(tmp_path) -> Iterator[LocalCluster]:  # type: ignore[no-untyped-def]
    with running_cluster(str(tmp_path / "cluster")) as c:
        yield c


@pytest.fixture()
def client(cluster: LocalCluster) -> Iterator[Client]:
    with Client(cluster.addresses) as cl:
        yield cl


@pytest.fixture(scope="module")
def aws_env() -> Iterator[None]:
    """Credentials for boto3 in this process and in every node and executor started from it."""
    with aws_environment():
        yield


@pytest.fixture(scope="module")
def s3(aws_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """A moto S3 server on loopback with the bucket ``BUCKET``, stopped (by pid) after the module."""
    server = MotoServer(str(tmp_path_factory.mktemp("s3")), "moto")
    try:
        server.client().create_bucket(Bucket=BUCKET)
        yield server
    finally:
        server.kill()
