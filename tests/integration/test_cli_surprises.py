"""The command line against a real cluster, where a newcomer used to be surprised: an --at in the past is
refused before anything is created (and taken with --allow-past); the common flags work before the noun;
`run watch --count N` stops after N runs, not N changes; YAML speaks the flags' forms while JSON stays
protobuf's; a 6-field cron with '*' seconds is warned of in preview and create; FIRE_ALL for a 2 s job
gets its note; `run cancel` of a running run says the executor is asked and the run ends once it has."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from typing import Iterator

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.client import Client
from tests.helpers import start_executor, wait_for

pytestmark = pytest.mark.integration

QUEUE = "q-cli"


def raftsched(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTSCHED_")} | {"HOME": "/nonexistent"}
    return subprocess.run(
        [sys.executable, "-m", "raftsched.cluster.app.main", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture(scope="module")
def worked(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The cluster's addresses, with an executor running shell jobs on QUEUE."""
    root = tmp_path_factory.mktemp("cli-executor")
    proc = start_executor(cluster, str(root), "cli-ex", QUEUE, "--output-dir", cluster.output_dir, allow=("shell",))
    try:
        yield ",".join(cluster.addresses)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def _job_names(addrs: str) -> list[str]:
    return [j["spec"].get("name", "") for j in json.loads(raftsched("job", "list", "--cluster", addrs, "--json").stdout)["jobs"]]


def test_a_past_at_is_refused_before_anything_is_created(worked: str) -> None:
    out = raftsched("job", "create", "--cluster", worked, "--name", "too-late", "--at", "2020-01-01T00:00:00Z")
    assert out.returncode == 2 and out.stdout == "", out.stderr
    assert out.stderr.startswith("raftsched: --at 2020-01-01T00:00:00Z is ") and " in the past" in out.stderr
    assert "older than the job's catch-up window (1d, --catchup-window)" in out.stderr and "--allow-past" in out.stderr
    assert "too-late" not in _job_names(worked)
    allowed = raftsched(
        "job", "create", "--cluster", worked, "--name", "late-on-purpose", "--at", "2020-01-01T00:00:00Z", "--allow-past", "--type", "noop", "-o", "id"
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    assert "late-on-purpose" in _job_names(worked)


def test_the_common_flags_work_before_the_noun(worked: str) -> None:
    before = raftsched("--cluster", worked, "-o", "json", "job", "list")
    after = raftsched("job", "list", "--cluster", worked, "-o", "json")
    assert before.returncode == 0, before.stderr
    assert json.loads(before.stdout) == json.loads(after.stdout)


def test_yaml_speaks_the_flags_forms_and_json_stays_protobufs(worked: str) -> None:
    job_id = raftsched(
        "job", "create", "--cluster", worked, "--name", "forms", "--every", "1h", "--misfire", "fire_once", "--catchup-window",
        "1d", "--queue", "q-none", "--type", "noop", "-o", "id",
    ).stdout.strip()  # fmt: skip
    yaml_text = raftsched("job", "get", job_id, "--cluster", worked, "-o", "yaml").stdout
    assert re.search(r"^  misfire: fire_once$", yaml_text, re.MULTILINE), yaml_text
    assert re.search(r"^  catchup_window: 1d$", yaml_text, re.MULTILINE) and re.search(r"^status: active$", yaml_text, re.M)
    doc = json.loads(raftsched("job", "get", job_id, "--cluster", worked, "-o", "json").stdout)
    assert (doc["spec"]["misfire"], doc["spec"]["catchup_window"]) == ("MISFIRE_POLICY_FIRE_ONCE", "86400s")


def test_warnings_of_a_seconds_last_cron_and_of_fire_all_for_a_short_period(worked: str) -> None:
    preview = raftsched("job", "preview", "--cluster", worked, "--cron", "*/15 * * * * *", "--count", "3")
    assert preview.returncode == 0 and len(preview.stdout.splitlines()) == 3, preview.stderr
    assert preview.stderr.startswith("raftsched: warning: cron '*/15 * * * * *' has 6 fields")
    assert "write '* * * * * */15'" in preview.stderr
    created = raftsched(
        "job", "create", "--cluster", worked, "--name", "ticker", "--every", "2s", "--queue", "q-none", "--type", "noop", "-o", "id"
    )  # fmt: skip
    assert created.returncode == 0 and re.fullmatch(r"j-[0-9a-f]+\n", created.stdout), created.stderr
    assert created.stderr.startswith("raftsched: note: misfire policy fire_all (the default)")
    assert "a minute down brings 30 runs" in created.stderr


def test_watch_count_counts_runs(worked: str) -> None:
    job_id = raftsched(
        "job", "create", "--cluster", worked, "--name", "counted", "--every", "1s", "--queue", QUEUE, "--misfire", "skip",
        "--payload", '{"command": "true"}', "-o", "id",
    ).stdout.strip()  # fmt: skip
    try:
        out = raftsched("run", "watch", "--cluster", worked, "--job", job_id, "--count", "3", timeout=60)
        assert out.returncode == 0, out.stderr
        rows = [line.split() for line in out.stdout.splitlines() if f"{job_id}@" in line]
        ended = {cells[2] for cells in rows if cells[1] == "finished"}
        assert len(ended) == 3 and rows[-1][1] == "finished", out.stdout  # three runs, seen through to their end
        assert len(rows) > 3  # and every change of theirs (fired, leased) on the way
    finally:
        raftsched("job", "delete", job_id, "--cluster", worked)


def test_run_cancel_says_the_executor_is_asked_and_the_run_ends_once_it_has(cluster: LocalCluster, worked: str) -> None:
    job_id = raftsched(
        "job", "create", "--cluster", worked, "--name", "long", "--after", "0s", "--queue", QUEUE, "--lease-ttl", "6s",
        "--payload", '{"command": "sleep 60"}', "-o", "id",
    ).stdout.strip()  # fmt: skip
    with Client(cluster.addresses, deadline_s=10) as client:
        run = wait_for(
            lambda: next((r for r in client.list_runs(job_id=job_id) if r.status == pb.RUN_STATUS_LEASED), None), 30, "leased"
        )
        out = raftsched("run", "cancel", run.run_id, "--cluster", worked)
        assert out.returncode == 0, out.stderr
        assert "LEASED" in out.stdout and "on cli-ex, cancel requested" in out.stdout
        assert out.stderr.startswith(f"cancel requested: the executor on cli-ex is asked to stop run {run.run_id}")
        assert "within about 2s: executors renew every third of a lease's TTL, 6s for this job" in out.stderr
        assert "stays LEASED until it has stopped, then it is CANCELLED" in out.stderr
        done = wait_for(lambda: (r := client.get_run(run.run_id)).status == pb.RUN_STATUS_CANCELLED and r, 30, "CANCELLED")
        assert done.status == pb.RUN_STATUS_CANCELLED
