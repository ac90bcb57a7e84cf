"""What a user installs: the wheel, built from the tracked files, in a new venv (not editable), used from
a directory that is not the checkout. It installs one import package, ``raftsched``, with every module of
the tree in it; the ``raftsched`` command works; and three nodes started with it elect a leader, fire a
job and have its runs completed by an executor started with it.

The venv takes the dependencies pinned in constraints.txt from the package index (pip's cache makes it
quick after the first time); nothing of the checkout is on its path."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftsched.cluster.app.local_cluster import free_ports

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
#: the folders installed under raftsched (linked as raftsched/<folder> in the checkout)
FOLDERS = ("cluster", "raft", "rpc", "storage", "protos")


def _run(cmd: list[str], cwd: Path, timeout: float = 600, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _export_tracked_tree(dest: Path) -> None:
    """The files git tracks, links kept as links: what a clean checkout has (no build leftovers)."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        rel = raw.decode()
        src, dst = REPO / rel, dest / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree, not yet committed
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the wheel, the new venv's bin folder)."""
    root = tmp_path_factory.mktemp("wheel")
    tree, dist = root / "tree", root / "dist"
    _export_tracked_tree(tree)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(tree)], root)
    (wheel,) = dist.glob("raftsched-*.whl")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    bin_dir = env_dir / "bin"
    _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "-c", str(REPO / "constraints.txt"), str(wheel)], root)
    yield wheel, bin_dir


