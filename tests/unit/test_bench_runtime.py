"""Which raftsched a benchmark's nodes and executors run (``bench.harness.runtime``): this checkout's, or another
checkout's by its own venv and entry point (``bench.py --nodes-from``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bench import cli
from bench.harness import runtime as rt
from bench.harness.processes import spawn_executors

pytestmark = pytest.mark.unit


def _checkout(root: Path, main: str) -> Path:
    (root / ".venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, root / ".venv" / "bin" / "python")
    (root / main).parent.mkdir(parents=True)
    (root / main).write_text("")
    return root


def test_a_checkout_with_one_import_root_runs_its_package_entry_point(tmp_path: Path) -> None:
    root = _checkout(tmp_path / "new", "raftsched/cluster/app/main.py")
    found = rt.from_checkout(str(root))
    assert found.module == rt.PACKAGE_MAIN and found.python == str(root / ".venv" / "bin" / "python")
    assert found.cwd == str(root.resolve())  # its own packages first on the path, never this checkout's
    assert found.command("node", "--config", "c.toml") == [found.python, "-m", rt.PACKAGE_MAIN, "node", "--config", "c.toml"]
    # a node starts in its cluster's folder: the checkout goes on the path ahead of whatever its venv installed
    assert found.env() == {"PYTHONPATH": found.cwd}


def test_an_older_checkout_runs_its_top_level_entry_point(tmp_path: Path) -> None:
    root = _checkout(tmp_path / "old", "cluster/app/main.py")
    assert rt.from_checkout(str(root)).module == rt.LEGACY_MAIN


@pytest.mark.parametrize(
    "venv, main, words", [(False, "cluster/app/main.py", "bootstrap.sh"), (True, "README.md", "not a raftsched")]
)
def test_what_cannot_run_nodes_is_refused_by_name(tmp_path: Path, venv: bool, main: str, words: str) -> None:
    root = tmp_path / "x"
    (root / main).parent.mkdir(parents=True, exist_ok=True)
    (root / main).write_text("")
    if venv:
        (root / ".venv" / "bin").mkdir(parents=True)
        os.symlink(sys.executable, root / ".venv" / "bin" / "python")
    with pytest.raises(ValueError, match=words):
        rt.from_checkout(str(root))


def test_this_checkout_is_the_default() -> None:
    here = rt.this_checkout()
    assert (here.python, here.module, here.label) == (sys.executable, rt.PACKAGE_MAIN, "this checkout")
    assert here.env() == {}
    assert (Path(here.cwd) / "raftsched" / "cluster" / "app" / "main.py").exists()


def test_executors_run_the_runtime_they_are_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _checkout(tmp_path / "old", "cluster/app/main.py")
    other = rt.from_checkout(str(root))
    (tmp_path / "cluster.toml").write_text(
        '[cluster]\ndata_dir = "var"\n\n[[nodes]]\nid = "n1"\nraft = "127.0.0.1:1"\ngrpc = "127.0.0.1:2"\n'
    )
    started: list[tuple[list[str], str]] = []

    class FakePopen:
        def __init__(self, args: list[str], cwd: str, **_: object) -> None:
            started.append((args, cwd))

    monkeypatch.setattr("bench.harness.processes.subprocess.Popen", FakePopen)
    spawn_executors(["127.0.0.1:2"], str(tmp_path), "e", ["q"], 4, 2, other)
    assert [(a[:4], cwd) for a, cwd in started] == [([other.python, "-m", rt.LEGACY_MAIN, "executor"], other.cwd)] * 2
    assert started[0][0][-2:] == ["--queue", "q"]


def test_nodes_from_takes_only_the_scenarios_on_the_shared_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _checkout(tmp_path / "old", "cluster/app/main.py")
    assert cli.main(["--nodes-from", str(root), "--scenarios", "raw_raft", "--out", str(tmp_path / "o")]) == 2
    assert "only the scenarios on the shared cluster" in capsys.readouterr().err
    assert cli.main(["--nodes-from", str(tmp_path / "nothing"), "--scenarios", "create", "--out", str(tmp_path / "o")]) == 2
    assert "bootstrap.sh" in capsys.readouterr().err
