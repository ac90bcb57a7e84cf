"""`scripts/launch_cluster.sh` as a user runs it again and again: a second run while the cluster runs
starts nothing; --stop says as each process stops; a run after --stop resumes the same cluster (same
ports and jobs) and says so; the sample job does not flood after downtime (misfire FIRE_ONCE)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def launch(cwd: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTSCHED_")} | {"RAFTSCHED_VENV": sys.prefix}
    return subprocess.run(
        [os.path.join(REPO, "scripts", "launch_cluster.sh"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def cli(cwd: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTSCHED_")} | {"HOME": cwd}
    return subprocess.run(
        [sys.executable, "-m", "raftsched.cluster.app.main", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_launch_again_resume_and_stop(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cwd, root = str(tmp_path), str(tmp_path / "local-cluster")
    try:
        first = launch(cwd, "--free-ports")
        assert first.returncode == 0, first.stdout + first.stderr
        assert "starting a new 3-node cluster" in first.stdout and "runs in the background" in first.stdout
        web = re.search(r"^  web view: (http://127\.0\.0\.1:\d+/) ", first.stdout, re.MULTILINE)
        assert web, first.stdout
        with pytest.raises(urllib.error.HTTPError) as refused:  # a local cluster requires tokens: the web view too
            urllib.request.urlopen(web.group(1), timeout=10)
        assert refused.value.code == 401
        viewer = open(os.path.join(root, "secure", "viewer.token"), encoding="utf-8").read().strip()
        signed = urllib.request.Request(web.group(1), headers={"Authorization": f"Bearer {viewer}"})
        with urllib.request.urlopen(signed, timeout=10) as page:  # node 1's web view answers a reader
            assert page.status == 200 and "<title>Cluster · raftsched n1</title>" in page.read().decode()
        with open(os.path.join(root, "client.toml"), "rb") as f:
            addresses = tomllib.load(f)["cluster"]
        sample = json.loads(cli(cwd, "job", "list", "-o", "json").stdout)["jobs"]
        assert [(j["spec"]["name"], j["spec"]["misfire"]) for j in sample] == [("hello", "MISFIRE_POLICY_FIRE_ONCE")]

        again = launch(cwd)
        assert again.returncode == 0 and "already runs; nothing to start" in again.stdout, again.stdout

        leader = cli(cwd, "cluster", "leader").stdout.strip()
        pid = launch(cwd, "--pid", "leader")
        assert pid.returncode == 0 and int(pid.stdout) == json.load(open(os.path.join(root, "pids.json")))[leader]

        stopped = launch(cwd, "--stop")
        assert stopped.returncode == 0, stopped.stdout
        lines = stopped.stdout.splitlines()
        order = [line.split()[0] for line in lines if line.startswith("  ") and " stopped (" in line]
        assert sorted(order) == ["executor-1", "n1", "n2", "n3"] and order[0] == "executor-1", stopped.stdout
        down = cli(cwd, "cluster", "status")
        assert down.returncode == 1 and "is it running? (addresses from local-cluster/client.toml)" in down.stderr

        resumed = launch(cwd)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "resuming the cluster" in resumed.stdout and "starting n1, n2, n3, executor-1" in resumed.stdout
        with open(os.path.join(root, "client.toml"), "rb") as f:
            assert tomllib.load(f)["cluster"] == addresses  # the same ports
        jobs = json.loads(cli(cwd, "job", "list", "-o", "json").stdout)["jobs"]
        assert [j["job_id"] for j in jobs] == [j["job_id"] for j in sample]  # the same job, not a second one
    finally:
        if os.path.exists(os.path.join(root, "pids.json")):
            launch(cwd, "--stop")
        _kill_leftovers(root)


def _ephemeral(port: int) -> bool:
    """Whether the kernel may hand ``port`` to an outgoing connection (a client socket of any process)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
        low, high = map(int, f.read().split())
    return low <= port <= high