def test_the_wheel_installs_one_import_package_with_every_module_of_the_tree(installed: tuple[Path, Path]) -> None:
    wheel, bin_dir = installed
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"raftsched"}, f"top-level names in the wheel: {sorted(tops)}"
    tracked = subprocess.run(["git", "ls-files", *FOLDERS], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    wanted = {f"raftsched/{rel}" for rel in tracked if rel.endswith((".py", ".html", ".css", ".proto", ".pyi"))}
    missing = sorted(wanted - set(names))
    assert missing == [], f"modules and data of the tree missing from the wheel: {missing[:20]}"
    # every module imports from the installed package, in a process that cannot see the checkout
    probe = (
        "import importlib, pkgutil, raftsched, sys\n"
        f"assert not any(p and {str(REPO)!r} in p for p in sys.path), sys.path\n"
        "bad = []\n"
        "for m in pkgutil.walk_packages(raftsched.__path__, 'raftsched.'):\n"
        "    if m.name.endswith('__main__'):\n"
        "        continue\n"
        "    try:\n"
        "        importlib.import_module(m.name)\n"
        "    except Exception as exc:\n"
        "        bad.append(f'{m.name}: {exc!r}')\n"
        "print(len(bad)); print('\\n'.join(bad))\n"
    )
    out = _run([str(bin_dir / "python"), "-c", probe], wheel.parent)
    assert out.splitlines()[0] == "0", out
    imported = _run([str(bin_dir / "python"), "-c", "import raftsched.cluster.app.cli as c; print(c.__file__)"], wheel.parent)
    assert imported.startswith(str(bin_dir.parent)), imported


def test_the_raftsched_command_works_from_the_wheel(installed: tuple[Path, Path], tmp_path: Path) -> None:
    _, bin_dir = installed
    version = _run([str(bin_dir / "raftsched"), "--version"], tmp_path)
    assert version.startswith("raftsched 0.") and "command format" in version
    assert "--node-id" in _run([str(bin_dir / "raftsched"), "node", "--help"], tmp_path)
    assert "--queue" in _run([str(bin_dir / "raftsched"), "executor", "--help"], tmp_path)


@dataclasses.dataclass
class WheelCluster:
    """Three nodes started with the wheel's ``raftsched`` command, in a folder that is not the checkout."""

    bin_dir: Path
    folder: Path
    addresses: str
    outputs: Path
    env: dict[str, str]

    def call(self, *args: str) -> str:
        return _run([str(self.bin_dir / "raftsched"), *args, "--cluster", self.addresses], self.folder, timeout=60, env=self.env)


@pytest.fixture(scope="module")
def wheel_cluster(installed: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[WheelCluster]:
    _, bin_dir = installed
    folder = tmp_path_factory.mktemp("wheel-cluster")
    outputs = folder / "outputs"
    ports = free_ports(6)
    lines = ["[cluster]", 'data_dir = "var"', "", "[logs]", f'dir = "{outputs}"']
    for i in range(3):
        lines += [
            "",
            "[[nodes]]",
            f'id = "n{i + 1}"',
            f'raft = "127.0.0.1:{ports[2 * i]}"',
            f'grpc = "127.0.0.1:{ports[2 * i + 1]}"',
        ]
    (folder / "cluster.toml").write_text("\n".join(lines) + "\n")
    addresses = ",".join(f"127.0.0.1:{ports[2 * i + 1]}" for i in range(3))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAFTSCHED_", "PYTHON"))}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(3):
            log = open(folder / f"n{i + 1}.log", "wb")
            cmd = [str(bin_dir / "raftsched"), "node", "--config", "cluster.toml", "--node-id", f"n{i + 1}"]
            procs.append(subprocess.Popen(cmd, cwd=folder, stdout=log, stderr=subprocess.STDOUT, env=env))
        cluster = WheelCluster(bin_dir, folder, addresses, outputs, env)
        leader = cluster.call("cluster", "leader", "--wait", "30s").strip()
        assert leader in {"n1", "n2", "n3"}, leader
        yield cluster
    finally:
        _stop(procs)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_three_nodes_from_the_wheel_fire_and_complete_runs(wheel_cluster: WheelCluster) -> None:
    c = wheel_cluster
    job_id = c.call("job", "create", "--name", "wheel-tick", "--every", "1s", "--type", "noop", "-o", "id").strip()
    executor_log = open(c.folder / "executor.log", "wb")
    cmd = [
        str(c.bin_dir / "raftsched"),
        "executor",
        "--cluster",
        c.addresses,
        "--queue",
        "default",
        "--output-dir",
        str(c.outputs),
    ]
    executor = subprocess.Popen(cmd, cwd=c.folder, stdout=executor_log, stderr=subprocess.STDOUT, env=c.env)
    try:
        deadline = time.monotonic() + 60
        succeeded: list[dict] = []
        while time.monotonic() < deadline and len(succeeded) < 3:
            time.sleep(1.0)
            runs = json.loads(c.call("run", "list", "--job", job_id, "--status", "succeeded", "-o", "json"))
            succeeded = runs if isinstance(runs, list) else runs.get("runs", [])
        assert len(succeeded) >= 3, f"runs of {job_id} succeeded: {len(succeeded)}; logs in {c.folder}"
    finally:
        _stop([executor])


def test_the_sdk_from_the_wheel(wheel_cluster: WheelCluster) -> None:
    """tests/integration/sdk_wheel_scenarios.py run by the wheel venv's python: what a user's program sees."""
    c = wheel_cluster
    script = Path(__file__).with_name("sdk_wheel_scenarios.py")
    local = c.folder / script.name  # outside the checkout: nothing of it on the path
    shutil.copy(script, local)
    seen = json.loads(_run([str(c.bin_dir / "python"), str(local), c.addresses, str(c.outputs)], c.folder, 300, c.env))

    typed = seen["typed"]  # a dataclass payload in, JSON out, the task's print in the run's log
    assert typed["status"] == "SUCCEEDED" and typed["result"] == {"customer": 7, "total": 12.5, "lines": 2}, typed
    assert typed["log"] == "invoice for 7\n"
    bad = seen["bad_payload"]  # a payload that does not fit: FAILED at once, the field named
    assert bad["status"] == "FAILED" and len(bad["attempts"]) == 1, bad
    assert "field 'customer'" in bad["error"] and "expected an integer" in bad["error"], bad["error"]
    checkpoint = seen["checkpoint"]  # attempt 2 reads attempt 1's heartbeat
    assert checkpoint["status"] == "SUCCEEDED" and checkpoint["result"] == {"resumed_from": {"page": 7}}, checkpoint
    assert checkpoint["attempts"][0]["heartbeat"] == {"page": 7}
    refused = seen["non_retryable"]  # FAILED after one attempt of three
    assert refused["status"] == "FAILED" and len(refused["attempts"]) == 1 and "no such customer 3" in refused["error"]
    later = seen["retry_after"]  # RetryAfter(3): the next attempt 3 s later at least, beyond the 1 s backoff
    first, second = later["attempts"]
    assert later["status"] == "DEAD_LETTER" and second["leased"] - first["finished"] >= 3.0, later
    assert seen["async"]["status"] == "SUCCEEDED" and seen["async"]["result"]["got"] == {"n": 1}
    assert seen["schedule_jobs"] == 1  # two workers declaring one schedule at once: one job
    assert seen["same_job"] is True  # AsyncClient and Client see the same job
    killed = seen["killed"]  # SIGKILL mid-run: the lease expires, another worker finishes; the late completion is refused
    assert killed["status"] == "SUCCEEDED" and killed["result"] == {"attempt": 2}, killed
    gone, finished = killed["attempts"]
    assert gone["outcome"] == "LEASE_EXPIRED" and gone["executor"] == killed["first_executor"], killed
    assert finished["outcome"] == "SUCCEEDED" and finished["executor"] != gone["executor"], killed
    assert killed["late_completion"] == "FAILED_PRECONDITION"
