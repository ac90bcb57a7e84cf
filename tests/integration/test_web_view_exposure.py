"""The web view is never served off loopback unprotected by accident, and answers only to the node's names:
a real node whose HTTP endpoint listens on 0.0.0.0 without [tls] and [auth] serves /metrics and /healthz
there but not the web view, and says why in its log and at ``/``; with ``[cluster] allow_insecure_http =
true`` it serves the web view, with a warning at every start. A request whose Host is another name is 421
(DNS rebinding), except on /metrics and /healthz."""

from __future__ import annotations

import http.client
import re
from pathlib import Path
from typing import Iterator

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from tests.helpers import wait_for

pytestmark = pytest.mark.integration


def get(address: str, path: str, host: str = "") -> tuple[int, str]:
    h, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(h, int(port), timeout=5)
    try:
        conn.request("GET", path, headers={"Host": host} if host else {})
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


@pytest.fixture()
def exposed(tmp_path: Path) -> Iterator[LocalCluster]:
    """One node whose HTTP endpoint is advertised on 127.0.0.1 and listens on every interface."""
    c = LocalCluster.create(str(tmp_path / "exposed"), 1, http=True)
    node = c.nodes["n1"]
    config = Path(c.config_path)
    port = node.http.rsplit(":", 1)[1]
    text = config.read_text().replace(f'http = "{node.http}"\n', f'http = "{node.http}"\nhttp_listen = "0.0.0.0:{port}"\n')
    config.write_text(text)
    try:
        yield c
    finally:
        c.stop_all()


def _log(c: LocalCluster) -> str:
    return Path(c.nodes["n1"].log_path).read_text()


def test_off_loopback_without_tls_and_auth_only_metrics_and_healthz_are_served(exposed: LocalCluster) -> None:
    exposed.start_all()
    exposed.wait_leader(30)
    address = exposed.nodes["n1"].http
    port = address.rsplit(":", 1)[1]
    assert wait_for(lambda: get(address, "/healthz")[0] == 200, 10, "/healthz 200")
    assert get(address, "/metrics")[0] == 200
    status, body = get(address, "/")
    assert status == 403 and f"serves HTTP on 0.0.0.0:{port}, which is not loopback" in body
    assert "allow_insecure_http" in body and "[tls]" in body
    assert get(address, "/jobs")[0] == 404
    assert f"serves HTTP on 0.0.0.0:{port}, which is not loopback" in _log(exposed)
    assert get(address, "/metrics", host=f"evil.example:{port}")[0] == 200  # Prometheus and probes: any name


def test_allow_insecure_http_serves_the_web_view_there_with_a_warning_at_every_start(exposed: LocalCluster) -> None:
    config = Path(exposed.config_path)
    config.write_text(config.read_text().replace("[cluster]\n", "[cluster]\nallow_insecure_http = true\n", 1))
    address = exposed.nodes["n1"].http
    port = address.rsplit(":", 1)[1]
    for start in (1, 2):
        exposed.start_all()
        exposed.wait_leader(30)
        status, body = get(address, "/")
        assert status == 200 and "<html" in body.lower()
        warnings = re.findall(
            r"WARNING .*allow_insecure_http = true: the web view on 0\.0\.0\.0:\d+ is served without", _log(exposed)
        )
        assert len(warnings) == start
        exposed.stop_all()
    exposed.start_all()
    exposed.wait_leader(30)
    assert get(address, "/", host=f"127.0.0.1:{port}")[0] == 200
    assert get(address, "/", host=f"localhost:{port}")[0] == 200
    status, body = get(address, "/", host=f"rebound.attacker.example:{port}")
    assert status == 421 and "DNS rebinding" in body and f"http://127.0.0.1:{port}/" in body
    assert get(address, "/jobs", host="rebound.attacker.example")[0] == 421
