"""Test tiers: every collected test carries exactly one tier marker, the one its folder names.

The tiers (registered in pyproject.toml, run with ``pytest -m <tier>``):

- ``unit``: pure and fast, no network, no node processes;
- ``contract``: each implementation of a port (the output stores) against one shared suite;
- ``integration``: real node processes on loopback;
- ``fault``: kills and restarts under load, ending in a history check (``tests.history``).

A test file lives in ``tests/<tier>/`` and marks itself with a module-level
``pytestmark = pytest.mark.<tier>``. ``tests/conftest.py`` runs
``tier_problems`` over every collected item before ``-m`` deselects any, and
stops the session when it finds one: a test without a tier would otherwise be
skipped silently by every ``-m <tier>`` run.
"""

from __future__ import annotations

import os
from typing import Iterable, Protocol

TIERS = ("unit", "contract", "integration", "fault")

_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


class _Item(Protocol):
    """What ``tier_problems`` needs of a collected ``pytest.Item``."""

    nodeid: str

    @property
    def path(self) -> os.PathLike[str]: ...

    def iter_markers(self, name: str | None = None) -> Iterable[object]: ...


def tiers_of(item: _Item) -> list[str]:
    """The tier markers on ``item`` (its own, its class's and its module's), in no particular order."""
    names = {getattr(mark, "name", "") for mark in item.iter_markers()}
    return sorted(names & set(TIERS))


def folder_tier(path: os.PathLike[str] | str) -> str | None:
    """The tier a test file's folder names (``tests/unit/...`` -> ``unit``), or None outside the tier folders."""
    rel = os.path.relpath(os.fspath(path), _TESTS_DIR)
    first = rel.split(os.sep, 1)[0]
    return first if first in TIERS else None


def tier_problems(items: Iterable[_Item]) -> list[str]:
    """One line per item that has no tier, more than one, or another tier than its folder."""
    problems: list[str] = []
    for item in items:
        tiers, folder = tiers_of(item), folder_tier(item.path)
        if not tiers:
            problems.append(f"{item.nodeid}: no tier marker: add `pytestmark = pytest.mark.<tier>` ({', '.join(TIERS)})")
        elif len(tiers) > 1:
            problems.append(f"{item.nodeid}: several tier markers {tiers}: keep exactly one")
        elif folder is None:
            problems.append(f"{item.nodeid}: not inside a tier folder: move it to tests/{tiers[0]}/")
        elif tiers[0] != folder:
            problems.append(f"{item.nodeid}: marked {tiers[0]!r} but lives in tests/{folder}/: move it or fix the marker")
    return problems
