"""The ``http`` type's address decision (no traffic: resolution and sockets are faked here).

No test anywhere sends traffic to 169.254.0.0/16 or off this machine; the link-local refusal is checked
on the decision alone, and the connection path with a fake resolver and a fake socket.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest

from raftsched.cluster.executor import http_guard
from raftsched.cluster.executor.http_guard import AddressPolicy, HttpRefused, address_forms, parse_deny

pytestmark = pytest.mark.unit

DEFAULT = AddressPolicy()


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",  # cloud metadata (AWS, GCP, Azure, ...)
        "169.254.0.1",
        "169.254.255.255",
        "fe80::1",
        "fe80::a9fe:a9fe%eth0",  # with a scope id
        "febf:ffff::1",  # the top of fe80::/10
        "::ffff:169.254.169.254",  # IPv4-mapped
        "::ffff:a9fe:a9fe",  # the same, written in hex
        "0:0:0:0:0:ffff:a9fe:a9fe",
        "64:ff9b::169.254.169.254",  # NAT64 well-known prefix
        "2002:a9fe:a9fe::1",  # 6to4 around 169.254.169.254
        "::169.254.169.254",  # IPv4-compatible (deprecated)
        "fd00:ec2::254",  # AWS's IPv6 metadata address
        "0.0.0.0",  # reaches this host
        "::",
    ],
)
def test_link_local_metadata_and_unspecified_addresses_are_always_refused(address: str) -> None:
    why = DEFAULT.refusal(address)
    assert why is not None and address in why


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1::1", "::ffff:93.184.216.34", "fe00::1", "8.8.8.8"])
def test_public_addresses_pass_by_default(address: str) -> None:
    assert DEFAULT.refusal(address) is None


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),  # this machine: a node's /metrics, the executor's own services
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.254", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("64:ff9b::10.0.0.1", "private"),
        ("100.100.100.200", "shared address space"),  # Alibaba Cloud's metadata
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
    ],
)
def test_loopback_private_and_multicast_addresses_are_refused_by_default(address: str, why: str) -> None:
    refusal = DEFAULT.refusal(address)
    assert refusal is not None and why in refusal and "--http-allow" in refusal, refusal


def test_http_allow_opens_a_range_but_never_link_local_nor_a_denied_range() -> None:
    policy = AddressPolicy.from_cidrs(
        ["10.0.0.7/32"], allow=["10.0.0.0/24", "127.0.0.1", "169.254.0.0/16", "::ffff:192.168.0.0/112"]
    )
    for address in ("10.0.0.1", "::ffff:10.0.0.9", "127.0.0.1", "192.168.3.4"):
        assert policy.refusal(address) is None, address
    assert "--http-allow" in (policy.refusal("10.0.1.1") or "")  # outside the allowed range: still refused
    assert "--http-allow" in (policy.refusal("127.0.0.2") or "")
    assert "(--http-deny)" in (policy.refusal("10.0.0.7") or "")  # a deny range wins over an allow range
    assert "link-local" in (policy.refusal("169.254.169.254") or "")  # cloud metadata cannot be opened
    assert "loopback" in (policy.refusal("::1") or "")  # an IPv4 range opens no IPv6 loopback
    with pytest.raises(ValueError, match="--http-allow 'lan' is not an address range"):
        AddressPolicy.from_cidrs([], allow=["lan"])


def test_deny_ranges_cover_every_form_of_an_address() -> None:
    policy = AddressPolicy.from_cidrs(["127.0.0.2/32", "10.0.0.0/8", "fd12::/16"])
    for address in ("127.0.0.2", "::ffff:127.0.0.2", "::ffff:7f00:2", "10.200.0.1", "::ffff:10.0.0.1", "64:ff9b::10.0.0.1"):
        why = policy.refusal(address)
        assert why is not None and "--http-deny" in why, address
    assert "10.0.0.0/8" in (policy.refusal("10.9.9.9") or "")
    assert "fd12::/16" in (policy.refusal("fd12:3::4") or "")
    opened = AddressPolicy(policy.deny, AddressPolicy.from_cidrs([], ["127.0.0.0/8", "::1", "fc00::/7"]).allow)
    for address in ("127.0.0.1", "127.0.0.3", "fd13::1", "::1"):  # outside the deny ranges: only their allowing decides
        assert opened.refusal(address) is None, address
        assert "--http-allow" in (policy.refusal(address) or ""), address
    assert policy.refusal("11.0.0.1") is None


def test_a_deny_range_written_as_ipv4_mapped_ipv6_covers_the_ipv4_addresses() -> None:
    assert str(parse_deny("::ffff:10.0.0.0/104")) == "10.0.0.0/8"
    policy = AddressPolicy.from_cidrs(["::ffff:192.168.0.0/112"])
    assert policy.refusal("192.168.4.4") is not None and policy.refusal("192.169.0.1") is None


def test_deny_ranges_are_parsed_or_refused_by_name() -> None:
    assert str(parse_deny("10.1.2.3/8")) == "10.0.0.0/8"  # host bits are forgiven
    assert str(parse_deny("192.0.2.7")) == "192.0.2.7/32"
    with pytest.raises(ValueError, match="--http-deny 'ten-dot' is not an address range"):
        parse_deny("ten-dot")


def test_address_forms() -> None:
    assert [str(a) for a in address_forms("::ffff:1.2.3.4")] == ["::ffff:102:304", "1.2.3.4"]
    assert [str(a) for a in address_forms("1.2.3.4")] == ["1.2.3.4"]
    assert [str(a) for a in address_forms("::1")] == ["::1"]  # loopback is not an IPv4-compatible address
    assert DEFAULT.refusal("not-an-ip") == "'not-an-ip' is not an IP address"


class FakeSocket:
    connected: list[Any] = []

    def __init__(self, family: int, kind: int, proto: int) -> None:
        self.family = family

    def settimeout(self, timeout: float | None) -> None:
        pass

    def connect(self, sockaddr: Any) -> None:
        FakeSocket.connected.append(sockaddr)

    def close(self) -> None:
        pass


def _resolver(addresses: list[str], calls: list[str]) -> Any:
    def getaddrinfo(host: str, port: int, type: int = 0) -> list[Any]:  # noqa: A002 - socket's own name
        calls.append(host)
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    return getaddrinfo


def test_a_host_is_refused_when_any_address_it_resolves_to_is(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(http_guard.socket, "getaddrinfo", _resolver(["93.184.216.34", "169.254.169.254"], calls))
    monkeypatch.setattr(http_guard.socket, "socket", FakeSocket)
    FakeSocket.connected = []
    with pytest.raises(HttpRefused, match="rebind.example resolves to 169.254.169.254, which is refused: .*link-local"):
        http_guard.connect("rebind.example", 80, 1.0, DEFAULT)
    assert FakeSocket.connected == []  # nothing was connected to


def test_the_connection_goes_to_the_checked_address_from_one_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(http_guard.socket, "getaddrinfo", _resolver(["93.184.216.34"], calls))
    monkeypatch.setattr(http_guard.socket, "socket", FakeSocket)
    FakeSocket.connected = []
    http_guard.connect("ok.example", 8080, 1.0, DEFAULT)
    assert calls == ["ok.example"]  # resolved once: no second lookup a rebinding DNS could answer differently
    assert FakeSocket.connected == [("93.184.216.34", 8080)]  # the checked address itself, not the name
