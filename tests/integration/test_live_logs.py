"""Live logs end to end (local store): ``raftsched run logs --follow`` prints a run's output while it runs.

Real node processes, a real executor process writing where the nodes read
(``[logs] dir``: the nodes find a running attempt's live parts from its lease
alone), and the real CLI, whose stdout is read as it comes
(``tests.follow``). The same against S3 is in ``tests/integration/test_output_s3.py``;
each store's part of it is the contract suite.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.follow import Follow
from tests.helpers import shell_spec, start_executor, wait_for

pytestmark = pytest.mark.integration

RESULT = b'--- result ---\n{"exit_code": 0}\n'


def _stop(proc) -> int:  # type: ignore[no-untyped-def]
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            return int(proc.wait(20))
        except Exception:  # noqa: BLE001
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    return int(proc.returncode)


def _executor(cluster: LocalCluster, name: str, queue: str, *extra: str):  # type: ignore[no-untyped-def]
    # --output-dir is the nodes' own [logs] dir (the helper's default is a subdirectory of it, whose logs
    # the nodes read when an attempt ends, but whose live parts they cannot know of)
    return start_executor(cluster, cluster.root, name, queue, "--output-dir", cluster.output_dir, *extra)


def test_follow_shows_each_line_while_the_run_goes(cluster: LocalCluster, client: Client) -> None:
    proc = _executor(cluster, "ex-live", "q-live")
    follow = None
    try:
        command = "for i in 1 2 3 4 5 6; do echo line-$i; sleep 1; done"
        job = client.create_job(shell_spec("live", command, queue="q-live"))
        (run,) = wait_for(lambda: client.list_runs(job_id=job.job_id), 10, "the run to be fired")
        follow = Follow(cluster.addresses, run.run_id)
        follow.wait_out(b"line-1\n", 20)
        seen = time.time()
        now = client.get_run(run.run_id)
        assert now.status == pb.RUN_STATUS_LEASED, "line-1 must arrive while the run still runs"
        late = seen - cv.ts_ms(now.started_at) / 1000
        follow.wait_out(b"line-3\n", 10)
        assert client.get_run(run.run_id).status == pb.RUN_STATUS_LEASED and b"line-6" not in follow.out
        code, out, err = follow.finish(30)
        print(f"line-1 shown {late:.2f} s after the lease was granted")
        assert code == 0, err
        assert out == b"".join(f"line-{i}\n".encode() for i in range(1, 7)) + RESULT, (out, err)
        assert "LEASED, attempt 1 on ex-live" in err and "SUCCEEDED, attempt 1" in err, err
        assert late < 4.0, f"line-1 took {late:.1f} s from the grant to the follower"
        done = client.get_run(run.run_id)
        folder = os.path.join(cluster.output_dir, job.job_id, run.run_id)
        name = f"attempt-1-token-{done.fencing_token}"
        assert sorted(os.listdir(folder)) == [f"{name}.log", f"{name}.result"]  # the live parts are gone
        whole = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=run.run_id))
        assert not whole.live and whole.log == out[: -len(RESULT)] and whole.size == len(whole.log)
    finally:
        if follow is not None:
            follow.stop()
        assert _stop(proc) == 0


def test_follow_goes_on_with_a_retry_on_another_executor(cluster: LocalCluster, client: Client) -> None:
    command = 'echo start-$RAFTSCHED_ATTEMPT; if [ "$RAFTSCHED_ATTEMPT" = 1 ]; then sleep 60; fi; echo end-$RAFTSCHED_ATTEMPT'
    spec = shell_spec("live-retry", command, queue="q-live-retry")
    cv.to_dur(2000, spec.lease_ttl)
    spec.retry.max_attempts = 2
    cv.to_dur(100, spec.retry.initial_backoff)
    a = _executor(cluster, "ex-live-a", "q-live-retry", "--grace", "0")  # its SIGTERM leaves the run to expire
    b = follow = None
    try:
        job = client.create_job(spec)
        (run,) = wait_for(lambda: client.list_runs(job_id=job.job_id), 10, "the run to be fired")
        follow = Follow(cluster.addresses, run.run_id)
        follow.wait_out(b"start-1\n", 20)
        first = client.get_run(run.run_id)
        assert (first.status, first.executor_id) == (pb.RUN_STATUS_LEASED, "ex-live-a")
        assert _stop(a) == 0
        b = _executor(cluster, "ex-live-b", "q-live-retry")
        code, out, err = follow.finish(60)
        assert code == 0, err
        done = client.get_run(run.run_id)
        assert (done.status, done.attempt, done.executor_id) == (pb.RUN_STATUS_SUCCEEDED, 2, "ex-live-b")
        assert out == b"start-1\nstart-2\nend-2\n" + RESULT, (out, err)
        assert f"attempt 2 on ex-live-b is a new attempt (fencing token {done.fencing_token})" in err or (
            f"attempt 2 is a new attempt (fencing token {done.fencing_token})" in err
        ), err
        assert err.index("LEASED, attempt 1 on ex-live-a") < err.index("lease expired") < err.index("is a new attempt")
    finally:
        for p in (follow, a, b):
            if isinstance(p, Follow):
                p.stop()
            elif p is not None:
                _stop(p)


def test_a_running_attempts_output_is_readable_from_an_offset(cluster: LocalCluster, client: Client) -> None:
    proc = _executor(cluster, "ex-live-rpc", "q-live-rpc")
    try:
        command = "printf 'first\\n'; sleep 3; printf 'second\\n'; sleep 3"
        job = client.create_job(shell_spec("live-rpc", command, queue="q-live-rpc"))

        def shipped() -> pb.RunOutput | None:
            runs = client.list_runs(job_id=job.job_id)
            if not runs or runs[0].status != pb.RUN_STATUS_LEASED:
                return None
            out = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=runs[0].run_id))
            return out if out.log else None

        out = wait_for(shipped, 20, "the first line, live")
        assert (out.live, out.log, out.next_offset, out.size, out.log_uri) == (True, b"first\n", 6, 6, "")
        again = client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=out.run_id, offset=out.next_offset))
        assert again.live and again.log == b"" and again.next_offset == 6  # nothing new yet: nothing sent
        later = wait_for(
            lambda: o if (o := client.job("GetRunOutput", pb.GetRunOutputRequest(run_id=out.run_id, offset=6))).log else None,
            10,
            "the second line",
        )
        assert later.live and later.log == b"second\n" and later.next_offset == 13
        assert later.fencing_token == client.get_run(out.run_id).fencing_token
        result = json.loads(wait_for(lambda: client.get_run(out.run_id).result or None, 20, "the run to end"))
        assert result == {"exit_code": 0}
    finally:
        assert _stop(proc) == 0
