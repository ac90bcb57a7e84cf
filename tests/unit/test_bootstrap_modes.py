"""scripts/bootstrap.sh's two modes, run in a copy of the checkout's scripts against a stand-in venv whose
python only records what it is asked: the launcher installs what a cluster needs (no dev extras), the
test script the dev extras; a dev install stands for a runtime one, not the other way round; nothing is
installed twice; what older installs left in the checkout (build/, raftsched.egg-info/) goes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/../calls.log"
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The scripts and the files bootstrap.sh reads, copied: the checkout itself is left alone."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    for name in ("bootstrap.sh", "launch_cluster.sh", "test.sh"):
        shutil.copy2(REPO / "scripts" / name, root / "scripts" / name)
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy2(REPO / name, root / name)
    return root


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A venv folder whose bin/python logs its arguments and succeeds."""
    root = tmp_path / "venv"
    (root / "bin").mkdir(parents=True)
    python = root / "bin" / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return root


def _run(repo: Path, script: str, venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTSCHED_")} | {"RAFTSCHED_VENV": str(venv)}
    return subprocess.run([str(repo / "scripts" / script), *args], env=env, capture_output=True, text=True, timeout=60)


def _installs(repo: Path, venv: Path) -> list[str]:
    """The targets of the ``pip install -e`` calls so far (the checkout, or the checkout with [dev])."""
    log = venv / "calls.log"
    calls = log.read_text().splitlines() if log.exists() else []
    return [c.split(" -e ", 1)[1].replace(str(repo), "REPO") for c in calls if c.startswith("-m pip install") and " -e " in c]


def test_runtime_installs_no_dev_tools_and_dev_adds_them_once(repo: Path, venv: Path) -> None:
    first = _run(repo, "bootstrap.sh", venv, "runtime")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"{venv}/bin/python"
    assert _installs(repo, venv) == ["REPO"], "the runtime mode installs the checkout without its [dev] extras"
    assert "runtime dependencies (pinned in constraints.txt)" in first.stderr

    assert _run(repo, "bootstrap.sh", venv, "runtime").returncode == 0
    assert _installs(repo, venv) == ["REPO"], "installed already: nothing to do"

    dev = _run(repo, "bootstrap.sh", venv, "dev")
    assert dev.returncode == 0 and _installs(repo, venv) == ["REPO", "REPO[dev]"], dev.stderr
    assert "the dev tools" in dev.stderr
    for mode in ("dev", "runtime"):  # a dev install holds the runtime too
        assert _run(repo, "bootstrap.sh", venv, mode).returncode == 0
    assert _installs(repo, venv) == ["REPO", "REPO[dev]"]


def test_the_launcher_asks_for_the_runtime_and_the_tests_for_the_dev_tools(repo: Path, venv: Path) -> None:
    launched = _run(repo, "launch_cluster.sh", venv, "--stop", "--dir", str(venv / "no-cluster"))
    assert launched.returncode == 0, launched.stderr
    assert _installs(repo, venv) == ["REPO"]
    last = (venv / "calls.log").read_text().splitlines()[-1]
    assert last.endswith(f"scripts/devcluster/launch_cluster.py --stop --dir {venv / 'no-cluster'}"), last

    tested = _run(repo, "test.sh", venv, "-m", "unit")
    assert tested.returncode == 0, tested.stderr
    assert _installs(repo, venv) == ["REPO", "REPO[dev]"]
    assert (venv / "calls.log").read_text().splitlines()[-1] == "-m pytest -q -m unit"


def test_an_unknown_mode_is_refused_saying_which_exist(repo: Path, venv: Path) -> None:
    refused = _run(repo, "bootstrap.sh", venv, "everything")
    assert refused.returncode == 2 and "use 'runtime'" in refused.stderr and "'dev'" in refused.stderr
    assert _installs(repo, venv) == []


def test_what_older_installs_left_in_the_checkout_goes_and_nothing_else(repo: Path, venv: Path) -> None:
    (repo / "raftsched.egg-info").mkdir()
    (repo / "raftsched.egg-info" / "PKG-INFO").write_text("Name: raftsched\n")
    for folder in ("build/lib/raftsched", "build/bdist.linux-x86_64/wheel"):
        (repo / folder).mkdir(parents=True)
    assert _run(repo, "bootstrap.sh", venv).returncode == 0
    assert not (repo / "raftsched.egg-info").exists() and not (repo / "build").exists()

    (repo / "build" / "lib").mkdir(parents=True)
    (repo / "build" / "mine.txt").write_text("a file someone keeps in build/")
    assert _run(repo, "bootstrap.sh", venv, "dev").returncode == 0
    assert sorted(p.name for p in (repo / "build").iterdir()) == ["mine.txt"]
