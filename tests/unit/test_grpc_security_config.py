"""[tls], [auth] and allow_insecure_grpc in cluster.toml; the node's refusal to serve gRPC off loopback
without both; the TLS file checks; the clients' flags, environment and config. No traffic: every
address here is only parsed, never bound or dialled."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

import pytest

from raftsched.cluster.app.client_security import security_from_args
from raftsched.cluster.app.node_main import grpc_security
from raftsched.cluster.app.pki import issue, make_ca
from raftsched.cluster.node.config import ClusterConfig, ConfigError, TlsConfig, parse_config
from raftsched.rpc.client.channel import ChannelSecurity, PlaintextToken, open_channel
from raftsched.rpc.server.tls import host_warnings, server_credentials

pytestmark = pytest.mark.unit

TLS = '[tls]\ncert_file = "certs/{node_id}.crt"\nkey_file = "certs/{node_id}.key"\nca_file = "certs/ca.crt"\n'
AUTH = '[auth]\ntokens_file = "tokens.toml"\n'


def conf(tmp_path: Path, grpc: str = "127.0.0.1:50051", extra: str = "", cluster: str = "") -> ClusterConfig:
    text = f'[cluster]\n{cluster}\n[[nodes]]\nid = "n1"\nraft = "127.0.0.1:7001"\ngrpc = "{grpc}"\n\n{extra}'
    return parse_config(text, str(tmp_path / "etc" / "cluster.toml"))


def test_tls_and_auth_parse_with_paths_from_the_config_directory(tmp_path: Path) -> None:
    cfg = conf(tmp_path, extra=TLS + "client_auth = true\n\n" + AUTH)
    etc = str(tmp_path / "etc")
    assert cfg.tls == TlsConfig(f"{etc}/certs/{{node_id}}.crt", f"{etc}/certs/{{node_id}}.key", f"{etc}/certs/ca.crt", True)
    assert cfg.tls.for_node("n1").cert_file == f"{etc}/certs/n1.crt" and cfg.tls.for_node("n1").key_file.endswith("n1.key")
    assert cfg.auth.tokens_file == f"{etc}/tokens.toml"
    plain = conf(tmp_path)
    assert plain.tls is None and plain.auth.tokens_file == "" and not plain.allow_insecure_grpc


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ('[tls]\ncert_file = "a.crt"\n', "\\[tls\\] needs cert_file and key_file"),
        ('[tls]\ncert_file = "a.crt"\nkey_file = "a.key"\nclient_auth = true\n', "client_auth = true needs ca_file"),
        (TLS + "client_auth = 1\n", "\\[tls\\] client_auth must be true or false"),
        (TLS + 'verify = "no"\n', "unknown key\\(s\\) in \\[tls\\]: verify"),
        ("[auth]\ntokens_file = 3\n", "\\[auth\\] tokens_file must be a str"),
        ('[auth]\ntokens = "t.toml"\n', "unknown key\\(s\\) in \\[auth\\]: tokens"),
    ],
)
def test_bad_tls_and_auth_sections(tmp_path: Path, extra: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        conf(tmp_path, extra=extra)


def test_allow_insecure_grpc_must_be_a_bool(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="allow_insecure_grpc must be true or false"):
        conf(tmp_path, cluster='allow_insecure_grpc = "yes"')


# ------------------------------------------------------------ refusing to start


@pytest.mark.parametrize("grpc", ["127.0.0.1:50051", "localhost:50051", "[::1]:50051"])
def test_loopback_needs_nothing(tmp_path: Path, grpc: str) -> None:
    assert conf(tmp_path, grpc).check_grpc_exposure("n1") is None


@pytest.mark.parametrize(
    ("extra", "missing"),
    [
        ("", "without \\[tls\\] and without \\[auth\\] tokens_file"),
        (TLS, "without \\[auth\\] tokens_file"),
        (AUTH, "without \\[tls\\]:"),
    ],
)
@pytest.mark.parametrize("grpc", ["10.0.0.1:50051", "0.0.0.0:50051", "node1.example.com:50051"])
def test_off_loopback_a_node_refuses_without_tls_and_auth(tmp_path: Path, grpc: str, extra: str, missing: str) -> None:
    cfg = conf(tmp_path, grpc, extra)
    with pytest.raises(ConfigError, match=f"node n1 would serve gRPC on {grpc}, which is not loopback, {missing}") as info:
        cfg.check_grpc_exposure("n1")
    assert "allow_insecure_grpc" in str(info.value) and "docs/config.md" in str(info.value)
    assert conf(tmp_path, grpc, TLS + AUTH).check_grpc_exposure("n1") is None


def test_allow_insecure_grpc_is_a_warning(tmp_path: Path) -> None:
    warning = conf(tmp_path, "10.0.0.1:50051", AUTH, "allow_insecure_grpc = true").check_grpc_exposure("n1")
    assert warning is not None and "allow_insecure_grpc = true" in warning and "10.0.0.1:50051" in warning
    assert "without [tls]" in warning
    moot = conf(tmp_path, "10.0.0.1:50051", TLS + AUTH, "allow_insecure_grpc = true").check_grpc_exposure("n1")
    assert moot is not None and "has no effect" in moot


def test_the_node_logs_the_warning_at_every_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = conf(tmp_path, "10.0.0.1:50051", cluster="allow_insecure_grpc = true")
    for _ in range(2):
        with caplog.at_level(logging.WARNING, logger="raftsched.node"):
            assert grpc_security(cfg, "n1") == (None, None)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "allow_insecure_grpc = true" in r.getMessage()]
    assert len(warnings) == 2
    with pytest.raises(ConfigError, match="not loopback"):
        grpc_security(conf(tmp_path, "10.0.0.1:50051"), "n1")


# ------------------------------------------------------------------ TLS files


def _pki(tmp_path: Path, hosts: tuple[str, ...] = ("127.0.0.1",)) -> TlsConfig:
    ca = make_ca()
    ca.write_cert(str(tmp_path / "ca.crt"))
    issue(ca, "n1", hosts).write(str(tmp_path / "n1.crt"), str(tmp_path / "n1.key"))
    return TlsConfig(str(tmp_path / "n1.crt"), str(tmp_path / "n1.key"), str(tmp_path / "ca.crt"), True)


def test_server_credentials_check_the_files(tmp_path: Path) -> None:
    tls = _pki(tmp_path)
    assert oct(os.stat(tls.key_file).st_mode & 0o777) == "0o600"
    assert server_credentials(tls) is not None
    os.chmod(tls.key_file, 0o640)
    with pytest.raises(ConfigError, match="\\[tls\\] key_file .* readable by other users"):
        server_credentials(tls)
    os.chmod(tls.key_file, 0o600)
    issue(make_ca(), "other", ("127.0.0.1",)).write(str(tmp_path / "o.crt"), str(tmp_path / "o.key"))
    with pytest.raises(ConfigError, match="is not the key of cert_file"):
        server_credentials(TlsConfig(str(tmp_path / "o.crt"), tls.key_file))
    (tmp_path / "bad.crt").write_text("not a certificate")
    with pytest.raises(ConfigError, match="bad.crt is not a PEM certificate"):
        server_credentials(TlsConfig(str(tmp_path / "bad.crt"), tls.key_file))
    with pytest.raises(ConfigError, match="cannot read \\[tls\\] cert_file .*missing.crt"):
        server_credentials(TlsConfig(str(tmp_path / "missing.crt"), tls.key_file))


def test_a_certificate_that_does_not_name_the_address_is_reported(tmp_path: Path) -> None:
    tls = _pki(tmp_path, ("10.0.0.1", "node1.example.com"))
    assert host_warnings(tls, "10.0.0.1:50051") == [] and host_warnings(tls, "node1.example.com:1") == []
    (warning,) = host_warnings(tls, "10.0.0.2:50051")
    assert "does not name 10.0.0.2" in warning


# ------------------------------------------------------------------ clients


def _args(**kw: str) -> argparse.Namespace:
    return argparse.Namespace(**{"ca_file": None, "cert_file": None, "key_file": None, "token_file": None, **kw})


def test_client_settings_flag_then_environment_then_config(tmp_path: Path) -> None:
    tls = _pki(tmp_path)
    other = tmp_path / "other-ca.crt"
    make_ca().write_cert(str(other))
    token_file = tmp_path / "t.token"
    token_file.write_text("from-file\n")
    os.chmod(token_file, 0o600)
    cfg = conf(tmp_path, extra=f'[tls]\ncert_file = "x"\nkey_file = "y"\nca_file = "{tls.ca_file}"\n')
    ca_pem, other_pem = Path(tls.ca_file).read_bytes(), other.read_bytes()

    from_cfg = security_from_args(_args(), cfg, {})
    assert from_cfg.tls and from_cfg.root_certificates == ca_pem and from_cfg.token == ""
    env = {"RAFTSCHED_CA_FILE": str(other), "RAFTSCHED_TOKEN": "from-env", "RAFTSCHED_TOKEN_FILE": str(token_file)}
    from_env = security_from_args(_args(), cfg, env)
    assert from_env.root_certificates == other_pem and from_env.token == "from-file"
    assert security_from_args(_args(), None, {"RAFTSCHED_TOKEN": " from-env "}).token == "from-env"
    flags = security_from_args(_args(ca_file=tls.ca_file, cert_file=tls.cert_file, key_file=tls.key_file), None, env)
    assert flags.root_certificates == ca_pem and flags.private_key == Path(tls.key_file).read_bytes()
    assert not security_from_args(_args(), None, {}).tls


def test_client_files_are_checked(tmp_path: Path) -> None:
    tls = _pki(tmp_path)
    token_file = tmp_path / "t.token"
    token_file.write_text("secret\n")
    os.chmod(token_file, 0o644)
    with pytest.raises(ConfigError, match="token file .* readable by other users"):
        security_from_args(_args(token_file=str(token_file)), None, {})
    os.chmod(token_file, 0o600)
    token_file.write_text("two tokens\n")
    with pytest.raises(ConfigError, match="must hold exactly one token"):
        security_from_args(_args(token_file=str(token_file)), None, {})
    with pytest.raises(ConfigError, match="needs both a certificate file and a key file"):
        security_from_args(_args(ca_file=tls.ca_file, cert_file=tls.cert_file), None, {})
    with pytest.raises(ConfigError, match="cannot read the CA file .*nope.crt"):
        security_from_args(_args(ca_file=str(tmp_path / "nope.crt")), None, {})


def test_a_token_never_goes_in_the_clear_off_loopback(tmp_path: Path) -> None:
    env = {"RAFTSCHED_TOKEN": "s3cret"}
    with pytest.raises(PlaintextToken) as info:
        security_from_args(_args(), None, env, None, ["127.0.0.1:50051", "10.0.0.1:50051", "n3.example.com:50051"])
    message = str(info.value)
    assert "without TLS to 10.0.0.1:50051, n3.example.com:50051, which is not loopback" in message
    assert "--ca-file" in message and "RAFTSCHED_CA_FILE" in message and "--insecure" in message
    assert isinstance(info.value, ConfigError)  # the command line says it and exits 2
    for local in (["127.0.0.1:50051", "localhost:50052", "[::1]:50053"], ["unix:/run/raftsched.sock"]):
        assert security_from_args(_args(), None, env, None, local).token == "s3cret"
    assert security_from_args(_args(), None, {}, None, ["10.0.0.1:50051"]).token == ""  # no token: nothing to leak
    told = security_from_args(argparse.Namespace(insecure=True), None, env, None, ["10.0.0.1:50051"])
    assert told.insecure and told.token == "s3cret"
    tls = _pki(tmp_path)
    assert security_from_args(_args(ca_file=tls.ca_file), None, env, None, ["10.0.0.1:50051"]).tls
    trusting = conf(tmp_path, "10.0.0.1:50051", AUTH, "allow_insecure_grpc = true")  # the cluster itself says so
    assert security_from_args(_args(), trusting, env, None, ["10.0.0.1:50051"]).insecure


def test_every_channel_refuses_a_plaintext_token_off_loopback() -> None:
    """Clients built without the command line's flags (executors, nodes joining, programs) are held too."""
    with pytest.raises(PlaintextToken, match="10.0.0.1:50051"):
        open_channel("10.0.0.1:50051", ChannelSecurity(token="s3cret"))
    open_channel("127.0.0.1:50051", ChannelSecurity(token="s3cret")).close()
    open_channel("10.0.0.1:50051", ChannelSecurity(token="s3cret", insecure=True)).close()
    open_channel("10.0.0.1:50051", ChannelSecurity()).close()


