"""The tree explains the architecture, and a tool holds it to that.

* import-linter's contracts (``[tool.importlinter]`` in pyproject.toml): the
  layers (app > rpc | storage > raft | node | executor > fsm > domain), a pure
  state machine and domain (no files, clocks, threads, randomness either),
  ``raft/`` that knows no jobs, no tooling imported at runtime;
* no folder imports a folder that imports it back (directly or round a longer cycle);
* no hand-written source file over 600 lines, tests included.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
#: the folders installed under the one import package, raftsched (linked as raftsched/<folder>)
FOLDERS = ("cluster", "rpc", "raft", "storage", "protos")
PACKAGES = ("raftsched",)
MAX_LINES = 600


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def _folder(module: str, packages: set[str]) -> str:
    """The folder (package) a module lives in: itself for a package, its parent for a module."""
    return module if module in packages else module.rpartition(".")[0]


def _folder_graph() -> dict[str, set[str]]:
    graph = grimp.build_graph(*PACKAGES)
    packages = {m for m in graph.modules if (REPO / m.replace(".", "/") / "__init__.py").exists()}
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        src = _folder(module, packages)
        for imported in graph.find_modules_directly_imported_by(module):
            dst = _folder(imported, packages)
            if dst != src and not src.startswith(dst + ".") and not dst.startswith(src + "."):
                edges.setdefault(src, set()).add(dst)
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_folder_imports_a_folder_that_imports_it_back() -> None:
    edges = _folder_graph()
    assert edges.get("raftsched.cluster.app"), "the graph was not built (no imports found for raftsched.cluster.app)"
    cycle = _cycle(edges)
    assert cycle is None, "folder import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None


def test_no_hand_written_source_file_is_over_600_lines() -> None:
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    if not tracked:  # not a git checkout (an sdist): walk the tree instead
        tracked = [str(p.relative_to(REPO)) for p in REPO.rglob("*.py") if ".venv" not in p.parts]
    long = []
    for rel in tracked:
        if rel.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        with open(os.path.join(REPO, rel), encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > MAX_LINES:
            long.append(f"{rel} ({n} lines)")
    assert long == [], "split these along a seam a reader would see: " + ", ".join(long)


def test_every_import_of_our_code_goes_through_the_one_import_root() -> None:
    """``import cluster...`` would load a second copy of a module beside ``raftsched.cluster...`` in a
    checkout (where both resolve), and fail outright from the wheel (where only raftsched exists)."""
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    bare = re.compile(rf"^\s*(from|import)\s+({'|'.join(FOLDERS)})(\.|\s|$)", re.M)
    found = []
    for rel in tracked:
        if rel.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        text = (REPO / rel).read_text(encoding="utf-8")
        found += [f"{rel}: {m.group(0).strip()}" for m in bare.finditer(text)]
    assert found == [], "import these as raftsched.<folder>...: " + ", ".join(found[:20])


def test_the_folders_are_linked_under_the_import_root() -> None:
    for folder in FOLDERS:
        link = REPO / "raftsched" / folder
        assert link.is_symlink() and os.readlink(link) == f"../{folder}", f"raftsched/{folder} must link to ../{folder}"


def test_nothing_cites_a_file_outside_the_repository() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    outside = []
    for rel in tracked:
        if not rel.endswith((".py", ".md", ".proto", ".toml", ".sh")):
            continue
        text = (REPO / rel).read_text(encoding="utf-8")
        if rel == "tests/unit/test_architecture.py":
            continue
        for needle in ("shared/" + "API.md", "../" + "shared/", " " + "API.md"):
            if needle in text:
                outside.append(f"{rel}: {needle!r}")
    assert outside == [], "the contract is docs/api.md and docs/config.md: " + ", ".join(outside)
