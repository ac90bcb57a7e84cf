"""Scenario ``machine`` (always first): what the figures were measured on, and the command that measured them,
into ``results["machine"]``."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import time

from bench.harness.common import REPO_ROOT
from bench.harness.context import Bench


def _version(pkg: str) -> str:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _git_commit() -> str:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], check=False, cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit.stdout.strip() if commit.returncode == 0 and commit.stdout.strip() else "unknown"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _memory_gb() -> float | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            return round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        return None


def _etcd_version() -> str | None:
    etcd = shutil.which("etcd")
    if not etcd:
        return None
    try:
        out = subprocess.run([etcd, "--version"], check=False, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.split("\n")[0].strip()


def scenario_machine(b: Bench) -> None:
    git = _git_commit()
    b.results["machine"] = {
        "cores": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "pysyncobj": _version("pysyncobj"),
        "grpcio": _version("grpcio"),
        "protobuf": _version("protobuf"),
        "platform": platform.platform(),
        "git_commit": git,
        "etcd": _etcd_version(),
        "profile": b.profile.name,
        "command": getattr(b.args, "command_line", None),
        # whose nodes and executors ran (``--nodes-from``): git_commit is the harness's
        "nodes_from": b.runtime.label,
        "loadavg_at_start": os.getloadavg(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    b.say(
        f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, pysyncobj {_version('pysyncobj')}, git {git[:12]}"
    )
