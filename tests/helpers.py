"""Test helpers: build protobuf specs tersely, wait for conditions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Callable, TypeVar

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv

T = TypeVar("T")


def every_spec(name: str, every_ms: int, **kw: object) -> pb.JobSpec:
    spec = pb.JobSpec(name=name, type="noop", **kw)  # type: ignore[arg-type]
    cv.to_dur(every_ms, spec.every)
    return spec


def at_spec(name: str, at_ms: int, **kw: object) -> pb.JobSpec:
    spec = pb.JobSpec(name=name, type="noop", **kw)  # type: ignore[arg-type]
    cv.to_ts(at_ms, spec.at)
    return spec


def cron_spec(name: str, expression: str, timezone: str = "UTC", **kw: object) -> pb.JobSpec:
    spec = pb.JobSpec(name=name, type="noop", **kw)  # type: ignore[arg-type]
    spec.cron.expression, spec.cron.timezone = expression, timezone
    return spec


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def wait_for(fn: Callable[[], T | None], timeout: float, what: str, interval: float = 0.1) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def shell_spec(name: str, command: str, queue: str = "default", **kw: object) -> pb.JobSpec:
    """A one-off shell job due now (``after`` 0)."""
    spec = pb.JobSpec(name=name, type="shell", queue=queue, payload=json.dumps({"command": command}).encode(), **kw)  # type: ignore[arg-type]
    cv.to_dur(0, spec.after)
    return spec


def start_executor(
    cluster: LocalCluster,
    root: str,
    name: str,
    queue: str = "default",
    *extra: str,
    allow: tuple[str, ...] = ("shell", "http"),
    env: dict[str, str] | None = None,
    trust_open_cluster: bool = True,
) -> subprocess.Popen[bytes]:
    """A ``raftsched executor`` process of ``cluster`` on ``queue`` (its log in ``root``), allowed to run
    the built-in types ``allow``; its run output goes under the nodes' output directory, the only place
    they accept logs from. The test clusters take calls without a token, so an executor allowing a type
    is told ``--allow-unauthenticated-cluster`` (unless ``trust_open_cluster`` is False): the test is
    every user there is."""
    log = open(os.path.join(root, f"{name}.log"), "ab")
    allowed = [arg for t in allow for arg in ("--allow-type", t)]
    if allow and trust_open_cluster:
        allowed.append("--allow-unauthenticated-cluster")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "raftsched.cluster.app.main",
            "executor",
            "--cluster",
            ",".join(cluster.addresses),
            "--queue",
            queue,
            "--executor-id",
            name,
            "--output-dir",
            os.path.join(cluster.output_dir, name),
            *allowed,
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