def _kill_leftovers(root: str) -> None:
    try:
        pids = json.load(open(os.path.join(root, "pids.json")))
    except FileNotFoundError:
        return
    for pid in pids.values():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if root.encode() in f.read():
                    os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _as_nobody(args: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """Run ``args`` as the machine's unprivileged user ``nobody`` (needs root, as CI has)."""
    if os.geteuid() != 0:
        why = "dropping to user nobody needs root"
        if os.environ.get("CI") == "true":  # CI runs as root
            pytest.fail(why)
        pytest.skip(why)
    drop = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", "--"]
    return subprocess.run(drop + args, input=stdin, capture_output=True, timeout=30, cwd="/")


def test_another_local_user_cannot_run_commands_on_the_quick_start_cluster(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Loopback separates machines, not users: any local user can connect to the cluster's ports. The quick start
    requires tokens, and only their owner can read them."""
    from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb

    cwd, root = str(tmp_path), str(tmp_path / "local-cluster")
    marker = tmp_path / "pwned"
    try:
        started = launch(cwd, "--free-ports", "--no-sample")
        assert started.returncode == 0, started.stdout + started.stderr
        with open(os.path.join(root, "client.toml"), "rb") as f:
            address = tomllib.load(f)["cluster"][0]
        spec = pb.JobSpec(name="pwn", type="shell", payload=json.dumps({"command": f"id > {marker}"}).encode())
        spec.after.FromMilliseconds(0)
        body = pb.CreateJobRequest(spec=spec).SerializeToString()
        frame = b"\x00" + len(body).to_bytes(4, "big") + body  # one gRPC message, as curl can send it
        answer = _as_nobody(
            ["curl", "-s", "-D", "-", "-o", "/dev/null", "--http2-prior-knowledge", "-H", "content-type: application/grpc",
             "-H", "te: trailers", "--data-binary", "@-", f"http://{address}/raftsched.v1.JobService/CreateJob"],
            frame,
        )  # fmt: skip
        headers = answer.stdout.decode(errors="replace").lower()
        assert "grpc-status: 16" in headers, headers + answer.stderr.decode(errors="replace")  # UNAUTHENTICATED
        for token in ("admin", "executor-1", "viewer"):
            read = _as_nobody(["cat", os.path.join(root, "secure", f"{token}.token")])
            assert read.returncode != 0 and read.stdout == b"", f"nobody read the {token} token"
        time.sleep(2)
        assert not marker.exists(), "a job created by another user ran"
        assert json.loads(cli(cwd, "job", "list", "-o", "json").stdout)["jobs"] == []
    finally:
        if os.path.exists(os.path.join(root, "pids.json")):
            launch(cwd, "--stop")
        _kill_leftovers(root)


def test_a_secure_cluster_right_after_stop_and_a_fourth_node(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The ports a stopped cluster used are free at once (connections still closing do not count), and
    ``--add-node`` runs a fourth node the launcher then knows (``--pid``, ``--stop``, resuming)."""
    cwd, plain, secure = str(tmp_path), str(tmp_path / "local-cluster"), str(tmp_path / "secure-cluster")
    try:
        first = launch(cwd, "--no-sample")  # the documented ports, 7001-/50051-/8081-
        assert first.returncode == 0, first.stdout + first.stderr
        assert cli(cwd, "job", "list").returncode == 0  # connections that leave sockets closing behind
        assert launch(cwd, "--stop").returncode == 0
        again = launch(cwd, "--secure", "--dir", secure, "--no-sample")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "in use" not in again.stdout

        added = launch(cwd, "--add-node", "--dir", secure)
        assert added.returncode == 0, added.stdout + added.stderr
        moved = re.search(
            r"^n4: port\(s\) ([\d, ]+) on 127\.0\.0\.1 in use: it listens on free ports instead$", added.stdout, re.M
        )
        if moved:  # a port of the ephemeral range, held for a moment by a connection of another test
            held = [int(p) for p in moved.group(1).split(", ")]
            assert held and set(held) <= {50054, 7004, 8084} and all(_ephemeral(p) for p in held), added.stdout
        else:
            documented = r"^n4: grpc 127\.0\.0\.1:50054  raft 127\.0\.0\.1:7004  http 127\.0\.0\.1:8084"
            assert re.search(documented, added.stdout, re.M), added.stdout
        assert "n4 rejoined in" in added.stdout, added.stdout
        pid = launch(cwd, "--pid", "n4", "--dir", secure)
        assert pid.returncode == 0 and int(pid.stdout) == json.load(open(os.path.join(secure, "pids.json")))["n4"]
        config = os.path.join(secure, "client.toml")
        status = json.loads(cli(cwd, "cluster", "status", "-o", "json", "--config", config).stdout)
        assert {m["id"]: m.get("reachable", False) for m in status["members"]} == {f"n{i}": True for i in range(1, 5)}
        stopped = launch(cwd, "--stop", "--dir", secure)
        assert "n4 stopped" in stopped.stdout, stopped.stdout
        resumed = launch(cwd, "--dir", secure, "--secure")
        assert "starting n1, n2, n3, n4, executor-1" in resumed.stdout, resumed.stdout
        assert "keeps what it was made with" not in resumed.stdout
    finally:
        for root in (plain, secure):
            if os.path.exists(os.path.join(root, "pids.json")):
                launch(cwd, "--stop", "--dir", root)
            _kill_leftovers(root)
