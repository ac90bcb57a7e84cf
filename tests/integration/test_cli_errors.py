"""Every error a new user meets on the command line comes as one line saying what to do, within 2 s
(the whole `raftsched` process, interpreter start included) — and an executor that cannot reach the
cluster logs one readable line, never a gRPC error's repr."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from raftsched.cluster.app.client_config import client_config_text
from raftsched.cluster.app.local_cluster import LocalCluster, free_ports
from tests.helpers import wait_for

# each answer is timed (within 2 s): run in the suite's serial pass, with nothing beside it
pytestmark = [pytest.mark.integration, pytest.mark.alone]

WITHIN_S = 2.0


def raftsched(*args: str, cwd: str | None = None, home: str = "/nonexistent") -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTSCHED_")} | {"HOME": home}
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "raftsched.cluster.app.main", *args], capture_output=True, text=True, timeout=30, env=env, cwd=cwd
    )
    return out, time.monotonic() - started


def one_line(out: subprocess.CompletedProcess[str]) -> str:
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("raftsched: "), out.stderr
    assert "_InactiveRpcError" not in out.stderr and "Traceback" not in out.stderr
    return lines[0]


def test_no_node_answers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    dead = [f"127.0.0.1:{p}" for p in free_ports(3)]  # nothing listens there
    for args in (("cluster", "status"), ("job", "list", "-o", "json"), ("run", "watch"), ("run", "get", "r-1")):
        out, took = raftsched(*args, "--cluster", ",".join(dead))
        line = one_line(out)
        assert out.returncode == 1 and took < WITHIN_S, (args, took, line)
        assert line == f"raftsched: no node of the cluster answers at {', '.join(dead)}: is it running?", line
        assert out.stdout == ""  # no table header above the error
    # found by itself: the launch script's client config in the directory, named in the message
    (tmp_path / "local-cluster").mkdir()
    (tmp_path / "local-cluster" / "client.toml").write_text(client_config_text(dead))
    (tmp_path / "deeper").mkdir()
    out, took = raftsched("cluster", "status", cwd=str(tmp_path / "deeper"))
    assert out.returncode == 1 and took < WITHIN_S, took
    assert one_line(out).endswith("is it running? (addresses from ../local-cluster/client.toml)"), out.stderr


def test_flags_that_cannot_be_meant_are_refused_before_any_call() -> None:
    cases = [
        (("job", "create", "--every", "2s", "--tz", "Europe/Berlin"), "--tz applies only to --cron"),
        (("job", "create", "--after", "5m", "--tz", "UTC"), "--after counts real time. Drop --tz"),
        (("job", "create", "--every", "2", "--payload", "{}"), "--every 2: a span needs a unit: say 2s, 2m, 2h or 2d"),
        (("job", "create", "--every", "2s", "--timeout", "30"), "--timeout 30: a span needs a unit"),
        (("job", "create", "--every", "2s", "--cron", "* * * * *"), "give exactly one schedule"),
        (("job", "preview", "--cron", "0 3 * * *", "--from", "someday"), "--from 'someday': cannot read this date"),
        (("job", "create", "--at", "2026-12-01T09:00", "--payload", "{}"), "has no zone: add Z or an offset"),
        (("cluster", "leader", "--wait", "10"), "--wait 10: a span needs a unit"),
    ]
    for args, message in cases:
        out, took = raftsched(*args, "--cluster", "127.0.0.1:1")  # never called: refused first
        assert out.returncode == 2 and took < WITHIN_S, (args, took, out.stderr)
        assert message in one_line(out), (args, out.stderr)


def test_what_the_cluster_refuses_is_one_line(cluster: LocalCluster) -> None:
    addrs = ",".join(cluster.addresses)
    cases = [
        (("run", "get", "r-nope"), "raftsched: NOT_FOUND: run r-nope not found"),
        (("run", "logs", "j-x@1"), "NOT_FOUND"),
        (("job", "update", "j-nope", "--every", "5m"), "raftsched: NOT_FOUND: job j-nope not found"),
        (("job", "create", "--every", "2s", "--payload", "echo hi"), '{"command": "..."'),
        (("job", "create", "--cron", "61 * * * *"), "INVALID_ARGUMENT"),
        (("job", "create", "--cron", "0 3 * * *", "--tz", "Mars/Olympus"), "Mars/Olympus"),
    ]
    for args, message in cases:
        out, took = raftsched(*args, "--cluster", addrs)
        assert out.returncode == 1 and took < WITHIN_S, (args, took, out.stderr)
        assert message in one_line(out), (args, out.stderr)
    created, _ = raftsched("job", "create", "--every", "1h", "--type", "noop", "-o", "id", "--cluster", addrs)
    out, took = raftsched("job", "update", created.stdout.strip(), "--cluster", addrs)
    assert out.returncode == 2 and "nothing to change" in one_line(out) and took < WITHIN_S


def test_an_executor_that_reaches_no_node_logs_one_readable_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    dead = ",".join(f"127.0.0.1:{p}" for p in free_ports(2))
    log_path = tmp_path / "executor.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "raftsched.cluster.app.main", "executor", "--cluster", dead, "--queue", "q",
             "--output-dir", str(tmp_path / "out")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_for(lambda: "acquire failed" in log_path.read_text(), 30, "the executor to report the failure")
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(30)
    text = log_path.read_text()
    assert "_InactiveRpcError" not in text and "debug_error_string" not in text, text
    failed = [line for line in text.splitlines() if "acquire failed" in line]
    assert f"no node of the cluster answers at {dead.replace(',', ', ')}: is it running?" in failed[0], failed
