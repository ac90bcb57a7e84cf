"""``LocalCluster.start``: the command a node is started with (the interpreter and entry point may be another
installation's, as the benchmark's ``--nodes-from`` runs another version's nodes)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from raftsched.cluster.app import local_cluster as lc

pytestmark = pytest.mark.unit


class _FakePopen:
    started: list[tuple[list[str], str]] = []

    def __init__(self, args: list[str], cwd: str, **_: Any) -> None:
        _FakePopen.started.append((args, cwd))
        self.pid = 0

    def poll(self) -> int | None:
        return None


@pytest.mark.parametrize(
    "python, module", [(None, "raftsched.cluster.app.main"), ("/other/.venv/bin/python", "cluster.app.main")]
)
def test_a_node_starts_with_the_interpreter_and_entry_point_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, python: str | None, module: str
) -> None:
    cluster = lc.LocalCluster.create(str(tmp_path / "c"), 1)
    _FakePopen.started = []
    monkeypatch.setattr(lc.subprocess, "Popen", _FakePopen)
    cluster.start("n1", module=module, python=python)
    ((args, cwd),) = _FakePopen.started
    assert args[:4] == [python or sys.executable, "-m", module, "node"]
    assert args[args.index("--node-id") + 1] == "n1" and cwd == cluster.root
