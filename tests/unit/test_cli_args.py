"""What the command line accepts before it asks the cluster: spans, dates, schedule flags, job updates,
and where it finds the cluster (the client config)."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import zoneinfo
from pathlib import Path

import pytest

from raftsched.cluster.app.cli.args import UsageError, parse_from_ms, parse_span_ms, parse_time_ms
from raftsched.cluster.app.cli.spec_args import add_spec_args, build_spec, preview_spec, update_spec
from raftsched.cluster.app.client_config import client_config_text, resolve
from raftsched.cluster.node.config import ConfigError
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv

pytestmark = pytest.mark.unit


def test_spans_need_a_unit() -> None:
    assert [parse_span_ms(t) for t in ("500ms", "2s", "1.5s", "5m", "1h30m", "1d", "-5s")] == [
        500, 2000, 1500, 300_000, 5_400_000, 86_400_000, -5000,
    ]  # fmt: skip
    with pytest.raises(UsageError) as err:
        parse_span_ms("2", "--every")
    assert str(err.value) == "--every 2: a span needs a unit: say 2s, 2m, 2h or 2d (2ms for milliseconds)"
    for bad in ("ten seconds", "5 s", "", "1x", "s"):
        with pytest.raises(UsageError, match="span"):
            parse_span_ms(bad, "--after")


def ms(*fields: int, zone: str = "UTC") -> int:
    return int(dt.datetime(*fields, tzinfo=zoneinfo.ZoneInfo(zone)).timestamp() * 1000)  # type: ignore[misc]


def test_instants_and_dates() -> None:
    assert parse_time_ms("2026-12-01T09:00:00Z") == ms(2026, 12, 1, 9)
    assert parse_time_ms("2026-12-01T09:00:00+01:00") == ms(2026, 12, 1, 8)
    with pytest.raises(UsageError, match="has no zone"):
        parse_time_ms("2026-12-01T09:00:00")
    assert parse_from_ms("2026-10-20", "Europe/Berlin") == ms(2026, 10, 19, 22)  # midnight in Berlin (CEST)
    assert parse_from_ms("2026-10-20T09:00", "UTC") == ms(2026, 10, 20, 9)
    assert parse_from_ms("2026-10-20T09:00+02:00", "Asia/Tokyo") == ms(2026, 10, 20, 7)  # its own offset wins
    with pytest.raises(UsageError, match="cannot read this date"):
        parse_from_ms("next tuesday", "UTC")
    with pytest.raises(UsageError, match="not an IANA time zone"):
        parse_from_ms("2026-10-20", "Mars/Olympus")


def spec_args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_spec_args(p)
    return p.parse_args(list(argv))


def test_one_schedule_and_tz_only_with_cron() -> None:
    spec = build_spec(spec_args("--every", "2s", "--payload", '{"command": "date"}'))
    assert cv.dur_ms(spec.every) == 2000 and spec.payload == b'{"command": "date"}'
    cron = build_spec(spec_args("--cron", "30 2 * * *", "--tz", "Europe/Berlin"))
    assert (cron.cron.expression, cron.cron.timezone) == ("30 2 * * *", "Europe/Berlin")
    assert build_spec(spec_args("--cron", "0 * * * *")).cron.timezone == "UTC"
    for kind, value in (("--every", "2s"), ("--after", "1m"), ("--at", "2026-12-01T09:00:00Z")):
        with pytest.raises(UsageError) as err:
            build_spec(spec_args(kind, value, "--tz", "Europe/Berlin"))
        assert str(err.value).startswith("--tz applies only to --cron") and kind in str(err.value)
    with pytest.raises(UsageError, match="exactly one schedule"):
        build_spec(spec_args("--every", "2s", "--after", "1s"))
    with pytest.raises(UsageError, match="exactly one schedule"):
        build_spec(spec_args("--name", "x"))
    with pytest.raises(UsageError, match="not both"):
        build_spec(spec_args("--every", "2s", "--payload", "x", "--payload-file", "/dev/null"))


def existing() -> pb.JobSpec:
    spec = build_spec(spec_args("--cron", "0 9 * * 1", "--tz", "Europe/Berlin", "--name", "weekly", "--payload", "p"))
    spec.retry.max_attempts = 5
    return spec


def test_update_changes_what_is_given_and_keeps_the_rest() -> None:
    old = existing()
    new = update_spec(old, spec_args("--every", "5m"))
    assert new.WhichOneof("schedule") == "every" and cv.dur_ms(new.every) == 300_000
    assert (new.name, new.payload, new.retry.max_attempts) == ("weekly", b"p", 5)
    zone = update_spec(old, spec_args("--tz", "America/New_York"))
    assert (zone.cron.expression, zone.cron.timezone) == ("0 9 * * 1", "America/New_York")
    kept = update_spec(old, spec_args("--cron", "0 10 * * 1"))
    assert kept.cron.timezone == "Europe/Berlin"  # a new expression keeps the job's zone
    renamed = update_spec(old, spec_args("--name", "monday", "--max-attempts", "2", "--timeout", "1m"))
    assert (renamed.name, renamed.retry.max_attempts, cv.dur_ms(renamed.timeout)) == ("monday", 2, 60_000)
    assert old.name == "weekly"  # the spec read is not changed in place
    with pytest.raises(UsageError, match="nothing to change"):
        update_spec(old, spec_args())
    every = update_spec(old, spec_args("--every", "5m"))
    with pytest.raises(UsageError, match="--tz applies only to --cron"):
        update_spec(every, spec_args("--tz", "UTC"))


def test_preview_of_a_jobs_schedule_with_flags_over_it() -> None:
    p = argparse.ArgumentParser()
    add_spec_args(p, schedule_only=True)
    assert preview_spec(p.parse_args(["--tz", "Asia/Tokyo"]), existing()).cron.timezone == "Asia/Tokyo"
    assert preview_spec(p.parse_args(["--every", "1h"])).WhichOneof("schedule") == "every"


def test_where_the_cluster_is_found(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (tmp_path / "proj" / "local-cluster").mkdir(parents=True)
    (tmp_path / "proj" / "sub" / "deeper").mkdir(parents=True)
    config = tmp_path / "proj" / "local-cluster" / "client.toml"
    config.write_text(client_config_text(["127.0.0.1:1", "127.0.0.1:2"], "var/outputs", "secure/ca.crt"))
    env = {"HOME": str(home)}
    deeper = str(tmp_path / "proj" / "sub" / "deeper")
    found = resolve(None, None, env, cwd=deeper)
    assert found.addresses == ["127.0.0.1:1", "127.0.0.1:2"]
    assert found.output_dir == str(tmp_path / "proj" / "local-cluster" / "var" / "outputs")
    assert found.files == {"ca_file": str(tmp_path / "proj" / "local-cluster" / "secure" / "ca.crt")}
    assert found.source.endswith(os.path.join("local-cluster", "client.toml"))
    assert resolve(None, None, env | {"RAFTSCHED_CLUSTER": "h:9"}, cwd=deeper).addresses == ["h:9"]
    assert resolve("a:1,b:2", None, env, cwd=deeper).addresses == ["a:1", "b:2"]
    assert resolve(None, None, env, cwd=str(tmp_path)).addresses == ["127.0.0.1:50051"]  # nothing found: the default
    user = home / ".config" / "raftsched"
    user.mkdir(parents=True)
    (user / "client.toml").write_text('cluster = "u:1, u:2"\n')
    assert resolve(None, None, env, cwd=str(tmp_path)).addresses == ["u:1", "u:2"]
    other = tmp_path / "other.toml"
    other.write_text('cluster = ["o:1"]\n')
    assert resolve(None, None, env | {"RAFTSCHED_CONFIG": str(other)}, cwd=deeper).addresses == ["o:1"]


def test_a_cluster_toml_serves_as_a_client_config(tmp_path: Path) -> None:
    toml = tmp_path / "cluster.toml"
    toml.write_text('[cluster]\ndata_dir = "var"\n\n[[nodes]]\nid = "n1"\nraft = "127.0.0.1:7001"\ngrpc = "127.0.0.1:50051"\n')
    found = resolve(None, str(toml), {})
    assert found.addresses == ["127.0.0.1:50051"] and found.cluster is not None
    assert found.output_dir == str(tmp_path / "var" / "outputs")
    both = resolve("h:1", str(toml), {})
    assert both.addresses == ["h:1"] and both.output_dir == str(tmp_path / "var" / "outputs")


def test_a_bad_client_config_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "client.toml"
    bad.write_text('cluster = ["h:1"]\nclustr = 1\n')
    with pytest.raises(ConfigError, match="unknown key"):
        resolve(None, str(bad), {})
    bad.write_text("cluster = []\n")
    with pytest.raises(ConfigError, match="gRPC addresses"):
        resolve(None, str(bad), {})
    with pytest.raises(ConfigError, match="cannot read"):
        resolve(None, str(tmp_path / "missing.toml"), {})


def test_the_common_flags_may_come_before_the_noun() -> None:
    from raftsched.cluster.app.cli.global_flags import hoist_client_flags
    from raftsched.cluster.app.main import build_parser

    before = ["--cluster", "127.0.0.1:1", "-o", "yaml", "--insecure", "job", "list", "--status", "active"]
    a = build_parser().parse_args(hoist_client_flags(before))
    assert (a.command, a.action, a.status) == ("job", "list", "active")
    assert (a.cluster, a.output, a.insecure) == ("127.0.0.1:1", "yaml", True)
    a = build_parser().parse_args(hoist_client_flags(["--cluster=h:2", "--json", "run", "get", "R1"]))
    assert (a.cluster, a.output, a.run_id) == ("h:2", "json", "R1")
    a = build_parser().parse_args(hoist_client_flags(["--config", "c.toml", "cluster", "status", "--config", "d.toml"]))
    assert a.config == "d.toml"  # given twice: the one after the command wins
    untouched = (["node", "--config", "x", "--node-id", "n1"], ["--cluster", "h:1", "node"], ["job", "--help"], ["--version"])
    for argv in untouched:
        assert hoist_client_flags(argv) == argv


def test_a_command_builds_its_own_arguments_and_still_lists_every_command() -> None:
    """``build_parser(command)`` (what ``main`` uses) lists the same commands with the same help as the whole
    parser, parses its command's flags as the whole parser does, and loads none of the other commands' modules."""
    import subprocess
    import sys

    from raftsched.cluster.app.main import COMMAND_HELP, build_parser

    whole = build_parser()
    for command in [*COMMAND_HELP, "job", "run", "cluster"]:
        assert build_parser(command).format_help() == whole.format_help(), command
    argv = ["executor", "--queue", "q", "--allow-type", "shell", "--grace", "3"]
    assert vars(build_parser("executor").parse_args(argv)) == vars(whole.parse_args(argv))
    probe = (
        "import sys; from raftsched.cluster.app.main import build_parser; build_parser('run'); "
        "print(sorted(m for m in sys.modules if m.startswith(('raftsched.cluster.executor', 'raftsched.cluster.app.pki', "
        "'raftsched.cluster.node.explain', 'cryptography', 'importlib.metadata'))))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
