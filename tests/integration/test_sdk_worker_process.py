"""A ``Worker`` as its own process: ``worker.run()`` drains on SIGTERM (the running task finishes, nothing new is
leased, the process exits 0), and ``raftsched worker MODULE:ATTR`` runs a worker object with the command
line's flags laid over its settings."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from typing import IO, Iterator

import pytest

from raftsched import Client
from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.cluster.executor.worker import ACQUIRE_WAIT_MS
from tests.helpers import wait_for

pytestmark = pytest.mark.integration

MODULE = """
import sys, time
from dataclasses import dataclass
from raftsched import Context, Worker

@dataclass
class Nap:
    seconds: float

worker = Worker(queues=["{queue}"], concurrency=2, grace=20)

@worker.task("nap")
def nap(payload: Nap, ctx: Context) -> dict:
    print("napping", payload.seconds, file=ctx.log)
    print("STARTED", ctx.run_id, flush=True)
    deadline = time.monotonic() + payload.seconds
    while time.monotonic() < deadline and not ctx.cancelled.is_set():
        time.sleep(0.05)
    return {{"slept": payload.seconds, "cancelled": ctx.cancelled.is_set()}}

if __name__ == "__main__":
    worker.configure(cluster=sys.argv[1], output_dir=sys.argv[2])
    worker.run()
"""


@pytest.fixture()
def sdk(cluster: LocalCluster) -> Iterator[Client]:
    with Client(cluster.addresses) as client:
        yield client


def _module(tmp_path: object, queue: str) -> str:
    folder = str(tmp_path)
    name = f"sdkjobs_{uuid.uuid4().hex[:8]}"
    with open(os.path.join(folder, f"{name}.py"), "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(MODULE.format(queue=queue)))
    return name


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


class Output:
    """A process's output lines, read as they come (in a thread)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stdout is not None
        self._thread = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line)

    def has(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def text(self) -> str:
        self._thread.join(10)
        return "".join(self.lines)


def test_sigterm_drains_the_worker(cluster: LocalCluster, sdk: Client, tmp_path: object) -> None:
    queue = f"drain-{uuid.uuid4().hex[:6]}"
    name = _module(tmp_path, queue)
    proc = subprocess.Popen(
        [sys.executable, f"{name}.py", ",".join(cluster.addresses), cluster.output_dir],
        cwd=str(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    output = Output(proc)
    try:
        job = sdk.create_job(f"nap-{queue}", every="1h", type="nap", queue=queue, payload={"seconds": 12})
        running = sdk.trigger_job(job.id)
        wait_for(lambda: output.has("STARTED"), 60, "the nap to start")
        os.kill(proc.pid, signal.SIGTERM)
        wait_for(lambda: output.has("stopping: no new runs"), 30, "the worker to begin draining")
        # a long poll already on its way when the drain began may still bring a run (the executor never
        # abandons a grant); once it has ended, nothing is asked for any more
        time.sleep(ACQUIRE_WAIT_MS / 1000 + 1.5)
        later = sdk.trigger_job(job.id)
        assert proc.wait(60) == 0, output.text()
        out = output.text()
        done = sdk.get_run(running.id)
        assert done.status == "SUCCEEDED", (done, out)
        assert done.result == {"slept": 12, "cancelled": False}
        assert sdk.get_run(later.id).status == "PENDING", out
        assert sdk.get_run_output(running.id).text == "napping 12.0\n"  # a float, as annotated
    finally:
        _stop(proc)


def test_raftsched_worker_runs_a_worker_object_with_the_flags_over_it(
    cluster: LocalCluster, sdk: Client, tmp_path: object
) -> None:
    name = _module(tmp_path, "not-this-queue")
    queue = f"cli-{uuid.uuid4().hex[:6]}"
    command = [sys.executable, "-m", "raftsched", "worker", f"{name}:worker", "--cluster", ",".join(cluster.addresses)]
    command += ["--output-dir", cluster.output_dir, "--queue", queue, "--concurrency", "3", "--executor-id", "cli-worker"]
    proc = subprocess.Popen(
        command, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        job = sdk.create_job(f"nap-{queue}", every="1h", type="nap", queue=queue, payload={"seconds": 0.1})
        run = sdk.wait_run(sdk.trigger_job(job.id).id, timeout=60)
        assert run.status == "SUCCEEDED" and run.executor_id == "cli-worker", run
        assert run.result == {"slept": 0.1, "cancelled": False}
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert f"serving queues {queue}, tasks nap, 3 at a time" in out, out
    finally:
        _stop(proc)


def test_raftsched_worker_says_what_is_wrong_with_its_target(tmp_path: object) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "raftsched", "worker", "no_such_module_here:worker", "--cluster", "127.0.0.1:1"],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "cannot start the worker: no_such_module_here:worker: cannot import no_such_module_here" in done.stderr
