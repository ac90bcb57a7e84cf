"""``--log-format json`` and ``--log-level`` on nodes and executors: one parseable JSON object per line
with timestamp, level, logger, the process's id, message and exception text; the flags parse on both."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from datetime import datetime
from typing import Iterator

import pytest

from raftsched.cluster.app.log_setup import configure_logging
from raftsched.cluster.app.main import build_parser

pytestmark = pytest.mark.unit


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_carry_every_field(restore_logging: None) -> None:
    out = io.StringIO()
    configure_logging("json", "INFO", {"node": "n2"}, "unused", stream=out)
    logging.getLogger("raftsched.leader").info("became leader at %d", 7)
    logging.getLogger("raftsched.leader").debug("not shown at INFO")
    try:
        raise ValueError("bad entry")
    except ValueError:
        logging.getLogger("raftsched.raft").exception("apply failed")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["level"] == "INFO" and first["logger"] == "raftsched.leader" and first["node"] == "n2"
    assert first["message"] == "became leader at 7" and "exception" not in first
    assert datetime.fromisoformat(first["timestamp"]).tzinfo is not None
    assert second["level"] == "ERROR" and "ValueError: bad entry" in second["exception"] and "Traceback" in second["exception"]


def test_text_format_and_level(restore_logging: None) -> None:
    out = io.StringIO()
    configure_logging("text", "warning", {"executor": "e1"}, "executor e1 %(levelname)s %(message)s", stream=out)
    logging.getLogger("raftsched.executor").info("hidden")
    logging.getLogger("raftsched.executor").warning("shown")
    assert out.getvalue() == "executor e1 WARNING shown\n"


def test_node_and_executor_take_the_flags() -> None:
    parser = build_parser()
    node = parser.parse_args(["node", "--config", "c.toml", "--node-id", "n1", "--log-format", "json", "--log-level", "debug"])
    assert (node.log_format, node.log_level) == ("json", "DEBUG")
    execu = parser.parse_args(["executor", "--cluster", "127.0.0.1:1"])
    assert (execu.log_format, execu.log_level) == ("text", "INFO")
    with pytest.raises(SystemExit):
        parser.parse_args(["node", "--config", "c.toml", "--node-id", "n1", "--log-format", "xml"])


def test_a_node_that_cannot_start_says_why_in_json(tmp_path: object) -> None:
    missing = f"{tmp_path}/missing.toml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "raftsched.cluster.app.main",
            "node",
            "--config",
            missing,
            "--node-id",
            "n1",
            "--log-format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    records = [json.loads(line) for line in proc.stderr.splitlines() if line.strip()]
    assert records, proc.stderr
    last = records[-1]
    assert last["level"] == "ERROR" and last["node"] == "n1" and missing in last["message"]
