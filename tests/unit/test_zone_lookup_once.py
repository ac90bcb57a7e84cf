"""One zone lookup: the command line and the web view read zones from the pinned tz database the nodes use
(``raftsched.cluster.domain.schedule.zones``), never from the host's files, so what they show is what fires."""

from __future__ import annotations

import ast
import pathlib

import pytest

from raftsched.cluster.app.cli import args, timefmt
from raftsched.cluster.domain.schedule import zones
from raftsched.rpc.http.web import words

pytestmark = pytest.mark.unit

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_the_cli_and_the_web_view_get_the_pinned_zone() -> None:
    berlin = zones.zone("Europe/Berlin")
    assert timefmt.zone_or_utc("Europe/Berlin") is berlin
    assert words.zone_of("Europe/Berlin") is berlin
    assert (
        args.parse_from_ms("2026-10-25T02:30", "Europe/Berlin") == 1_792_888_200_000
    )  # 00:30Z: the first 02:30 of that night is CEST (+02:00)


def test_nothing_else_builds_a_zone() -> None:
    callers = []
    for folder in ("cluster", "rpc", "raft", "storage", "raftsched/sdk"):
        for path in (REPO / folder).rglob("*.py"):
            if "schedule" in path.parts or "_pb2" in path.name:  # the schedule rules use the zones module itself
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr == "ZoneInfo":
                    callers.append(f"{path.relative_to(REPO)}:{node.lineno}")
                if isinstance(node, ast.ImportFrom) and node.module == "zoneinfo":
                    callers.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert callers == [], f"zones come from raftsched.cluster.domain.schedule.zones only: {callers}"