def test_the_command_line_stops_before_sending_a_token_in_the_clear(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from raftsched.cluster.app.main import main

    monkeypatch.setenv("RAFTSCHED_TOKEN", "s3cret")
    monkeypatch.delenv("RAFTSCHED_CA_FILE", raising=False)
    assert main(["job", "list", "--cluster", "192.0.2.1:50051"]) == 2  # TEST-NET-1: never dialled
    err = capsys.readouterr().err
    assert "refusing to send the bearer token without TLS to 192.0.2.1:50051" in err and "--ca-file" in err
    assert "s3cret" not in err


def test_an_executor_stops_before_sending_a_token_in_the_clear(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The executor names the address and the fix, as the other commands do, rather than failing later."""
    from raftsched.cluster.app.main import main

    monkeypatch.setenv("RAFTSCHED_TOKEN", "s3cret")
    monkeypatch.delenv("RAFTSCHED_CA_FILE", raising=False)
    args = ["executor", "--cluster", "192.0.2.1:50051", "--executor-id", "e1", "--output-dir", str(tmp_path)]
    assert main(args) == 2  # TEST-NET-1: never dialled
    err = capsys.readouterr().err
    assert "cannot start executor: refusing to send the bearer token without TLS to 192.0.2.1:50051" in err
    assert "Traceback" not in err and "s3cret" not in err


def test_raftsched_tls_makes_a_ca_and_certificates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from raftsched.cluster.app.main import main

    pki = str(tmp_path / "pki")
    assert main(["tls", "ca", "--dir", pki]) == 0
    assert main(["tls", "cert", "--dir", pki, "--name", "n1", "--host", "10.0.0.1", "--host", "n1.example.com"]) == 0
    assert main(["tls", "cert", "--dir", pki, "--name", "alice", "--client"]) == 0
    for key in ("ca.key", "n1.key", "alice.key"):
        assert oct(os.stat(os.path.join(pki, key)).st_mode & 0o777) == "0o600"
    tls = TlsConfig(f"{pki}/n1.crt", f"{pki}/n1.key", f"{pki}/ca.crt", True)
    assert server_credentials(tls) is not None and host_warnings(tls, "10.0.0.1:50051") == []
    capsys.readouterr()
    assert main(["tls", "cert", "--dir", pki, "--name", "n1", "--host", "10.0.0.1"]) == 2
    assert "already exist" in capsys.readouterr().err
    assert main(["tls", "cert", "--dir", pki, "--name", "n2"]) == 2
    assert "give --host" in capsys.readouterr().err
    assert main(["tls", "cert", "--dir", str(tmp_path / "no-ca"), "--name", "n2", "--host", "h"]) == 2
    assert "raftsched tls ca --dir" in capsys.readouterr().err
