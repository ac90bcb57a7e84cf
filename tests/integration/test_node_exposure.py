"""What a node exposes, read off real node processes: its listening sockets (from /proc) and what a host in
another network namespace can reach, and the permissions of its files and of the secret it accepts."""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster, write_config
from raftsched.rpc.client.client import Client
from tests.conftest import running_cluster
from tests.helpers import every_spec, wait_for

pytestmark = pytest.mark.integration

_LISTEN = "0A"


def _ipv4(hex_addr: str) -> str:
    return str(ipaddress.IPv4Address(struct.pack("<I", int(hex_addr, 16))))


def _ipv6(hex_addr: str) -> str:
    """An IPv6 address; an IPv4-mapped one (``::ffff:127.0.0.1``, how gRPC binds an IPv4 address) as plain IPv4."""
    ip = ipaddress.IPv6Address(b"".join(struct.pack("<I", int(hex_addr[i : i + 8], 16)) for i in range(0, 32, 8)))
    return str(ip.ipv4_mapped or ip)


def listening_sockets(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket the process ``pid`` listens on (its own fds, its own namespace)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = set()
    for table, decode in (("tcp", _ipv4), ("tcp6", _ipv6)):
        with open(f"/proc/{pid}/net/{table}", encoding="ascii") as f:
            next(f)
            for line in f:
                cols = line.split()
                local, state, inode = cols[1], cols[3], cols[9]
                if state == _LISTEN and inode in inodes:
                    addr, port = local.split(":")
                    found.add((decode(addr), int(port, 16)))
    return found


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def test_every_listening_socket_is_on_loopback(cluster: LocalCluster) -> None:
    for node in cluster.nodes.values():
        assert node.pid is not None
        sockets = listening_sockets(node.pid)
        assert {p for _, p in sockets} >= {_port(node.raft), _port(node.grpc)}, sockets
        assert {a for a, _ in sockets} == {"127.0.0.1"}, f"{node.node_id} listens beyond loopback: {sorted(sockets)}"


def test_a_node_process_drops_a_huge_announcement_and_keeps_serving(cluster: LocalCluster) -> None:
    from raftsched.raft.cipher import HELLO_SIZE, MAGIC

    node = cluster.nodes[cluster.wait_leader()]
    with socket.create_connection(("127.0.0.1", _port(node.raft)), timeout=5) as sock:
        assert sock.recv(HELLO_SIZE, socket.MSG_WAITALL).startswith(MAGIC)
        sock.sendall(MAGIC + os.urandom(32) + struct.pack(">I", 2**31 - 1))
        sock.settimeout(5)
        try:
            for _ in range(1000):  # 64 MiB at most: the node must close long before
                sock.sendall(b"\x00" * 65536)
            closed = sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            closed = True
        assert closed, "the node kept reading a 2 GiB message from a peer that never authenticated"
    with open(node.log_path, encoding="utf-8") as f:
        assert "announced a 2147483647-byte message" in f.read()
    with Client(cluster.addresses, deadline_s=30) as client:
        client.create_job(every_spec("after-the-attack", 3_600_000))


# ------------------------------------------------------------------ a host in another network namespace


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


_PROBE = """
import socket, sys
s = socket.socket()
s.settimeout(3)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("connected")
except ConnectionRefusedError:
    print("refused")
except OSError as exc:
    print("error", exc)
"""


def _connect_from(ns: str, host: str, port: int) -> str:
    out = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", _PROBE, host, str(port)], capture_output=True, text=True, timeout=20
    )
    return out.stdout.strip() or out.stderr.strip()


def test_a_host_in_another_network_namespace_cannot_reach_the_raft_port(cluster: LocalCluster) -> None:
    """The node's Raft (and gRPC) port is bound to 127.0.0.1 only. A test host in its own network namespace,
    wired to this machine by a veth pair, connects to this machine's veth address on those ports: refused. A
    listener of the test's own on that address is reachable, so the refusal comes from the binding alone (a
    socket bound to 0.0.0.0, as pysyncobj did, would accept it)."""
    tag = os.getpid() % 100_000
    ns, host_if, ns_if = f"rsns{tag}", f"rsh{tag}", f"rsn{tag}"
    subnet = f"10.213.{tag % 250}"
    try:
        _ip("netns", "add", ns)
    except subprocess.CalledProcessError as exc:
        why = f"cannot create a network namespace here ({exc.stderr.strip()})"
        if os.environ.get("CI") == "true":  # CI runs as root with iproute2 (scripts/install_system_packages.sh)
            pytest.fail(why)
        pytest.skip(why + "; CI runs as root and can")
    control = socket.socket()
    try:
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _ip("link", "set", ns_if, "netns", ns)
        _ip("addr", "add", f"{subnet}.1/24", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", ns, "addr", "add", f"{subnet}.2/24", "dev", ns_if)
        _ip("-n", ns, "link", "set", ns_if, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        control.bind((f"{subnet}.1", 0))
        control.listen()
        assert _connect_from(ns, f"{subnet}.1", control.getsockname()[1]) == "connected"
        for node in cluster.nodes.values():
            assert _connect_from(ns, f"{subnet}.1", _port(node.raft)) == "refused", f"{node.node_id} Raft port reachable"
            assert _connect_from(ns, f"{subnet}.1", _port(node.grpc)) == "refused", f"{node.node_id} gRPC port reachable"
    finally:
        control.close()
        subprocess.run(["ip", "link", "del", host_if], capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


# ------------------------------------------------------------------ files


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _assert_private(node_dir: Path) -> None:
    assert _mode(node_dir) == 0o700
    assert _mode(node_dir / "raft.lmdb") == 0o700
    for f in [node_dir / "NODE", node_dir / "raft.snapshot", *(node_dir / "raft.lmdb").iterdir()]:
        assert _mode(f) == 0o600, f"{f} is {_mode(f):04o}"


def test_data_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """Node dirs 0700, the log, NODE and snapshots 0600: written by the node, and received from the leader."""
    with running_cluster(str(tmp_path / "c"), "\n[raft]\nsnapshot_min_entries = 40\n") as c:
        with Client(c.addresses, deadline_s=30) as client:
            for i in range(80):
                client.create_job(every_spec(f"j{i}", 3_600_000), f"j{i}")
        var = Path(c.root) / "var"
        for node_id in c.nodes:
            wait_for(lambda n=node_id: (var / n / "raft.snapshot").exists() or None, 30, f"a snapshot on {node_id}")
        assert _mode(var) == 0o700
        for node_id in c.nodes:
            _assert_private(var / node_id)
        follower = next(n for n in c.nodes if n != c.wait_leader())
        c.kill(follower)
        shutil.rmtree(var / follower)
        c.start(follower)
        wait_for(lambda: (var / follower / "raft.snapshot").exists() or None, 30, "the leader's snapshot on the wiped node")
        wait_for(lambda: c.status(follower), 30, "the wiped node serving")
        _assert_private(var / follower)


def test_a_secret_others_can_read_is_refused(tmp_path: Path) -> None:
    config = write_config(str(tmp_path), 1)
    secret = tmp_path / "raft.secret"
    secret.chmod(0o644)
    out = subprocess.run(
        [sys.executable, "-m", "raftsched.cluster.app.main", "node", "--config", config, "--node-id", "n1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2
    assert f"chmod 600 {secret}" in out.stderr
