"""The systemd units under scripts/systemd: they run a command ``raftsched`` has, with flags it accepts, and
their restart, stop and hardening settings fit what the processes do (docs/deploy.md installs them).

The units are read as systemd reads them (``tests.systemd_units``); ``systemd-analyze verify`` checks them
too where it is installed. ``tests/fault/test_three_hosts.py`` runs their ``ExecStart=`` for real.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from raftsched.cluster.app.main import build_parser
from raftsched.cluster.app.node_main import UNARY_WORKERS
from raftsched.cluster.executor.shell import DEFAULT_KILL_GRACE_S
from raftsched.cluster.node.config import LimitsConfig
from raftsched.raft.adapter import EXIT_BAD_SNAPSHOT, EXIT_UNSUPPORTED_COMMAND
from raftsched.raft.pysyncobj_patches import EXIT_LOG_WRITE_FAILED
from tests.systemd_units import UNIT_DIR, Unit, read_unit, seconds

pytestmark = pytest.mark.unit

NODE = "raftsched-node@.service"
EXECUTOR = "raftsched-executor@.service"
BINARY = "/opt/raftsched/bin/raftsched"
SCRIPT = UNIT_DIR.parent / "deploy" / "cluster_files.sh"
#: a node refusing its config, certificates, tokens or data dir; a bad command line (argparse)
EXIT_REFUSED = 2


def _script_default(name: str) -> str:
    """The default of a variable of scripts/deploy/cluster_files.sh (``NAME="${NAME:-default}"``)."""
    found = re.search(rf'^{name}="\$\{{{name}:-([^}}]*)\}}"', SCRIPT.read_text(encoding="utf-8"), re.M)
    assert found, f"{SCRIPT.name} has no default for {name}"
    return found.group(1)


def _parse(unit: Unit, instance: str, env: dict[str, str]) -> argparse.Namespace:
    argv = unit.exec_start(instance, hostname="host1", env=env)
    assert argv[0] == BINARY, f"{unit.path.name}: ExecStart runs {argv[0]}, the guide installs {BINARY}"
    try:
        return build_parser().parse_args(argv[1:])
    except SystemExit as exc:  # argparse said why on stderr
        raise AssertionError(f"{unit.path.name}: raftsched refuses its ExecStart {argv[1:]} (exit {exc.code})") from exc


def _exit_statuses(unit: Unit) -> set[int]:
    return {int(s) for v in unit.values("Service", "RestartPreventExitStatus") for s in v.split()}


def test_the_node_unit_runs_raftsched_node_with_its_config_and_id() -> None:
    unit = read_unit(UNIT_DIR / NODE)
    args = _parse(unit, "n1", {})
    assert (args.command, args.action, args.node_id, args.join) == ("node", None, "n1", "")
    assert Path(args.config).parent == Path(_script_default("ETC_DIR"))
    assert args.log_format == "json"
    assert unit.values("Service", "EnvironmentFile") == [f"-{_script_default('ETC_DIR')}/node.env"]


def test_the_node_unit_passes_what_node_env_says_a_new_member_needs() -> None:
    env = {"RAFTSCHED_NODE_ARGS": "--join 10.0.0.1:50051,10.0.0.2:50051"}
    args = _parse(read_unit(UNIT_DIR / NODE), "n4", env)
    assert (args.node_id, args.join) == ("n4", "10.0.0.1:50051,10.0.0.2:50051")
    assert "RAFTSCHED_NODE_ARGS=--join" in SCRIPT.read_text(encoding="utf-8")  # what cluster_files.sh add writes


def test_the_executor_unit_runs_raftsched_executor_as_the_executors_token() -> None:
    unit = read_unit(UNIT_DIR / EXECUTOR)
    args = _parse(unit, "default", {"RAFTSCHED_EXECUTOR_ARGS": "--queue default --concurrency 4 --allow-type shell"})
    assert (args.command, args.queue, args.concurrency, args.allow_type) == ("executor", ["default"], 4, ["shell"])
    assert Path(args.config).parent == Path(_script_default("ETC_DIR"))
    # the token cluster_files.sh makes for executors, and an executor id it may act as
    script = SCRIPT.read_text(encoding="utf-8")
    assert 'new_token executors "$OUT/tokens/executors.token" executor' in script
    assert Path(args.token_file).name == "executors.token" and args.executor_id.startswith("executors/")


def test_the_backup_unit_runs_cluster_backup_with_the_backup_token_into_a_dated_file() -> None:
    unit = read_unit(UNIT_DIR / "raftsched-backup.service")
    argv = unit.exec_start()
    assert argv[:2] == ["/bin/sh", "-c"], argv
    assert re.findall(r"\$\([^)]*\)", argv[2]) == ["$(date -u +%Y%m%dT%H%M%SZ)"], argv[2]  # what sh substitutes
    script = shlex.split(re.sub(r"\$\([^)]*\)", "DATE", argv[2]))
    assert script[:2] == ["exec", BINARY], script
    args = build_parser().parse_args(script[2:])
    assert (args.command, args.action, Path(args.token_file).name) == ("cluster", "backup", "backup.token")
    assert args.file == "/var/backups/raftsched/state-DATE.backup"
    assert 'new_token backup "$OUT/tokens/backup.token" admin' in SCRIPT.read_text(encoding="utf-8")
    assert unit.values("Service", "ReadWritePaths") == ["/var/backups/raftsched"]


def test_restart_on_failure_but_not_after_a_removal_or_a_refusal() -> None:
    """A removed node exits 0 (Restart=on-failure leaves it stopped); a refused start (2), a snapshot it cannot
    load (74) and a newer command in the log (76) cannot heal by restarting; a crash, SIGKILL, the OOM killer
    and a Raft log found damaged after a failed write (75) are restarted."""
    node, executor = read_unit(UNIT_DIR / NODE), read_unit(UNIT_DIR / EXECUTOR)
    for unit in (node, executor):
        assert unit.value("Service", "Restart") == "on-failure"
        assert seconds(unit.value("Service", "RestartSec")) >= 1
        assert int(unit.value("Unit", "StartLimitBurst")) >= 1
    assert _exit_statuses(node) == {EXIT_REFUSED, EXIT_BAD_SNAPSHOT, EXIT_UNSUPPORTED_COMMAND}
    assert EXIT_LOG_WRITE_FAILED not in _exit_statuses(node)
    assert _exit_statuses(executor) == {EXIT_REFUSED}


def test_stop_sends_sigterm_to_the_main_process_and_waits_longer_than_its_graceful_stop() -> None:
    node, executor = read_unit(UNIT_DIR / NODE), read_unit(UNIT_DIR / EXECUTOR)
    for unit in (node, executor):
        assert unit.value("Service", "KillMode") == "mixed"  # the process stops its own children (snapshot, runs)
        assert unit.value("Service", "KillSignal") == "SIGTERM"
    # a node drains its RPCs for a few seconds (tests/fault/test_three_hosts.py measures it under the limit)
    assert seconds(node.value("Service", "TimeoutStopSec")) >= 15
    args = _parse(executor, "default", {"RAFTSCHED_EXECUTOR_ARGS": "--queue default"})
    assert seconds(executor.value("Service", "TimeoutStopSec")) > args.grace + DEFAULT_KILL_GRACE_S + 5


def test_open_files_cover_every_stream_and_long_poll_a_node_serves() -> None:
    limits = LimitsConfig()
    sockets = UNARY_WORKERS + limits.max_watch_streams + limits.max_long_polls
    for name in (NODE, EXECUTOR):
        assert int(read_unit(UNIT_DIR / name).value("Service", "LimitNOFILE")) >= max(4096, 4 * sockets)


def test_hardened_but_able_to_write_the_data_and_logs_dirs() -> None:
    data_dir, logs_dir = _script_default("DATA_DIR"), _script_default("LOGS_DIR")
    for name, writable in ((NODE, {data_dir, logs_dir}), (EXECUTOR, {logs_dir})):
        unit = read_unit(UNIT_DIR / name)
        for key, want in (("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("PrivateTmp", "yes"), ("ProtectHome", "yes")):
            assert unit.value("Service", key) == want, f"{name}: {key}"
        assert unit.value("Service", "User") not in ("", "root")
        paths = {p.lstrip("-") for v in unit.values("Service", "ReadWritePaths") for p in v.split()}
        assert paths == writable, f"{name}: ReadWritePaths {sorted(paths)}"
    assert read_unit(UNIT_DIR / NODE).value("Service", "User") != read_unit(UNIT_DIR / EXECUTOR).value("Service", "User")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_accepts_every_unit(tmp_path: Path) -> None:
    """With the command replaced by one that exists here (verify checks it is executable)."""
    units = sorted(p for p in UNIT_DIR.iterdir() if p.suffix in (".service", ".timer"))
    assert {p.name for p in units} >= {NODE, EXECUTOR, "raftsched-backup.service", "raftsched-backup.timer"}
    names = []
    for path in units:
        (tmp_path / path.name).write_text(path.read_text(encoding="utf-8").replace(BINARY, "/bin/true"), encoding="utf-8")
        names.append(path.name.replace("@.", "@x."))
    done = subprocess.run(["systemd-analyze", "verify", *names], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Unknown" not in done.stderr, done.stderr
