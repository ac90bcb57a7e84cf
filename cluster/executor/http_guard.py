"""Where an ``http`` job may connect: the address decision, and connections only to checked addresses.

* ``AddressPolicy.refusal(address)`` is the pure decision: why an IP address
  is refused, or None. In this order:

  1. always refused: link-local addresses (169.254.0.0/16 and fe80::/10:
     cloud metadata such as 169.254.169.254 lives there), AWS's IPv6
     metadata address fd00:ec2::254, and the unspecified addresses
     (0.0.0.0/8, ::), which reach this host;
  2. refused: every ``--http-deny CIDR``;
  3. allowed: every ``--http-allow CIDR``;
  4. refused unless step 3 allowed them: loopback (127.0.0.0/8, ::1: the
     executor's own machine, a node's /metrics included), private ranges
     (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7), shared address
     space (100.64.0.0/10: carrier-grade NAT, and Alibaba Cloud's metadata
     at 100.100.100.200) and multicast (224.0.0.0/4, ff00::/8).

  An IPv6 address that carries an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``,
  IPv4-compatible ``::a.b.c.d``, NAT64 ``64:ff9b::a.b.c.d``, 6to4
  ``2002:AABB:CCDD::``) is checked as that IPv4 address too — refused if
  any of its forms is — and a range written as IPv4-mapped IPv6 covers the
  IPv4 addresses.
* ``connect(host, port, timeout, policy, track)`` resolves the host once,
  refuses the whole request if any address it resolves to is refused, and
  connects to the checked addresses themselves — never resolving again — so
  DNS rebinding between check and connect is impossible. ``track`` is
  handed each socket before it connects (the ``http`` type's watchdog, which
  shuts it down on a cancel or at the deadline).
* ``GuardedHTTPConnection`` / ``GuardedHTTPSConnection``: ``http.client``
  connections that connect that way (TLS still verifies the certificate
  against the host name).
"""

from __future__ import annotations

import http.client
import socket
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from typing import Callable, Iterable, Iterator

from raftsched.cluster.domain.errors import RaftschedError

Network = IPv4Network | IPv6Network
Address = IPv4Address | IPv6Address
#: told of every socket a guarded connection opens, before it connects
Tracker = Callable[[socket.socket], None]

LINK_LOCAL: tuple[Network, ...] = (ip_network("169.254.0.0/16"), ip_network("fe80::/10"))
ALWAYS_REFUSED: tuple[tuple[Network, str], ...] = (
    *((net, "link-local (cloud metadata lives there)") for net in LINK_LOCAL),
    (ip_network("fd00:ec2::254/128"), "AWS's IPv6 instance metadata address"),
    (ip_network("0.0.0.0/8"), "unspecified (it reaches this host)"),
    (ip_network("::/128"), "unspecified (it reaches this host)"),
)
#: refused unless an ``--http-allow`` range opens them: this machine and the networks around it
INTERNAL: tuple[tuple[Network, str], ...] = (
    (ip_network("127.0.0.0/8"), "loopback (this machine)"),
    (ip_network("::1/128"), "loopback (this machine)"),
    *((ip_network(n), "a private address") for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")),
    (ip_network("100.64.0.0/10"), "shared address space (carrier-grade NAT; Alibaba Cloud's metadata)"),
    (ip_network("224.0.0.0/4"), "multicast"),
    (ip_network("ff00::/8"), "multicast"),
)
_MAPPED = IPv6Network("::ffff:0:0/96")
_NAT64 = IPv6Network("64:ff9b::/96")
_COMPATIBLE = IPv6Network("::/96")


class HttpRefused(RaftschedError):
    """The request would reach an address this executor does not allow."""


def parse_deny(cidr: str, flag: str = "--http-deny") -> Network:
    """A ``--http-deny`` (or ``--http-allow``) range: ``10.0.0.0/8``, ``fd00::/8``, a single address;
    ValueError naming ``flag`` if malformed. An IPv4-mapped IPv6 range becomes the IPv4 range."""
    try:
        net = ip_network(cidr.strip(), strict=False)
    except ValueError as exc:
        raise ValueError(f"{flag} {cidr!r} is not an address range: give a CIDR such as 10.0.0.0/8 or fd00::/8") from exc
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


def _within(form: Address, net: Network) -> bool:
    return form.version == net.version and form in net


@dataclass(frozen=True)
class AddressPolicy:
    """Which addresses an ``http`` job may connect to: public ones, and the internal ranges ``allow``
    opens; never the always-refused ones nor ``deny``."""

    deny: tuple[Network, ...] = ()
    allow: tuple[Network, ...] = ()

    @classmethod
    def from_cidrs(cls, cidrs: Iterable[str], allow: Iterable[str] = ()) -> AddressPolicy:
        """From ``--http-deny`` and ``--http-allow`` ranges; ValueError naming a malformed one."""
        return cls(tuple(parse_deny(c) for c in cidrs), tuple(parse_deny(c, "--http-allow") for c in allow))

    def refusal(self, address: str) -> str | None:
        """Why ``address`` may not be connected to, or None if it may."""
        try:
            forms = address_forms(address)
        except ValueError:
            return f"{address!r} is not an IP address"
        for form in forms:
            why = self._form_refusal(form)
            if why is not None:
                return f"{address if form == forms[0] else f'{address} (IPv4 {form})'} is {why}"
        return None

    def _form_refusal(self, form: Address) -> str | None:
        for net, why in ALWAYS_REFUSED:
            if _within(form, net):
                return why
        for net in self.deny:
            if _within(form, net):
                return f"in the denied range {net} (--http-deny)"
        if any(_within(form, net) for net in self.allow):
            return None
        for net, why in INTERNAL:
            if _within(form, net):
                return f"{why}; an executor allows it with --http-allow {form}/{form.max_prefixlen}"
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


def connect(host: str, port: int, timeout: float | None, policy: AddressPolicy, track: Tracker | None = None) -> socket.socket:
    """A TCP connection to ``host`` made only to addresses that passed ``policy`` (no second lookup)."""
    error: OSError | None = None
    for family, kind, proto, sockaddr in resolve(host, port, policy):
        sock = socket.socket(family, kind, proto)
        if track is not None:
            track(sock)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error if error is not None else OSError(f"{host} resolves to no address")


class GuardedHTTPConnection(http.client.HTTPConnection):
    def __init__(
        self, host: str, port: int | None, timeout: float | None, policy: AddressPolicy, track: Tracker | None = None
    ) -> None:
        super().__init__(host, port, timeout=timeout)
        self.policy = policy
        self.track = track

    def connect(self) -> None:
        self.sock = connect(self.host, self.port, self.timeout, self.policy, self.track)


class GuardedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(
        self, host: str, port: int | None, timeout: float | None, policy: AddressPolicy, track: Tracker | None = None
    ) -> None:
        super().__init__(host, port, timeout=timeout)
        self.policy = policy
        self.track = track

    def connect(self) -> None:
        sock = connect(self.host, self.port, self.timeout, self.policy, self.track)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]
