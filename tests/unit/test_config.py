"""Tests for raftsched.cluster.node.config: parsing and validating cluster.toml."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raftsched.cluster.node.config import (
    ClusterConfig,
    ConfigError,
    LogsConfig,
    RaftTuning,
    SchedulerConfig,
    check_private_file,
    is_loopback,
    load_config,
    parse_config,
)

pytestmark = pytest.mark.unit

NODES = """
[[nodes]]
id = "n1"
raft = "127.0.0.1:7001"
grpc = "127.0.0.1:50051"

[[nodes]]
id = "n2"
raft = "127.0.0.1:7002"
grpc = "127.0.0.1:50052"

[[nodes]]
id = "n3"
raft = "127.0.0.1:7003"
grpc = "127.0.0.1:50053"
"""


def node(i: int, raft: str | None = None, grpc: str | None = None, node_id: str | None = None) -> str:
    return (
        f'[[nodes]]\nid = "{node_id or f"n{i}"}"\n'
        f'raft = "{raft or f"127.0.0.1:{7000 + i}"}"\ngrpc = "{grpc or f"127.0.0.1:{50050 + i}"}"\n'
    )


def parse(text: str, tmp_path: Path) -> ClusterConfig:
    return parse_config(text, str(tmp_path / "conf" / "cluster.toml"))


# ------------------------------------------------------------------ happy path


def test_full_config_parses(tmp_path: Path) -> None:
    text = (
        """
[cluster]
data_dir = "var"
secret_file = "raft.secret"

[logs]
store = "s3"
bucket = "runs"
prefix = "p"
endpoint_url = "http://127.0.0.1:9000"
region = "eu-west-1"

[scheduler]
fire_lookahead_s = 0.2
misfire_threshold_s = 10
fire_batch = 500
max_payload_bytes = 4096
request_timeout_s = 2.5

