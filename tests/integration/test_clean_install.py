"""Installing from a checkout leaves the checkout as it was: ``pip install .``, ``pip install -e .`` and an
sdist (then a wheel built from it) write setuptools' build/ and raftsched.egg-info/ outside the tree
(scripts/build_backend.py), so ``git status --ignored`` shows nothing new; what is installed imports.

The tree is a copy of the tracked files in a new git repository; pip builds with the test venv's
setuptools (no build isolation: nothing is fetched)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _checkout(dest: Path) -> Path:
    """The tracked files (links kept as links), committed in a new repository: a clean checkout."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for raw in filter(None, files):
        rel = raw.decode()
        src, dst = REPO / rel, dest / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree, not yet committed
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
    _run([*git, "init", "-q"], dest)
    _run([*git, "add", "-A"], dest)
    _run([*git, "commit", "-q", "-m", "checkout"], dest)
    return dest


def _left_over(tree: Path) -> list[str]:
    """What ``git status --ignored`` shows: anything an install added, ignored or not."""
    return _run(["git", "status", "--porcelain", "--ignored"], tree).splitlines()


def _pip(*args: str) -> list[str]:
    # --ignore-installed: pip would otherwise uninstall the test venv's own raftsched first, even with --prefix,
    # and every node started after this test would find no raftsched
    return [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--ignore-installed", *args]


def _venv_runs_this_checkout() -> str:
    return _run([sys.executable, "-c", "import raftsched; print(raftsched.__file__)"], Path("/")).strip()


def test_pip_install_leaves_no_build_folders_in_the_checkout(tmp_path: Path) -> None:
    tree = _checkout(tmp_path / "tree")
    target = tmp_path / "installed"
    _run(_pip("--target", str(target), str(tree)), tmp_path)
    assert _left_over(tree) == []
    assert (target / "raftsched" / "rpc" / "http" / "web" / "templates" / "run.html").is_file()
    clean_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(target)}
    out = _run([sys.executable, "-c", "import raftsched.cluster.app.main as m; print(m.__file__)"], tmp_path, clean_env)
    assert out.startswith(str(target)), out

    before = _venv_runs_this_checkout()
    _run(_pip("--prefix", str(tmp_path / "editable"), "-e", str(tree)), tmp_path)
    assert _left_over(tree) == []
    assert _venv_runs_this_checkout() == before  # the test venv's own install is untouched


def test_a_wheel_builds_from_the_sdist_and_neither_leaves_anything(tmp_path: Path) -> None:
    tree = _checkout(tmp_path / "tree")
    dist = tmp_path / "dist"
    hook = "import sys, build_backend; print(build_backend.build_sdist(sys.argv[1]))"
    out = _run([sys.executable, "-c", hook, str(dist)], tree, os.environ | {"PYTHONPATH": str(tree / "scripts")})
    name = out.strip().splitlines()[-1]  # setuptools says what it does on stdout too
    assert _left_over(tree) == []
    with tarfile.open(dist / name) as sdist:
        sdist.extractall(tmp_path / "unpacked", filter="data")
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    assert (unpacked / "scripts" / "build_backend.py").is_file()  # MANIFEST.in: the backend travels with it
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(unpacked)],
        tmp_path,
    )
    assert len(list(dist.glob("raftsched-*-py3-none-any.whl"))) == 1
    assert not (unpacked / "build").exists() and not (unpacked / "raftsched.egg-info").exists()
