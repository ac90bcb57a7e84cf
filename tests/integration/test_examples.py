"""The examples/ folder runs as its docstrings say: ``examples/worker.py`` serves, ``examples/client.py`` creates
a job, runs it once and prints its result; the schedule the worker declares is a job; a second client run finds
the same job (its idempotency key). Against a cluster that requires a token, as the quick start's is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from raftsched import Client
from raftsched.cluster.app.client_config import client_config_text
from raftsched.cluster.app.local_cluster import LocalCluster
from tests.conftest import started_cluster
from tests.helpers import wait_for

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def closed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A cluster that requires a token, as ``scripts/launch_cluster.sh`` starts one (one node is enough here)."""
    with started_cluster(str(tmp_path_factory.mktemp("closed")), 1, auth=True) as c:
        yield c


def test_the_examples_run_against_a_cluster(closed: LocalCluster, tmp_path: Path) -> None:
    """As the quick start has them run: ./local-cluster/client.toml names the cluster and the admin token, and
    neither example names an executor id (the worker acts as ``admin/host:pid``)."""
    assert closed.security is not None
    cluster = closed
    (tmp_path / "local-cluster").mkdir()
    config = client_config_text(cluster.addresses, cluster.output_dir, token_file=closed.security.token_file())
    (tmp_path / "local-cluster" / "client.toml").write_text(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTSCHED_")} | {"HOME": str(tmp_path)}
    worker_log = open(tmp_path / "worker.log", "wb")
    worker = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "worker.py")], cwd=tmp_path, env=env, stdout=worker_log, stderr=subprocess.STDOUT
    )
    try:
        with Client(cluster.addresses, token_file=closed.security.token_file()) as client:
            wait_for(lambda: any(j.name == "examples-nightly-report" for j in client.list_jobs(queue="examples")), 60,
                     "the worker's schedule as a job")  # fmt: skip
            for _ in range(2):
                out = subprocess.run(
                    [sys.executable, str(EXAMPLES / "client.py"), "Grace"], cwd=tmp_path, env=env, capture_output=True,
                    text=True, timeout=90,
                )  # fmt: skip
                assert out.returncode == 0, out.stdout + out.stderr
                assert "SUCCEEDED: hello, Grace" in out.stdout, out.stdout
            greet = [j for j in client.list_jobs(queue="examples") if j.name == "examples-greet-Grace"]
            assert len(greet) == 1  # the idempotency key: one job for two runs of the client
            ran = list(client.list_runs(job_id=greet[0].id))
            assert len(ran) == 2 and all(r.executor_id.startswith("admin/") for r in ran), ran
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            assert worker.wait(timeout=30) == 0, (tmp_path / "worker.log").read_text()
        finally:
            if worker.poll() is None:
                worker.kill()
