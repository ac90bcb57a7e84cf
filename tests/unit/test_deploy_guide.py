"""docs/deploy.md and the script it runs say the same: the cluster.toml the guide shows is the one
scripts/deploy/cluster_files.sh writes, and every script command, unit file and path the guide names
exists. (tests/fault/test_three_hosts.py performs the guide itself.)"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from raftsched.cluster.node.config import parse_config

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "deploy.md"
SCRIPT = REPO / "scripts" / "deploy" / "cluster_files.sh"
NODES = ["n1=10.0.0.1", "n2=10.0.0.2", "n3=10.0.0.3"]


def _script_config(*nodes: str) -> str:
    done = subprocess.run(["bash", str(SCRIPT), "config", *nodes], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _guide_config() -> dict[str, object]:
    blocks = re.findall(r"```toml\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    assert blocks, "docs/deploy.md shows no cluster.toml"
    return tomllib.loads(blocks[0])


def test_the_config_the_guide_shows_is_the_one_the_script_writes() -> None:
    written = tomllib.loads(_script_config(*NODES))
    shown = _guide_config()
    assert {k: v for k, v in written.items() if k != "nodes"} == {k: v for k, v in shown.items() if k != "nodes"}
    assert shown["nodes"] == written["nodes"][:1]  # type: ignore[index]  # the guide shows n1 ("n2, n3 alike")
    assert [n["id"] for n in written["nodes"]] == ["n1", "n2", "n3"]  # type: ignore[union-attr, index]


def test_the_script_writes_a_config_a_node_accepts() -> None:
    cfg = parse_config(_script_config(*NODES), "/etc/raftsched/cluster.toml")
    assert cfg.tls is not None and cfg.auth.tokens_file == "/etc/raftsched/tokens.toml"
    assert cfg.secret_file == "/etc/raftsched/raft.secret" and cfg.data_dir == "/var/lib/raftsched"
    assert cfg.output_dir() == "/var/lib/raftsched-logs"
    assert [(n.id, n.raft, n.grpc, n.http) for n in cfg.nodes][2] == ("n3", "10.0.0.3:7001", "10.0.0.3:50051", "10.0.0.3:8081")
    assert cfg.check_grpc_exposure("n1") is None  # off loopback, with [tls] and [auth]: no refusal, no warning


def test_the_script_refuses_a_node_without_its_address() -> None:
    done = subprocess.run(["bash", str(SCRIPT), "config", "n1"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "expected ID=ADDRESS (e.g. n1=10.0.0.1), got 'n1'" in done.stderr


def test_every_file_the_guide_names_exists() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    named = set(re.findall(r"\b((?:scripts|tests|docs)/[\w./@-]+\w)", text))
    assert {"scripts/deploy/cluster_files.sh", "scripts/systemd/raftsched-node@.service"} <= named
    missing = sorted(p for p in named if not (REPO / p).exists())
    assert missing == [], f"docs/deploy.md names files that do not exist: {missing}"
    subcommands = set(re.findall(r"cluster_files\.sh (\w+)", text))
    assert subcommands == {"new", "add", "config"}
    script = SCRIPT.read_text(encoding="utf-8")
    assert all(f"  {sub}) shift; cmd_{sub}" in script for sub in subcommands)