[raft]
raft_min_timeout = 1.0
raft_max_timeout = 2.0
snapshot_min_entries = 1000
"""
        + NODES
    )
    path = tmp_path / "conf" / "cluster.toml"
    cfg = parse_config(text, str(path))
    base = str(tmp_path / "conf")
    assert cfg.path == str(path)
    assert cfg.data_dir == os.path.join(base, "var")
    assert cfg.secret_file == os.path.join(base, "raft.secret")
    assert [n.id for n in cfg.nodes] == ["n1", "n2", "n3"]
    assert cfg.node("n2").raft == "127.0.0.1:7002" and cfg.node("n2").grpc == "127.0.0.1:50052"
    assert cfg.grpc_addresses() == ["127.0.0.1:50051", "127.0.0.1:50052", "127.0.0.1:50053"]
    assert cfg.node_dir("n3") == os.path.join(base, "var", "n3")
    assert cfg.logs == LogsConfig("s3", "runs", "p", "http://127.0.0.1:9000", "eu-west-1")
    assert cfg.scheduler == SchedulerConfig(0.2, 10, 500, 4096, 2.5)
    assert cfg.raft.raft_min_timeout == 1.0 and cfg.raft.snapshot_min_entries == 1000
    assert cfg.raft.append_entries_period == RaftTuning().append_entries_period


def test_defaults(tmp_path: Path) -> None:
    cfg = parse(NODES, tmp_path)
    assert cfg.data_dir == str(tmp_path / "conf" / "var")
    assert cfg.secret_file is None
    assert cfg.logs == LogsConfig()
    assert cfg.scheduler == SchedulerConfig()
    assert cfg.raft == RaftTuning()
    assert cfg.read_secret() is None  # every address is loopback


def test_relative_paths_resolve_against_the_config_directory_not_the_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf_dir = tmp_path / "etc" / "raftsched"
    conf_dir.mkdir(parents=True)
    path = conf_dir / "cluster.toml"
    path.write_text('[cluster]\ndata_dir = "data/nodes"\nsecret_file = "keys/raft.secret"\n' + NODES)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(str(path))
    assert cfg.data_dir == str(conf_dir / "data" / "nodes")
    assert cfg.secret_file == str(conf_dir / "keys" / "raft.secret")
    # a relative config path works too
    monkeypatch.chdir(tmp_path)
    cfg = load_config(os.path.join("etc", "raftsched", "cluster.toml"))
    assert cfg.data_dir == str(conf_dir / "data" / "nodes")


def test_absolute_paths_are_kept(tmp_path: Path) -> None:
    data, secret = str(tmp_path / "abs-data"), str(tmp_path / "abs.secret")
    cfg = parse(f'[cluster]\ndata_dir = "{data}"\nsecret_file = "{secret}"\n' + NODES, tmp_path)
    assert cfg.data_dir == data and cfg.secret_file == secret


def test_empty_secret_file_means_none(tmp_path: Path) -> None:
    assert parse('[cluster]\nsecret_file = ""\n' + NODES, tmp_path).secret_file is None


def test_unknown_node_id_names_the_known_ones(tmp_path: Path) -> None:
    cfg = parse(NODES, tmp_path)
    with pytest.raises(ConfigError, match=r"'n9'.*n1, n2, n3"):
        cfg.node("n9")


def test_load_config_of_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(str(tmp_path / "nope.toml"))


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    "text, match",
    [
        ("this is = = not toml", "not valid TOML"),
        ("", r"at least one \[\[nodes\]\]"),
        ("[cluster]\ndata_dir = 'var'\n", r"at least one \[\[nodes\]\]"),
        ("nodes = []\n", r"at least one \[\[nodes\]\]"),
        ("nodes = 'n1'\n", r"at least one \[\[nodes\]\]"),
        ('[[nodes]]\nraft = "127.0.0.1:1"\ngrpc = "127.0.0.1:2"\n', "entry 1 needs a non-empty string id"),
        (node(1) + '[[nodes]]\nid = ""\nraft = "127.0.0.1:1"\ngrpc = "127.0.0.1:2"\n', "entry 2 needs"),
        (node(1) + node(2, node_id="n1"), "duplicate node id: n1"),
        (node(1) + node(2, raft="127.0.0.1:7001"), "duplicate node raft: 127.0.0.1:7001"),
        (node(1) + node(2, grpc="127.0.0.1:50051"), "duplicate node grpc: 127.0.0.1:50051"),
        (node(1, raft="127.0.0.1"), "node n1 raft must be 'host:port'"),
        (node(1, grpc="localhost"), "node n1 grpc must be 'host:port'"),
        (node(1, raft="127.0.0.1:http"), "node n1 raft has a bad port"),
        (node(1, raft="127.0.0.1:0"), "bad port"),
        (node(1, grpc="127.0.0.1:65536"), "node n1 grpc has a bad port"),
        (node(1, raft="127.0.0.1:-5"), "bad port"),
        ('[[nodes]]\nid = "n1"\ngrpc = "127.0.0.1:2"\n', "node n1 raft must be 'host:port', got None"),
        ('[[nodes]]\nid = "n1"\nraft = 7001\ngrpc = "127.0.0.1:2"\n', "node n1 raft must be 'host:port', got 7001"),
        ("[scheduler]\nfire_batchsize = 5\n" + NODES, r"unknown key\(s\) in \[scheduler\]: fire_batchsize"),
        ("[raft]\nelection_timeout = 1\n" + NODES, r"unknown key\(s\) in \[raft\]: election_timeout"),
        ("[logs]\nbuckets = 'x'\n" + NODES, r"unknown key\(s\) in \[logs\]: buckets \(known: bucket,"),
        ("scheduler = 5\n" + NODES, r"\[scheduler\] must be a table"),
        ("[logs]\nstore = 's3'\n" + NODES, "store = 's3' needs a bucket"),
        ("[logs]\nstore = 's3'\nbucket = ''\n" + NODES, "needs a bucket"),
        ("[logs]\nstore = 'ftp'\n" + NODES, "store must be 'local' or 's3', got 'ftp'"),
        ("cluster = 5\n" + NODES, r"\[cluster\] must be a table"),
        ("[cluster]\nsecret-file = 'raft.secret'\n" + NODES, r"unknown key\(s\) in \[cluster\]: secret-file"),
        ("[cluster]\ndata_dir = 5\n" + NODES, r"\[cluster\] data_dir must be a str, got 5"),
        ("[scheduler]\nfire_batch = '100'\n" + NODES, r"\[scheduler\] fire_batch must be a int, got '100'"),
        ("[scheduler]\nfire_batch = 1.5\n" + NODES, r"fire_batch must be a int"),
        ("[scheduler]\nmisfire_threshold_s = true\n" + NODES, r"misfire_threshold_s must be a float, got True"),
        ("[raft]\nraft_min_timeout = 'fast'\n" + NODES, r"\[raft\] raft_min_timeout must be a float"),
        ("[logs]\nstore = 's3'\nbucket = 5\n" + NODES, r"\[logs\] bucket must be a str, got 5"),
        (node(1, raft=":7001"), "node n1 raft has no host in ':7001'"),
        (node(1, grpc="[]:50051"), "node n1 grpc has no host"),
        ("[scheduler]\nfire_batch = 0\n" + NODES, "must be positive"),
        ("[scheduler]\nmax_payload_bytes = -1\n" + NODES, "must be positive"),
        ("[scheduler]\nrequest_timeout_s = 0\n" + NODES, "must be positive"),
        (
            node(1) + 'raft_lisen = "0.0.0.0:7001"\n',
            r"unknown key\(s\) in the \[\[nodes\]\] table of n1: raft_lisen \(known: id, raft",
        ),
        (node(1) + 'raft_listen = "0.0.0.0"\n', "node n1 raft_listen must be 'host:port'"),
        (node(1) + "grpc_listen = 50051\n", "node n1 grpc_listen must be 'host:port'"),
        (node(1) + 'http_listen = "127.0.0.1:8081"\n', "node n1 has http_listen but no http address"),
        (node(1) + 'http = "127.0.0.1:8081"\n' + node(2) + 'http = "127.0.0.1:8081"\n', "duplicate node http: 127.0.0.1:8081"),
        ("[raft]\nmax_log_bytes = 1000\n" + NODES, r"\[raft\] max_log_bytes must be at least 67108864"),
        ("[raft]\nfsync = 1\n" + NODES, r"\[raft\] fsync must be true or false, got 1"),
    ],
)
def test_bad_configs_are_refused_naming_file_and_key(text: str, match: str, tmp_path: Path) -> None:
    path = str(tmp_path / "bad.toml")
    with pytest.raises(ConfigError, match=match) as info:
        parse_config(text, path)
    assert str(info.value).startswith(path + ":")


def test_integers_are_accepted_for_float_settings(tmp_path: Path) -> None:
    cfg = parse("[scheduler]\nmisfire_threshold_s = 3\n[raft]\nraft_max_timeout = 2\n" + NODES, tmp_path)
    assert cfg.scheduler.misfire_threshold_s == 3 and cfg.raft.raft_max_timeout == 2


def test_s3_with_a_bucket_is_fine(tmp_path: Path) -> None:
    cfg = parse("[logs]\nstore = 's3'\nbucket = 'b'\n" + NODES, tmp_path)
    assert cfg.logs.store == "s3" and cfg.logs.bucket == "b" and cfg.logs.prefix == "raftsched"


# ------------------------------------------------------------------ the Raft secret


@pytest.mark.parametrize(
    "raft",
    ["10.0.0.5:7001", "0.0.0.0:7001", "node-a.internal:7001", "[2001:db8::1]:7001", "192.168.1.2:7001"],
)
def test_secret_is_required_off_loopback(raft: str, tmp_path: Path) -> None:
    cfg = parse(node(1) + node(2, raft=raft), tmp_path)
    with pytest.raises(ConfigError, match="secret_file") as info:
        cfg.read_secret()
    assert raft in str(info.value)
    assert "127.0.0.1:7001" not in str(info.value)


@pytest.mark.parametrize("raft", ["127.0.0.1:7001", "127.5.6.7:7001", "localhost:7001", "[::1]:7001"])
def test_loopback_runs_without_a_secret(raft: str, tmp_path: Path) -> None:
    assert is_loopback(raft)
    assert parse(node(1, raft=raft), tmp_path).read_secret() is None


def test_secret_is_read_and_stripped(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "raft.secret").write_text("  0123456789abcdef-long-enough \n")
    (conf / "raft.secret").chmod(0o600)
    cfg = parse('[cluster]\nsecret_file = "raft.secret"\n' + node(1, raft="10.0.0.1:7001"), tmp_path)
    assert cfg.read_secret() == "0123456789abcdef-long-enough"


def test_short_secret_is_refused(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "raft.secret").write_text("hunter2\n")
    (conf / "raft.secret").chmod(0o600)
    cfg = parse('[cluster]\nsecret_file = "raft.secret"\n' + NODES, tmp_path)
    with pytest.raises(ConfigError, match="under 16 characters"):
        cfg.read_secret()


def test_missing_secret_file_is_refused(tmp_path: Path) -> None:
    cfg = parse('[cluster]\nsecret_file = "nope.secret"\n' + NODES, tmp_path)
    with pytest.raises(ConfigError, match="cannot read secret_file .*nope.secret"):
        cfg.read_secret()


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o622])
def test_a_secret_others_can_read_is_refused_with_the_fix(mode: int, tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    secret = conf / "raft.secret"
    secret.write_text("0123456789abcdef-long-enough\n")
    secret.chmod(mode)
    cfg = parse('[cluster]\nsecret_file = "raft.secret"\n' + NODES, tmp_path)
    with pytest.raises(ConfigError, match=f"readable by other users \\(mode {mode:04o}\\).*chmod 600 {secret}"):
        cfg.read_secret()
    secret.chmod(0o400)
    assert cfg.read_secret() == "0123456789abcdef-long-enough"


def test_check_private_file_names_the_setting(tmp_path: Path) -> None:
    key = tmp_path / "node.key"
    key.write_text("-----BEGIN PRIVATE KEY-----\n")
    key.chmod(0o644)
    with pytest.raises(ConfigError, match=rf"^cluster.toml: \[tls\] key_file {key} is readable by other users.*chmod 600 {key}$"):
        check_private_file(str(key), "cluster.toml: [tls] key_file")
    key.chmod(0o600)
    check_private_file(str(key), "cluster.toml: [tls] key_file")
    check_private_file(str(tmp_path / "missing"), "x")  # the caller's own read reports a missing file


# ------------------------------------------------------------------ where a node listens


def test_listen_addresses_default_to_the_advertised_ones(tmp_path: Path) -> None:
    n = parse(NODES, tmp_path).node("n1")
    assert (n.raft_listen, n.grpc_listen, n.http, n.http_listen) == ("127.0.0.1:7001", "127.0.0.1:50051", "", "")


def test_listen_addresses_and_http_are_parsed(tmp_path: Path) -> None:
    text = (
        '[cluster]\nsecret_file = "s"\n'
        + node(1, raft="10.0.0.1:7001", grpc="10.0.0.1:50051")
        + 'http = "10.0.0.1:8081"\nraft_listen = "0.0.0.0:7001"\ngrpc_listen = "0.0.0.0:50051"\nhttp_listen = "0.0.0.0:8081"\n'
        + node(2, raft="10.0.0.2:7001", grpc="10.0.0.2:50051")
        + 'raft_listen = "0.0.0.0:7001"\n'  # the same listen address on two machines is fine
    )
    cfg = parse(text, tmp_path)
    n1, n2 = cfg.node("n1"), cfg.node("n2")
    assert (n1.raft, n1.raft_listen, n1.grpc_listen, n1.http, n1.http_listen) == (
        "10.0.0.1:7001",
        "0.0.0.0:7001",
        "0.0.0.0:50051",
        "10.0.0.1:8081",
        "0.0.0.0:8081",
    )
    assert (n2.raft_listen, n2.grpc_listen, n2.http) == ("0.0.0.0:7001", "10.0.0.2:50051", "")


def test_a_listen_address_off_loopback_needs_a_secret(tmp_path: Path) -> None:
    cfg = parse(node(1) + 'raft_listen = "0.0.0.0:7001"\n' + node(2), tmp_path)
    with pytest.raises(ConfigError, match="secret_file is required.*0.0.0.0:7001"):
        cfg.read_secret()


def test_durable_by_default(tmp_path: Path) -> None:
    cfg = parse(NODES, tmp_path)
    assert cfg.raft.fsync is True and cfg.raft.max_log_bytes == 8 << 30
    assert parse("[raft]\nfsync = false\nmax_log_bytes = 1073741824\n" + NODES, tmp_path).raft.max_log_bytes == 1 << 30
