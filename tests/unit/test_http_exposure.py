"""The web view off loopback (``raftsched.cluster.node.exposure.http_exposure``): without [tls] and [auth] a node serves
only /metrics and /healthz on an HTTP address that is not loopback, and says so; ``[cluster]
allow_insecure_http = true`` serves the web view there anyway, with a warning at every start. No traffic:
every address here is only parsed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from raftsched.cluster.node.config import ClusterConfig, ConfigError, parse_config
from raftsched.cluster.node.exposure import HttpExposure

pytestmark = pytest.mark.unit

TLS = '[tls]\ncert_file = "certs/{node_id}.crt"\nkey_file = "certs/{node_id}.key"\nca_file = "certs/ca.crt"\n'
AUTH = '[auth]\ntokens_file = "tokens.toml"\n'


def conf(tmp_path: Path, http: str = "", http_listen: str = "", extra: str = "", cluster: str = "") -> ClusterConfig:
    node = 'id = "n1"\nraft = "127.0.0.1:7001"\ngrpc = "127.0.0.1:50051"\n'
    node += f'http = "{http}"\n' if http else ""
    node += f'http_listen = "{http_listen}"\n' if http_listen else ""
    text = f"[cluster]\n{cluster}\n[[nodes]]\n{node}\n{extra}"
    return parse_config(text, str(tmp_path / "etc" / "cluster.toml"))


def test_allow_insecure_http_parses_and_must_be_a_bool(tmp_path: Path) -> None:
    assert not conf(tmp_path).allow_insecure_http
    assert conf(tmp_path, cluster="allow_insecure_http = true").allow_insecure_http
    with pytest.raises(ConfigError, match="allow_insecure_http must be true or false"):
        conf(tmp_path, cluster='allow_insecure_http = "yes"')


@pytest.mark.parametrize(
    ("http", "http_listen"),
    [("", ""), ("127.0.0.1:8081", ""), ("localhost:8081", ""), ("[::1]:8081", ""), ("127.0.0.1:8081", "127.0.0.2:8081")],
)
def test_loopback_serves_the_web_view_with_nothing_to_say(tmp_path: Path, http: str, http_listen: str) -> None:
    assert conf(tmp_path, http, http_listen).check_http_exposure("n1") == HttpExposure(web_view=True)


@pytest.mark.parametrize(
    ("extra", "missing"),
    [
        ("", "without \\[tls\\] and without \\[auth\\] tokens_file"),
        (TLS, "without \\[auth\\] tokens_file"),
        (AUTH, "without \\[tls\\]:"),
    ],
)
@pytest.mark.parametrize(
    ("http", "http_listen", "exposed"),
    [
        ("10.0.0.1:8081", "", "10.0.0.1:8081"),
        ("127.0.0.1:8081", "0.0.0.0:8081", "0.0.0.0:8081"),
        ("node1.example.com:8081", "", "node1.example.com:8081"),
    ],
)
def test_off_loopback_without_tls_and_auth_only_metrics_and_healthz_are_served(
    tmp_path: Path, http: str, http_listen: str, exposed: str, extra: str, missing: str
) -> None:
    exposure = conf(tmp_path, http, http_listen, extra).check_http_exposure("n1")
    assert not exposure.web_view and exposure.warning is not None
    assert exposure.warning.startswith(f"{tmp_path}/etc/cluster.toml: node n1 serves HTTP on {exposed}, which is not loopback")
    assert "/metrics and /healthz only, not the web view" in exposure.warning
    assert "allow_insecure_http = true" in exposure.warning and "docs/config.md" in exposure.warning
    assert re.search(missing, exposure.warning)
    assert conf(tmp_path, http, http_listen, TLS + AUTH).check_http_exposure("n1") == HttpExposure(web_view=True)


def test_allow_insecure_http_serves_the_web_view_with_a_warning(tmp_path: Path) -> None:
    exposure = conf(tmp_path, "127.0.0.1:8081", "0.0.0.0:8081", AUTH, "allow_insecure_http = true").check_http_exposure("n1")
    assert exposure.web_view and exposure.warning is not None
    assert "allow_insecure_http = true: the web view on 0.0.0.0:8081 is served without [tls]" in exposure.warning
    moot = conf(tmp_path, "10.0.0.1:8081", "", TLS + AUTH, "allow_insecure_http = true").check_http_exposure("n1")
    assert moot.web_view and moot.warning is not None and "has no effect" in moot.warning


def test_the_grpc_opt_out_does_not_open_the_web_view(tmp_path: Path) -> None:
    cfg = conf(tmp_path, "10.0.0.1:8081", cluster="allow_insecure_grpc = true")
    assert not cfg.check_http_exposure("n1").web_view
