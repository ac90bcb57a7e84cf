"""ruff keeps the code clean and formatted (generated protobuf code excluded, see pyproject.toml)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATHS = ["raftsched", "cluster", "raft", "rpc", "storage", "scripts", "tests", "docs", "examples"]


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff(args: list[str]) -> None:
    out = subprocess.run([sys.executable, "-m", "ruff", *args, *PATHS], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
