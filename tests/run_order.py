"""The order the suite's files start in: the longest first.

``scripts/test.sh`` hands whole files to pytest-xdist's workers (``--dist loadfile``: a module's cluster starts
once), in collection order. A long file that starts last runs alone at the end of the pass while the other
workers idle; started first, it overlaps the many short ones (longest-processing-time-first scheduling). The
files below are the longest of the first pass, then of the fault tier's pass (``pytest --durations=0``, summed per
file), longest first in each; every other file keeps its place after them. The order changes when tests start, never what they check.
"""

from __future__ import annotations

import os
from typing import Protocol, Sequence, TypeVar

LONGEST_FIRST = (
    "tests/integration/test_launch_script.py",
    "tests/integration/test_executor_safety.py",
    "tests/integration/test_wheel.py",
    "tests/integration/test_backup_restore.py",
    "tests/integration/test_web_view.py",
    "tests/integration/test_output_s3.py",
    "tests/unit/fsm/test_model.py",
    "tests/integration/test_readme_walkthrough.py",
    "tests/integration/test_clean_install.py",
    "tests/integration/test_web_summary.py",
    "tests/integration/test_cli_and_node.py",
    "tests/integration/test_explain_runs.py",
    "tests/integration/test_live_logs.py",
    "tests/integration/test_cli_surprises.py",
    "tests/integration/test_web_actions.py",
    "tests/integration/test_raft_liveness.py",
    "tests/integration/test_fuzz_rpcs.py",
    # the fault tier (its own pass)
    "tests/fault/test_liveness.py",
    "tests/fault/test_backlog_restarts.py",
    "tests/fault/test_power_cut.py",
    "tests/fault/test_three_hosts.py",
    "tests/fault/test_clock_skew.py",
    "tests/fault/test_failover.py",
    "tests/fault/test_durability.py",
    "tests/fault/test_membership_changes.py",
)

_RANK = {path: rank for rank, path in enumerate(LONGEST_FIRST)}
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Item(Protocol):
    @property
    def path(self) -> os.PathLike[str]: ...


T = TypeVar("T", bound=_Item)


def _rank(path: os.PathLike[str] | str) -> int:
    rel = os.path.relpath(os.fspath(path), _ROOT).replace(os.sep, "/")
    return _RANK.get(rel, len(LONGEST_FIRST))


def longest_first(items: Sequence[T]) -> list[T]:
    """``items`` (collected tests) with the files of ``LONGEST_FIRST`` first, in its order; a file's tests stay
    together and in their own order, and every other file keeps its place (a stable sort)."""
    return sorted(items, key=lambda item: _rank(item.path))
