"""The data dir's identity and the membership a node starts with (raftsched.cluster.app.data_dir, raftsched.cluster.app.node_boot)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import grpc
import pytest

from raftsched.cluster.app import node_boot
from raftsched.cluster.app.data_dir import (
    Identity,
    ensure_identity,
    mark_removed,
    read_identity,
    record_membership,
    write_identity,
)
from raftsched.cluster.domain.model import Member
from raftsched.cluster.node.config import ClusterConfig, ConfigError, parse_config

pytestmark = pytest.mark.unit


def config(tmp_path: Path, nodes: list[tuple[str, int]], extra: str = "") -> ClusterConfig:
    text = '[cluster]\ndata_dir = "var"\n'
    for node_id, port in nodes:
        text += f'\n[[nodes]]\nid = "{node_id}"\nraft = "127.0.0.1:{port}"\ngrpc = "127.0.0.1:{port + 1000}"\n'
    path = tmp_path / "cluster.toml"
    path.write_text(text + extra)
    return parse_config(path.read_text(), str(path))


def m(node_id: str, port: int) -> Member:
    return Member(node_id, f"127.0.0.1:{port}", f"127.0.0.1:{port + 1000}")


THREE = [("n1", 7001), ("n2", 7002), ("n3", 7003)]


def node_dir(cfg: ClusterConfig, node_id: str) -> str:
    path = cfg.node_dir(node_id)
    os.makedirs(path, exist_ok=True)
    return path


def test_a_new_data_dir_records_its_node_and_the_first_membership(tmp_path: Path) -> None:
    cfg = config(tmp_path, THREE)
    ident = ensure_identity(node_dir(cfg, "n1"), "n1", cfg)
    assert ident == Identity("n1", ("127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"))
    raw = json.loads((tmp_path / "var" / "n1" / "NODE").read_text())
    assert raw == {"node_id": "n1", "members": ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"]}  # what older versions read
    assert os.stat(tmp_path / "var" / "n1" / "NODE").st_mode & 0o077 == 0


def test_membership_changes_from_the_log_are_accepted_and_recorded(tmp_path: Path) -> None:
    cfg = config(tmp_path, THREE)
    path = node_dir(cfg, "n1")
    ensure_identity(path, "n1", cfg)
    now = (m("n1", 7001), m("n2", 7002), m("n4", 7004))
    record_membership(path, now)
    assert read_identity(path).membership == now  # type: ignore[union-attr]
    # the old config (the first membership) is still this cluster's
    assert ensure_identity(path, "n1", cfg).membership == now
    # and so is a config that lists the members as they are now
    assert ensure_identity(path, "n1", config(tmp_path, [("n1", 7001), ("n2", 7002), ("n4", 7004)])).membership == now


def test_another_clusters_data_dir_is_refused(tmp_path: Path) -> None:
    cfg = config(tmp_path, THREE)
    path = node_dir(cfg, "n1")
    write_identity(path, Identity("n1", ("10.1.1.1:7001", "10.1.1.2:7001")))
    with pytest.raises(ConfigError, match="another cluster's data") as err:
        ensure_identity(path, "n1", cfg)
    assert "10.1.1.1:7001" in str(err.value)


def test_another_nodes_data_dir_is_refused(tmp_path: Path) -> None:
    cfg = config(tmp_path, THREE)
    path = node_dir(cfg, "n1")
    write_identity(path, Identity("n2", ()))
    with pytest.raises(ConfigError, match="belongs to node 'n2', not 'n1'"):
        ensure_identity(path, "n1", cfg)


def test_a_removed_members_data_dir_is_refused_naming_why(tmp_path: Path) -> None:
    cfg = config(tmp_path, THREE)
    path = node_dir(cfg, "n1")
    ensure_identity(path, "n1", cfg)
    mark_removed(path, "node n1 (raft 127.0.0.1:7001) was removed from the cluster by RemoveNode")
    with pytest.raises(ConfigError) as err:
        ensure_identity(path, "n1", cfg)
    text = str(err.value)
    assert "was removed from its cluster" in text and "RemoveNode" in text and "--join" in text


def test_raft_files_without_an_identity_are_refused(tmp_path: Path) -> None:
    cfg = config(tmp_path, THREE)
    path = node_dir(cfg, "n1")
    Path(path, "raft.snapshot").write_bytes(b"x")
    with pytest.raises(ConfigError, match="no NODE file"):
        ensure_identity(path, "n1", cfg)


def test_boot_starts_with_the_recorded_membership_not_the_config(tmp_path: Path) -> None:
    cfg = config(tmp_path, THREE, extra="")
    path = node_dir(cfg, "n1")
    ensure_identity(path, "n1", cfg)
    assert [n.id for n in node_boot.prepare(cfg, "n1", []).cfg.nodes] == ["n1", "n2", "n3"]  # first start: [[nodes]]
    record_membership(path, (m("n1", 7001), m("n2", 7002), m("n4", 7004)))
    boot = node_boot.prepare(cfg, "n1", ["127.0.0.1:1"])  # --join is ignored once the membership is recorded
    assert [(n.id, n.raft) for n in boot.cfg.nodes] == [
        ("n1", "127.0.0.1:7001"),
        ("n2", "127.0.0.1:7002"),
        ("n4", "127.0.0.1:7004"),
    ]
    assert [s.node_id for s in boot.seed] == ["n1", "n2", "n3"]  # a leader seeds an unrecorded state from [[nodes]]


def test_boot_takes_listen_addresses_from_the_config(tmp_path: Path) -> None:
    config(tmp_path, THREE)
    text = (
        (tmp_path / "cluster.toml")
        .read_text()
        .replace('grpc = "127.0.0.1:8001"', 'grpc = "127.0.0.1:8001"\ngrpc_listen = "0.0.0.0:8001"\nhttp = "127.0.0.1:9001"', 1)
    )
    cfg = parse_config(text, str(tmp_path / "cluster.toml"))
    boot = node_boot.prepare(cfg, "n1", [])
    n1 = boot.cfg.node("n1")
    assert (n1.grpc, n1.grpc_listen, n1.http) == ("127.0.0.1:8001", "0.0.0.0:8001", "127.0.0.1:9001")


def test_boot_refuses_a_node_that_is_not_a_member(tmp_path: Path) -> None:
    cfg = config(tmp_path, THREE)
    with pytest.raises(ConfigError, match="n9"):
        node_boot.prepare(cfg, "n9", [])
    assert not os.path.exists(cfg.node_dir("n9"))  # refused before anything was created
    path = node_dir(cfg, "n3")
    ensure_identity(path, "n3", cfg)
    record_membership(path, (m("n1", 7001), m("n2", 7002)))  # n3 was removed while it was away
    with pytest.raises(ConfigError, match="not a member of its cluster .*add-node"):
        node_boot.prepare(cfg, "n3", [])


def test_boot_refuses_a_config_that_moved_a_member(tmp_path: Path) -> None:
    cfg = config(tmp_path, THREE)
    path = node_dir(cfg, "n1")
    ensure_identity(path, "n1", cfg)
    record_membership(path, (m("n1", 7101), m("n2", 7002), m("n3", 7003)))
    with pytest.raises(ConfigError, match="change only by removing it and adding it again"):
        node_boot.prepare(cfg, "n1", [])


def test_join_asks_until_a_node_lists_this_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config(tmp_path, THREE)
    answers = iter([(), (m("n1", 7001), m("n2", 7002), m("n3", 7003), m("n4", 7004))])
    monkeypatch.setattr(node_boot, "ask_membership", lambda addrs, node_id, sec: (next(answers) or next(answers), 77))
    boot = node_boot.prepare(cfg, "n4", ["127.0.0.1:8001"])
    assert [n.id for n in boot.cfg.nodes] == ["n1", "n2", "n3", "n4"] and boot.hold_until_index == 77
    assert boot.joined and boot.cfg.node("n4").raft_listen == "127.0.0.1:7004"
    ensure_identity(node_dir(boot.cfg, "n4"), "n4", cfg, boot.joined)
    assert read_identity(cfg.node_dir("n4")).membership == boot.joined  # type: ignore[union-attr]


class _Refused(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAUTHENTICATED

    def details(self) -> str:
        return "no token: send metadata 'authorization: Bearer <token>'"


class _RefusingChannel:
    """A channel whose every call is refused for want of a token, as a node under [auth] answers."""

    def __enter__(self) -> "_RefusingChannel":
        return self

    def __exit__(self, *exc: object) -> None: ...

    def unary_unary(self, *args: object, **kwargs: object) -> object:
        def call(*a: object, **k: object) -> None:
            raise _Refused()

        return call

    unary_stream = unary_unary


def test_join_refused_for_its_token_stops_at_once_saying_which_token_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_boot, "open_channel", lambda address, security: _RefusingChannel())
    monkeypatch.setattr(node_boot, "JOIN_TIMEOUT_S", 60.0)
    with pytest.raises(ConfigError) as info:
        node_boot.ask_membership(["10.0.0.1:50051"], "n4", None)
    text = str(info.value)
    assert "cannot join through 10.0.0.1:50051: UNAUTHENTICATED: no token" in text
    assert "--token-file" in text and "reader role" in text
