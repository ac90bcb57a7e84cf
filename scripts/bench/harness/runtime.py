"""Which raftsched the benchmark's nodes and executors run: this checkout's, or another's (``--nodes-from``).

With ``--nodes-from DIR`` the cluster's nodes and the executors the scenarios
start are those of the checkout ``DIR``, run by its own virtualenv
(``DIR/.venv``, as its ``scripts/bootstrap.sh`` makes it); everything else —
the scenarios, their clients, what is measured and how — is this checkout's.
Two versions are then compared on one harness: the same load, the same
figures, alternated by ``scripts/bench_compare.py --same-bench``.

Versions differ in where their entry point is: this layout's
``raftsched.cluster.app.main``, or ``cluster.app.main`` in a checkout from
before the package had one import root. Both take the same ``node`` and
``executor`` arguments the benchmark passes.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.harness.common import REPO_ROOT

#: the entry point of a checkout with one import root, and of one from before it
PACKAGE_MAIN = "raftsched.cluster.app.main"
LEGACY_MAIN = "cluster.app.main"
#: the label of this checkout's runtime
THIS = "this checkout"


@dataclass(frozen=True)
class NodeRuntime:
    """An interpreter and the module it runs as a node or an executor, from a working directory."""

    python: str
    module: str
    cwd: str
    #: where it came from, for the report: "this checkout" or the other checkout's path
    label: str

    def command(self, *args: str) -> list[str]:
        return [self.python, "-m", self.module, *args]

    def env(self) -> dict[str, str]:
        """What a node started elsewhere than ``cwd`` (in its cluster's folder) needs to import this runtime's code
        first: another checkout on the path ahead of whatever its venv installed (none for this checkout)."""
        return {} if self.label == THIS else {"PYTHONPATH": self.cwd}


def this_checkout() -> NodeRuntime:
    return NodeRuntime(sys.executable, PACKAGE_MAIN, REPO_ROOT, THIS)


def from_checkout(path: str) -> NodeRuntime:
    """The runtime of the checkout at ``path``; ``ValueError`` naming what is missing when it has none."""
    root = Path(path).resolve()
    python = root / ".venv" / "bin" / "python"
    if not python.exists():
        raise ValueError(f"--nodes-from {path}: no {python}; run scripts/bootstrap.sh in that checkout first")
    if (root / "raftsched" / "cluster" / "app" / "main.py").exists():
        module = PACKAGE_MAIN
    elif (root / "cluster" / "app" / "main.py").exists():
        module = LEGACY_MAIN
    else:
        raise ValueError(
            f"--nodes-from {path}: not a raftsched checkout (no raftsched/cluster/app/main.py or cluster/app/main.py)"
        )
    # the checkout itself is the working directory: ``-m`` puts it first on the path, so its own packages are the
    # ones imported (never this checkout's, whose top-level directories have the same names)
    return NodeRuntime(str(python), module, str(root), os.fspath(root))
