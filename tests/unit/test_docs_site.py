"""The documentation site (mkdocs.yml, docs/): it builds with MkDocs and the Material theme in strict mode, offline;
every page is in the navigation; the README keeps the sections the site includes; and the performance page's table
is what scripts/perf_page.py renders from docs/bench.json, so the two cannot drift apart."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import perf_page  # scripts/ is on pytest's pythonpath (pyproject.toml)

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
#: the README's sections the site includes (pymdownx.snippets), each between a start and an end marker
README_SECTIONS = ("quickstart", "guarantees", "bugs")


def _nav_pages(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    return []


def _config() -> dict[str, Any]:
    # mkdocs.yml holds no YAML tags, so the safe loader reads it whole
    loaded: dict[str, Any] = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    return loaded


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    assert not re.search(r"^WARNING", done.stderr, re.MULTILINE), done.stderr
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "Exactly-once firing" in index, "the overview lost the README's guarantees"
    assert "fonts.googleapis.com" not in index, "the site asks Google for fonts: set theme.font: false"
    # the SDK reference is generated from the docstrings (mkdocstrings reads the local package, offline)
    reference = re.sub(r"<[^>]+>", " ", (tmp_path / "site" / "sdk-reference" / "index.html").read_text(encoding="utf-8"))
    for docstring_words in ("Create a job. The schedule: exactly one of", "Return the run once it has ended", "heartbeat"):
        assert docstring_words in " ".join(reference.split()), f"the SDK reference lacks {docstring_words!r}"


def test_every_page_is_in_the_nav_and_broken_links_fail_the_build() -> None:
    config = _config()
    assert config["docs_dir"] == "docs" and config["theme"]["name"] == "material"
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(_nav_pages(config["nav"])) == pages
    # what makes a broken link or anchor, or a page left out of nav, a warning (and so, with --strict, a failure)
    assert {k: config["validation"][k] for k in ("omitted_files", "not_found", "anchors")} == dict.fromkeys(
        ("omitted_files", "not_found", "anchors"), "warn"
    )
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in config.get("plugins", [])]
    # search, and mkdocstrings (it reads the SDK's docstrings from this checkout): both build offline
    assert plugins == ["search", "mkdocstrings"], f"only plugins that build offline, not {plugins}"


def test_the_readme_keeps_the_sections_the_site_includes() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    included = "".join(p.read_text(encoding="utf-8") for p in DOCS.glob("*.md"))
    for name in README_SECTIONS:
        start, end = f"<!-- --8<-- [start:{name}] -->", f"<!-- --8<-- [end:{name}] -->"
        assert start in readme and end in readme, f"README.md lost its marked section {name!r}"
        assert readme.index(start) < readme.index(end)
        assert f'--8<-- "README.md:{name}"' in included, f"no page includes the README's section {name!r}"


def test_the_readme_is_a_front_door() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move the detail into docs/"


def test_the_docs_speak_of_the_project_not_of_its_work() -> None:
    texts = {p.name: p.read_text(encoding="utf-8") for p in [REPO / "README.md", *DOCS.glob("*.md")]}
    found = [f"{name}: {m.group(0)}" for name, text in texts.items() for m in re.finditer(r"\bissues? #?\d+", text, re.I)]
    assert found == [], f"issue numbers belong in git, not in the docs: {found}"


def test_the_performance_table_is_what_the_report_renders() -> None:
    page = (DOCS / "performance.md").read_text(encoding="utf-8")
    report = json.loads((DOCS / "bench.json").read_text(encoding="utf-8"))
    assert perf_page.generated_region(page) == perf_page.render(report), (
        "docs/performance.md is not what docs/bench.json renders: run python scripts/perf_page.py"
    )


def test_the_table_says_how_and_where_it_was_measured() -> None:
    report = json.loads((DOCS / "bench.json").read_text(encoding="utf-8"))
    machine = report["machine"]
    for key in ("cores", "memory_gb", "cpu_model", "python", "command"):
        assert machine.get(key) not in (None, ""), f"docs/bench.json's machine lacks {key}"
    rendered = perf_page.render(report)
    assert f"`{machine['command']}`" in rendered and f"{machine['cores']} cores" in rendered
    assert machine["cpu_model"] in rendered and f"Python {machine['python']}" in rendered
    assert "| scenario | figure | unit | target | met? |" in rendered
    for key, verdict in report["verdicts"].items():
        row = next(line for line in rendered.splitlines() if f"(`{key.split('.')[0]}`)" in line)
        if verdict == "fail":
            assert row.split("|")[-2].strip().startswith("no"), row


#: a path of this repository in backquotes, as the pages name modules and tests
_REPO_PATH = re.compile(r"`((?:cluster|raft|rpc|storage|protos|scripts|tests|raftsched|docs|examples)/[A-Za-z0-9_./@-]+)`")


def test_every_repository_path_the_pages_name_exists() -> None:
    missing = []
    for page in [REPO / "README.md", *DOCS.glob("*.md")]:
        for m in _REPO_PATH.finditer(page.read_text(encoding="utf-8")):
            path = m.group(1).rstrip(".").split("::")[0]
            if not (REPO / path).exists() and not (REPO / f"{path}.py").exists():
                missing.append(f"{page.name}: {path}")
    assert missing == [], f"pages name paths that are not in the tree (moved or renamed?): {missing}"
