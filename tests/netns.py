"""Test hosts in network namespaces: real addresses on one private switch, nothing off this machine.

``Network(tag)`` makes a namespace ``<tag>-sw`` holding a bridge (the switch);
``add_host(name, address)`` makes a namespace ``<tag>-<name>`` whose ``eth0``
has ``address`` (e.g. ``10.213.0.1/24``) and is plugged into the switch by a
veth pair. Every namespace is this test run's own (``tag`` is unique per run),
so parallel runs may use the same addresses; the root namespace gets no
interface and no route. Every host knows every other's MAC address (static
ARP entries, as a cloud network answers ARP for every address), so a host
that is gone is a black hole, as a dead VM is: what is sent to it vanishes,
nobody answers "host unreachable". ``Host.command(argv)`` runs a command on a
host (``ip netns exec``); ``unplug(name)`` pulls a host's cable (its switch
port goes down: peers see a dead machine, not a closed port). ``close()`` deletes
every namespace (and with them the links); stop the processes inside first.
Needs root (CI runs as root).
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass, field


class NetnsUnavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, or no ``ip``)."""


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _mac(address: str) -> str:
    """A locally administered MAC address made of the IPv4 address."""
    return "02:00:" + ":".join(f"{int(octet):02x}" for octet in address.split("."))


def unique_tag(prefix: str = "rs") -> str:
    """A namespace name prefix no other run uses: the pid and a random part."""
    return f"{prefix}{os.getpid() % 100_000}{secrets.token_hex(2)}"


@dataclass(frozen=True)
class Host:
    name: str
    #: the namespace's name
    netns: str
    #: the host's IPv4 address (no prefix length)
    address: str

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run on this host."""
        return ["ip", "netns", "exec", self.netns, *argv]


@dataclass
class Network:
    tag: str
    prefix_len: int = 24
    hosts: dict[str, Host] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.switch = f"{self.tag}-sw"
        try:
            _ip("netns", "add", self.switch)
        except (RuntimeError, FileNotFoundError) as exc:
            raise NetnsUnavailable(str(exc)) from exc
        self._namespaces = [self.switch]
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")

    def add_host(self, name: str, address: str) -> Host:
        host = Host(name, f"{self.tag}-{name}", address)
        _ip("netns", "add", host.netns)
        self._namespaces.append(host.netns)
        _ip("-n", host.netns, "link", "set", "lo", "up")
        port = f"p-{name}"[:15]
        _ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
        _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
        _ip("-n", host.netns, "link", "set", "eth0", "address", _mac(address))
        _ip("-n", host.netns, "addr", "add", f"{address}/{self.prefix_len}", "dev", "eth0")
        _ip("-n", host.netns, "link", "set", "eth0", "up")
        for other in self.hosts.values():  # a static ARP table, as a cloud network answers for every address
            _ip(
                "-n",
                host.netns,
                "neigh",
                "replace",
                other.address,
                "lladdr",
                _mac(other.address),
                "dev",
                "eth0",
                "nud",
                "permanent",
            )
            _ip("-n", other.netns, "neigh", "replace", address, "lladdr", _mac(address), "dev", "eth0", "nud", "permanent")
        self.hosts[name] = host
        return host

    def unplug(self, name: str) -> None:
        """The host's switch port goes down: what it sends and what is sent to it is lost."""
        _ip("-n", self.switch, "link", "set", f"p-{name}"[:15], "down")

    def close(self) -> None:
        for ns in reversed(self._namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
        self._namespaces.clear()
