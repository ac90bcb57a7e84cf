"""Run output in S3, end to end, against a real S3-compatible server (moto_server) on loopback.

Every S3 server here is a separate ``python -m moto.server`` process on a
free loopback port (``tests.moto_server``; the ``s3`` fixture is in
``tests/conftest.py``), started by these tests and stopped by pid. The nodes
read output with the cluster's ``[logs]`` settings; executors write it with
the ``--logs-store s3`` flags or the same config. What every output store
must do on its own (put, read back, multipart, check) is the contract suite,
``tests/contract/test_output_stores.py``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Iterator

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.client import Client
from tests.follow import Follow
from tests.helpers import shell_spec, wait_for
from tests.moto_server import BUCKET, REGION, MotoServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def s3_cluster(s3: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    logs = f'[logs]\nstore = "s3"\nbucket = "{BUCKET}"\nendpoint_url = "{s3.url}"\nregion = "{REGION}"\n'
    c = LocalCluster.create(str(tmp_path_factory.mktemp("s3cluster")), 3, extra_config=logs)
    c.start_all()
    try:
        c.wait_leader(30)
        yield c
    finally:
        c.stop_all()


@pytest.fixture()
def client(s3_cluster: LocalCluster) -> Iterator[Client]:
    with Client(s3_cluster.addresses) as cl:
        yield cl


def start_executor(root: str, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with open(os.path.join(root, f"{name}.log"), "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "raftsched.cluster.app.main", "executor", "--executor-id", name, "--allow-type", "shell"]
            + ["--allow-unauthenticated-cluster", *args],  # the test's own cluster, without tokens
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env or dict(os.environ),
            start_new_session=True,
        )


def s3_flags(server: MotoServer, *extra: str) -> list[str]:
    return ["--logs-store", "s3", "--s3-bucket", BUCKET, "--s3-endpoint-url", server.url, "--s3-region", REGION, *extra]


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def read_log(root: str, name: str) -> str:
    with open(os.path.join(root, f"{name}.log"), encoding="utf-8", errors="replace") as f:
        return f.read()


def finished(client: Client, job_id: str, timeout: float) -> pb.Run:
    def done() -> pb.Run | None:
        runs = client.list_runs(job_id=job_id)
        return (
            runs[0]
            if runs and runs[0].status in (pb.RUN_STATUS_SUCCEEDED, pb.RUN_STATUS_FAILED, pb.RUN_STATUS_DEAD_LETTER)
            else None
        )

    return wait_for(done, timeout, f"a finished run of job {job_id}", interval=0.2)


# ---------------------------------------------------------------------------- tests


def test_output_lands_under_the_documented_key_and_every_node_reads_it(
    s3: MotoServer, s3_cluster: LocalCluster, client: Client
) -> None:
    root = s3_cluster.root
    flags = s3_flags(s3, "--s3-prefix", "raftsched/team-a")  # inside the nodes' [logs] prefix: they take no other
    proc = start_executor(root, "ex-s3", "--cluster", ",".join(s3_cluster.addresses), "--queue", "s3", *flags)
    try:
        job = client.create_job(shell_spec("s3-basic", "echo hello-s3; echo oops >&2", queue="s3"))
        run = finished(client, job.job_id, 30)
        assert run.status == pb.RUN_STATUS_SUCCEEDED, run.error
        key = f"raftsched/team-a/{job.job_id}/{run.run_id}/attempt-1-token-{run.fencing_token}"
        assert run.log_uri == f"s3://{BUCKET}/{key}.log"
        bucket = s3.client()
        obj = bucket.get_object(Bucket=BUCKET, Key=key + ".log")
        assert obj["Body"].read() == b"hello-s3\noops\n"
        assert obj["Metadata"]["raftsched-fencing-token"] == str(run.fencing_token)
        assert bucket.get_object(Bucket=BUCKET, Key=key + ".result")["Body"].read() == b'{"exit_code": 0}'
        for address in s3_cluster.addresses:  # any node reads it back, with its own [logs] settings
            with Client([address]) as one:
                out = one.job("GetRunOutput", pb.GetRunOutputRequest(run_id=run.run_id))
            assert (out.log, out.result, out.missing_reason) == (b"hello-s3\noops\n", b'{"exit_code": 0}', ""), address
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "raftsched.cluster.app.main",
                "run",
                "logs",
                run.run_id,
                "--cluster",
                ",".join(s3_cluster.addresses),
            ],
            capture_output=True,
            timeout=60,
        )
        assert cli.returncode == 0 and cli.stdout.startswith(b"hello-s3\noops\n"), cli
        # a log that is gone from the bucket (lifecycle expiry) is reported, not raised
        bucket.delete_object(Bucket=BUCKET, Key=key + ".log")
        out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=run.run_id))
        assert out.log == b"" and out.missing_reason.startswith("output missing:")
        assert "not in the bucket" in out.missing_reason and run.log_uri in out.missing_reason
    finally:
        stop(proc)
    assert proc.returncode == 0, read_log(root, "ex-s3")[-3000:]


def test_follow_shows_the_status_then_the_log_once_uploaded(s3: MotoServer, s3_cluster: LocalCluster, client: Client) -> None:
    root = s3_cluster.root
    job = client.create_job(shell_spec("s3-follow", "echo started; sleep 2; echo finished", queue="s3-follow"))
    (run,) = wait_for(lambda: client.list_runs(job_id=job.job_id), 10, "the run to be fired")
    follow = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "raftsched.cluster.app.main",
            "run",
            "logs",
            run.run_id,
            "--follow",
            "--interval",
            "0.3",
            "--cluster",
            ",".join(s3_cluster.addresses),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert follow.stderr is not None and follow.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(line.decode() for line in follow.stderr), daemon=True)
    reader.start()
    # the executor starts once the follower has shown the run pending (a slow start of the follower saw it leased)
    wait_for(lambda: any("PENDING, attempt 0" in line for line in lines), 30, "run logs --follow to show the run pending")
    proc = start_executor(root, "ex-follow", "--cluster", ",".join(s3_cluster.addresses), "--queue", "s3-follow", *s3_flags(s3))
    try:
        follow.wait(timeout=60)
        out = follow.stdout.read()
    finally:
        stop(proc)
        if follow.poll() is None:
            follow.kill()
    reader.join(10)
    text = "".join(lines)
    assert follow.returncode == 0, text
    assert out == b'started\nfinished\n--- result ---\n{"exit_code": 0}\n', (out, text)
    assert "PENDING, attempt 0" in text and "LEASED, attempt 1 on ex-follow" in text and "SUCCEEDED, attempt 1" in text, text
    assert text.index("LEASED") < text.index("SUCCEEDED")


def test_follow_shows_live_output_from_s3_while_the_run_goes(s3: MotoServer, s3_cluster: LocalCluster, client: Client) -> None:
    root = s3_cluster.root
    # the nodes' own prefix ("raftsched"): they find a running attempt's live parts from its lease alone
    proc = start_executor(root, "ex-live-s3", "--cluster", ",".join(s3_cluster.addresses), "--queue", "s3-live", *s3_flags(s3))
    follow = None
    try:
        job = client.create_job(shell_spec("s3-live", "for i in 1 2 3 4; do echo line-$i; sleep 1; done", queue="s3-live"))
        (run,) = wait_for(lambda: client.list_runs(job_id=job.job_id), 10, "the run to be fired")
        follow = Follow(s3_cluster.addresses, run.run_id)
        follow.wait_out(b"line-1\n", 20)
        assert client.get_run(run.run_id).status == pb.RUN_STATUS_LEASED, "line-1 must arrive while the run still runs"
        code, out, err = follow.finish(60)
        assert code == 0, err
        assert out == b'line-1\nline-2\nline-3\nline-4\n--- result ---\n{"exit_code": 0}\n', (out, err)
        done = client.get_run(run.run_id)
        listed = s3.client().list_objects_v2(Bucket=BUCKET, Prefix=f"raftsched/{job.job_id}/{run.run_id}/")
        name = f"raftsched/{job.job_id}/{run.run_id}/attempt-1-token-{done.fencing_token}"
        assert sorted(o["Key"] for o in listed.get("Contents", [])) == [f"{name}.log", f"{name}.result"]  # no parts left
    finally:
        if follow is not None:
            follow.stop()
        stop(proc)


def test_a_50_mb_log_is_uploaded_in_parts_with_bounded_memory(s3: MotoServer, s3_cluster: LocalCluster, client: Client) -> None:
    root = s3_cluster.root
    # this executor takes its store from the cluster's [logs] section (prefix "raftsched")
    proc = start_executor(root, "ex-big", "--config", s3_cluster.config_path, "--queue", "s3-big", "--concurrency", "1")
    try:
        job = client.create_job(shell_spec("s3-big", "head -c 50000000 /dev/zero | tr '\\0' 'x'", queue="s3-big"))
        run = finished(client, job.job_id, 90)
        with open(f"/proc/{proc.pid}/status", encoding="ascii") as f:
            hwm_kb = int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1))  # type: ignore[union-attr]
    finally:
        stop(proc)
    assert run.status == pb.RUN_STATUS_SUCCEEDED, run.error
    key = f"raftsched/{job.job_id}/{run.run_id}/attempt-1-token-{run.fencing_token}.log"
    assert run.log_uri == f"s3://{BUCKET}/{key}"
    head = s3.client().head_object(Bucket=BUCKET, Key=key)
    assert head["ContentLength"] == 50_000_000
    parts = int(head["ETag"].strip('"').rpartition("-")[2])
    assert parts == 6, head["ETag"]  # 8 MiB parts
    assert hwm_kb < 150 * 1024, f"executor peak RSS {hwm_kb / 1024:.0f} MiB for a 50 MB log"
    # GetRunOutput answers within the gRPC message limit: the head, a note, and the tail
    out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=run.run_id), timeout=30)
    assert not out.missing_reason and out.log.startswith(b"x" * 1000) and out.log.endswith(b"x" * 1000)
    assert b"bytes of a 50000000-byte log left out here" in out.log and len(out.log) < 16 * 1024 * 1024
    print(f"executor peak RSS {hwm_kb / 1024:.0f} MiB; {parts} parts")


@pytest.fixture(scope="module")
def outage(
    aws_env: None, s3_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[pb.Run, float, str]]:
    """A run whose S3 server is SIGKILLed while it runs: (the finished run, seconds from kill to end, executor log)."""
    root = s3_cluster.root
    server = MotoServer(str(tmp_path_factory.mktemp("s3-outage")), "moto-outage")
    proc = None
    try:
        server.client().create_bucket(Bucket=BUCKET)
        args = ["--cluster", ",".join(s3_cluster.addresses), "--queue", "s3-outage", *s3_flags(server, "--s3-retry-seconds", "3")]
        proc = start_executor(root, "ex-outage", *args)
        with Client(s3_cluster.addresses) as client:
            job = client.create_job(shell_spec("s3-outage", "echo working; sleep 2; echo done", queue="s3-outage"))
            wait_for(
                lambda: [r for r in client.list_runs(job_id=job.job_id) if r.status == pb.RUN_STATUS_LEASED],
                30,
                "the run to start",
            )
            server.kill()
            killed = time.monotonic()
            run = finished(client, job.job_id, 40)
            took = time.monotonic() - killed
        stop(proc)
        assert proc.returncode == 0
        yield run, took, read_log(root, "ex-outage")
    finally:
        if proc is not None:
            stop(proc)
        server.kill()


def test_an_s3_outage_mid_run_loses_no_completion(outage: tuple[pb.Run, float, str], client: Client) -> None:
    run, took, executor_log = outage
    assert run.status == pb.RUN_STATUS_SUCCEEDED and run.log_uri == ""
    assert took < 25, f"the run took {took:.1f} s to complete after the S3 server died"
    out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=run.run_id))
    assert out.log == b"" and out.result == b'{"exit_code": 0}'
    assert out.missing_reason.startswith("output missing:"), out.missing_reason
    lines = [line for line in executor_log.splitlines() if "output missing" in line]
    assert lines and "is unreachable" in lines[0] and f"/{run.run_id}/attempt-1-token-{run.fencing_token}.log" in lines[0], lines


def test_the_outage_reason_is_recorded_on_the_run(outage: tuple[pb.Run, float, str], client: Client) -> None:
    run, _, _ = outage
    assert run.error.startswith("output missing: storing the log at s3://") and "is unreachable" in run.error
    out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=run.run_id))
    assert "is unreachable" in out.missing_reason


def test_a_wrong_bucket_stops_the_executor_at_start(s3: MotoServer, s3_cluster: LocalCluster) -> None:
    root = s3_cluster.root
    proc = start_executor(
        root,
        "ex-nobucket",
        "--cluster",
        ",".join(s3_cluster.addresses),
        "--logs-store",
        "s3",
        "--s3-bucket",
        "no-such-bucket",
        "--s3-endpoint-url",
        s3.url,
        "--s3-region",
        REGION,
    )
    assert proc.wait(30) == 2
    text = read_log(root, "ex-nobucket")
    assert "cannot start executor: cannot use S3 output store 'no-such-bucket'" in text
    assert "the bucket does not exist: create it or fix [logs] bucket / --s3-bucket" in text


def test_bad_or_no_credentials_stop_the_executor_at_start(
    aws_env: None, s3_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = s3_cluster.root
    # a server that checks every request's credentials (moto's IAM mode): our test keys are unknown to it
    strict = MotoServer(str(tmp_path_factory.mktemp("s3-auth")), "moto-auth", env={"INITIAL_NO_AUTH_ACTION_COUNT": "0"})
    try:
        flags = ["--cluster", ",".join(s3_cluster.addresses), *s3_flags(strict)]
        proc = start_executor(root, "ex-badkey", *flags)
        assert proc.wait(30) == 2
        assert "the access key is not known there: check AWS_ACCESS_KEY_ID" in read_log(root, "ex-badkey")
        no_creds = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE")}
        proc = start_executor(root, "ex-nokey", *flags, env=no_creds)
        assert proc.wait(30) == 2
        assert "no usable AWS credentials" in read_log(root, "ex-nokey")
    finally:
        strict.kill()
