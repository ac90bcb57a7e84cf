"""Where an ``http`` job may connect: the address decision, and connections only to checked addresses.

* ``AddressPolicy.refusal(address)`` is the pure decision: why an IP address
  is refused, or None. Always refused: link-local addresses (169.254.0.0/16
  and fe80::/10: cloud metadata such as 169.254.169.254 lives there),
  AWS's IPv6 metadata address fd00:ec2::254, and the unspecified addresses
  (0.0.0.0/8, ::), which reach this host. Refused on request: every
  ``--http-deny CIDR``. An IPv6 address that carries an IPv4 one
  (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, NAT64
  ``64:ff9b::a.b.c.d``, 6to4 ``2002:AABB:CCDD::``) is checked as that IPv4
  address too, and a deny range written as IPv4-mapped IPv6 covers the IPv4
  addresses.
* ``connect(host, port, timeout, policy)`` resolves the host once, refuses
  the whole request if any address it resolves to is refused, and connects
  to the checked addresses themselves — never resolving again — so DNS
  rebinding between check and connect is impossible.
* ``GuardedHTTPConnection`` / ``GuardedHTTPSConnection``: ``http.client``
  connections that connect that way (TLS still verifies the certificate
  against the host name).
"""

from __future__ import annotations

import http.client
import socket
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from typing import Iterable, Iterator

from cluster.domain.errors import RaftschedError

Network = IPv4Network | IPv6Network
Address = IPv4Address | IPv6Address

LINK_LOCAL: tuple[Network, ...] = (ip_network("169.254.0.0/16"), ip_network("fe80::/10"))
ALWAYS_REFUSED: tuple[tuple[Network, str], ...] = (
    *((net, "link-local (cloud metadata lives there)") for net in LINK_LOCAL),
    (ip_network("fd00:ec2::254/128"), "AWS's IPv6 instance metadata address"),
    (ip_network("0.0.0.0/8"), "unspecified (it reaches this host)"),
    (ip_network("::/128"), "unspecified (it reaches this host)"),
)
_MAPPED = IPv6Network("::ffff:0:0/96")
_NAT64 = IPv6Network("64:ff9b::/96")
_COMPATIBLE = IPv6Network("::/96")


class HttpRefused(RaftschedError):
    """The request would reach an address this executor does not allow."""


def parse_deny(cidr: str) -> Network:
    """A ``--http-deny`` range (``10.0.0.0/8``, ``fd00::/8``, a single address); ValueError if malformed."""
    try:
        net = ip_network(cidr.strip(), strict=False)
    except ValueError as exc:
        raise ValueError(f"--http-deny {cidr!r} is not an address range: give a CIDR such as 10.0.0.0/8 or fd00::/8") from exc
    if isinstance(net, IPv6Network) and net.prefixlen >= 96 and net.subnet_of(_MAPPED):
        return ip_network(f"{IPv4Address(int(net.network_address) & 0xFFFFFFFF)}/{net.prefixlen - 96}")
    return net


def _embedded_ipv4(ip: IPv6Address) -> Iterator[IPv4Address]:
    if ip.ipv4_mapped is not None:
        yield ip.ipv4_mapped
    if ip.sixtofour is not None:
        yield ip.sixtofour
    low = IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _NAT64 or (ip in _COMPATIBLE and int(ip) > 1):  # not :: or ::1
        yield low


def address_forms(address: str) -> list[Address]:
    """The address, and the IPv4 address an IPv6 one carries (if any). ValueError if not an IP address."""
    ip = ip_address(address.split("%", 1)[0])  # drop an IPv6 scope id ("fe80::1%eth0")
    return [ip, *_embedded_ipv4(ip)] if isinstance(ip, IPv6Address) else [ip]


@dataclass(frozen=True)
class AddressPolicy:
    """Which addresses an ``http`` job may connect to: all but the always-refused ones and ``deny``."""

    deny: tuple[Network, ...] = ()

    @classmethod
    def from_cidrs(cls, cidrs: Iterable[str]) -> AddressPolicy:
        return cls(tuple(parse_deny(c) for c in cidrs))

    def refusal(self, address: str) -> str | None:
        """Why ``address`` may not be connected to, or None if it may."""
        try:
            forms = address_forms(address)
        except ValueError:
            return f"{address!r} is not an IP address"
        for form in forms:
            shown = address if form == forms[0] else f"{address} (IPv4 {form})"
            for net, why in ALWAYS_REFUSED:
                if form.version == net.version and form in net:
                    return f"{shown} is {why}"
            for net in self.deny:
                if form.version == net.version and form in net:
                    return f"{shown} is in the denied range {net} (--http-deny)"
        return None


def resolve(host: str, port: int, policy: AddressPolicy) -> list[tuple[int, int, int, tuple]]:
    """(family, type, proto, sockaddr) of every address ``host`` resolves to; ``HttpRefused`` if any is refused."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise HttpRefused(f"cannot resolve {host!r}: {exc}") from exc
    for *_, sockaddr in infos:
        why = policy.refusal(str(sockaddr[0]))
        if why is not None:
            raise HttpRefused(f"{host} resolves to {sockaddr[0]}, which is refused: {why}")
    return [(family, kind, proto, sockaddr) for family, kind, proto, _, sockaddr in infos]


def connect(host: str, port: int, timeout: float | None, policy: AddressPolicy) -> socket.socket:
    """A TCP connection to ``host`` made only to addresses that passed ``policy`` (no second lookup)."""
    error: OSError | None = None
    for family, kind, proto, sockaddr in resolve(host, port, policy):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error if error is not None else OSError(f"{host} resolves to no address")


class GuardedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int | None, timeout: float | None, policy: AddressPolicy) -> None:
        super().__init__(host, port, timeout=timeout)
        self.policy = policy

    def connect(self) -> None:
        self.sock = connect(self.host, self.port, self.timeout, self.policy)


class GuardedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int | None, timeout: float | None, policy: AddressPolicy) -> None:
        super().__init__(host, port, timeout=timeout)
        self.policy = policy

    def connect(self) -> None:
        sock = connect(self.host, self.port, self.timeout, self.policy)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]
