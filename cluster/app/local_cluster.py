"""Start and stop a local cluster of real node processes on loopback.

Used by ``scripts/devcluster/launch_cluster.py``, the integration and fault tests and
the benchmark. Every node is a separate ``python -m raftsched.cluster.app.main node``
process with its own data dir and log file under ``root``; ports are picked
free on 127.0.0.1. Processes are stopped by pid, only the ones started here.
With ``secure=True`` the nodes serve TLS and require tokens, with
``auth=True`` they require tokens over plaintext loopback (files under
``root/secure``: ``raftsched.cluster.app.local_security``); ``client_security()`` is
what a client of the cluster then needs.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

import grpc

from raftsched.cluster.app.local_security import ADMIN, Grant, LocalSecurity, create_local_security, open_local_security
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc.client.channel import ChannelSecurity, open_channel

#: the nodes added to a local cluster since its config was written: id -> [raft, grpc, http]
ADDED_FILE = "added.json"


def read_added(root: str) -> dict[str, tuple[str, str, str]]:
    try:
        with open(os.path.join(root, ADDED_FILE), encoding="utf-8") as f:
            return {k: (v[0], v[1], v[2]) for k, v in json.load(f).items()}
    except FileNotFoundError:
        return {}


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 now, outside the kernel's ephemeral range.

    A port the kernel handed out (bind to port 0) is one it may hand out again as the source port of any
    outgoing connection before the node that was given it binds it; ports below the ephemeral range are
    never used that way. Each is checked by binding it (without SO_REUSEADDR, so a port still closing is
    skipped too), and none is given twice by this process."""
    first, end = pick_range()
    if end - first < 100:  # an unusual ephemeral range: let the kernel pick
        return _kernel_ports(count)
    picker = random.Random(os.getpid() ^ time.monotonic_ns())
    ports: list[int] = []
    for _ in range(200 * count):
        if len(ports) == count:
            break
        port = picker.randrange(first, end)
        if port in _GIVEN or not _bindable(port):
            continue
        _GIVEN.add(port)
        ports.append(port)
    if len(ports) < count:
        return ports + _kernel_ports(count - len(ports))
    return ports


#: how many ports below the ephemeral range ``free_ports`` picks from
_PICK_SPAN = 12000
_GIVEN: set[int] = set()

#: ``first-end``: the ports ``free_ports`` picks from instead (``end`` excluded), e.g. one share of the
#: span per process when several processes start clusters at once: a port checked free by one is then
#: never the one another binds before the first process's node does
PORT_RANGE_ENV = "RAFTSCHED_PORT_RANGE"


def pick_range() -> tuple[int, int]:
    """The ports ``free_ports`` picks from, ``[first, end)``: ``$RAFTSCHED_PORT_RANGE`` when it is set,
    else the ``_PICK_SPAN`` ports just below the kernel's ephemeral range."""
    given = os.environ.get(PORT_RANGE_ENV, "").strip()
    if given:
        try:
            first_s, end_s = given.split("-")
            first, end = int(first_s), int(end_s)
        except ValueError:
            raise ValueError(f"{PORT_RANGE_ENV}={given!r}: expected two port numbers, FIRST-END") from None
        if not 1024 <= first < end <= 65536:
            raise ValueError(f"{PORT_RANGE_ENV}={given!r}: expected 1024 <= FIRST < END <= 65536")
        return first, end
    return _default_range()


def share_of_range(index: int, shares: int) -> str:
    """The ``index``-th of ``shares`` equal parts of the default pick range, as ``$RAFTSCHED_PORT_RANGE``
    takes it (each of several parallel test workers gets its own)."""
    first, end = _default_range()
    size = (end - first) // max(1, shares)
    start = first + size * (index % max(1, shares))
    return f"{start}-{start + size}"


def _default_range() -> tuple[int, int]:
    """The ``_PICK_SPAN`` ports just below the kernel's ephemeral range, ``[first, end)``."""
    lo, _hi = _ephemeral_range()
    return max(1024, lo - _PICK_SPAN), lo


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kernel_ports(count: int) -> list[int]:
    socks, ports = [], []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def write_config(
    root: str,
    count: int,
    extra: str = "",
    secret: bool = True,
    base_ports: tuple[int, ...] | None = None,
    http: bool = False,
) -> str:
    """Write ``root/cluster.toml`` for ``count`` nodes n1..nN on loopback.

    Ports are free ones picked now, or ``base_ports=(raft, grpc[, http])`` counted up per node.
    ``http``: each node also serves its HTTP endpoint (``/metrics``, ``/healthz``).
    """
    os.makedirs(root, exist_ok=True)
    kinds = 3 if http else 2
    if base_ports is None:
        picked = free_ports(kinds * count)
        ports = [picked[kinds * i + k] for i in range(count) for k in range(kinds)]
    else:
        if http and len(base_ports) < 3:
            raise ValueError("base_ports needs (raft, grpc, http) when http is on")
        ports = [base_ports[k] + i for i in range(count) for k in range(kinds)]
    lines = ["[cluster]", 'data_dir = "var"']
    if secret:
        with open(os.path.join(root, "raft.secret"), "w", encoding="utf-8") as f:
            f.write(os.urandom(24).hex() + "\n")
        os.chmod(os.path.join(root, "raft.secret"), 0o600)
        lines.append('secret_file = "raft.secret"')
    for i in range(count):
        lines += [
            "",
            "[[nodes]]",
            f'id = "n{i + 1}"',
            f'raft = "127.0.0.1:{ports[kinds * i]}"',
            f'grpc = "127.0.0.1:{ports[kinds * i + 1]}"',
        ]
        if http:
            lines.append(f'http = "127.0.0.1:{ports[kinds * i + 2]}"')
    path = os.path.join(root, "cluster.toml")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n" + extra)
    return path


@dataclass
class NodeProcess:
    node_id: str
    grpc: str
    raft: str
    log_path: str
    proc: subprocess.Popen | None = None
    #: the HTTP endpoint (``host:port``), "" when the node serves none
    http: str = ""

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class LocalCluster:
    root: str
    config_path: str
    nodes: dict[str, NodeProcess] = field(default_factory=dict)
    #: TLS files and tokens when the cluster is secure
    security: LocalSecurity | None = None

    @classmethod
    def create(
        cls,
        root: str,
        count: int = 3,
        extra_config: str = "",
        base_ports: tuple[int, ...] | None = None,
        secure: bool = False,
        client_auth: bool = False,
        tokens: dict[str, Grant] | None = None,
        http: bool = False,
        auth: bool = False,
    ) -> "LocalCluster":
        """``secure``: TLS (``client_auth``: client certificates too) and tokens, ``admin`` and ``tokens``;
        ``auth``: the tokens without TLS; ``http``: every node serves its HTTP endpoint (``http_url``)."""
        from raftsched.cluster.node.config import load_config

        security = None
        if secure or client_auth or auth:
            tls = secure or client_auth
            security = create_local_security(root, [f"n{i + 1}" for i in range(count)], client_auth, tokens, tls=tls)
            extra_config = security.config_text() + extra_config
        path = write_config(root, count, extra_config, base_ports=base_ports, http=http)
        cfg = load_config(path)
        nodes = {n.id: NodeProcess(n.id, n.grpc, n.raft, os.path.join(root, f"{n.id}.log"), http=n.http) for n in cfg.nodes}
        return cls(root, path, nodes, security)

    @classmethod
    def open(cls, root: str) -> "LocalCluster":
        """The cluster whose config is ``root/cluster.toml`` (processes not attached), with the nodes added to it
        since (``root/added.json``: ``add_node``)."""
        from raftsched.cluster.node.config import load_config

        path = os.path.join(root, "cluster.toml")
        cfg = load_config(path)
        nodes = {n.id: NodeProcess(n.id, n.grpc, n.raft, os.path.join(root, f"{n.id}.log"), http=n.http) for n in cfg.nodes}
        for node_id, (raft, grpc_address, http) in read_added(root).items():
            nodes[node_id] = NodeProcess(node_id, grpc_address, raft, os.path.join(root, f"{node_id}.log"), http=http)
        secure = cfg.tls is not None or bool(cfg.auth.tokens_file)
        return cls(root, path, nodes, open_local_security(root) if secure else None)

    def remember_added(self, node_id: str) -> None:
        """Record ``node_id`` (added with AddNode) in ``root/added.json`` so that ``open`` knows it again."""
        added = read_added(self.root)
        node = self.nodes[node_id]
        added[node_id] = (node.raft, node.grpc, node.http)
        with open(os.path.join(self.root, ADDED_FILE), "w", encoding="utf-8") as f:
            json.dump(added, f, indent=1)

    @property
    def addresses(self) -> list[str]:
        return [n.grpc for n in self.nodes.values()]

    def client_security(self, token: str = ADMIN) -> ChannelSecurity | None:
        """What a client needs to call this cluster with ``token`` (None: plaintext, no tokens)."""
        return None if self.security is None else self.security.channel(token)

    def http_url(self, node_id: str, path: str = "/") -> str:
        """The URL of ``path`` on a node's HTTP endpoint (https under TLS)."""
        node = self.nodes[node_id]
        if not node.http:
            raise ValueError(f"node {node_id} serves no HTTP endpoint: create the cluster with http=True")
        return f"{'https' if self.security is not None and self.security.tls else 'http'}://{node.http}{path}"

    @property
    def output_dir(self) -> str:
        """Where the nodes accept, read and delete local run output (``[logs] dir``): executors write here."""
        from raftsched.cluster.node.config import load_config

        return load_config(self.config_path).output_dir()

    def new_node(self, node_id: str, ports: tuple[int, ...] | None = None, http: bool = False) -> NodeProcess:
        """A node that is not in the config's [[nodes]], on free loopback ports or ``ports`` (raft, grpc[, http]);
        add it with AddNode, then ``start(node_id, join=...)``."""
        picked = list(ports) if ports else free_ports(3 if http else 2)
        raft, grpc_port = picked[0], picked[1]
        web = f"127.0.0.1:{picked[2]}" if http and len(picked) > 2 else ""
        node = NodeProcess(
            node_id, f"127.0.0.1:{grpc_port}", f"127.0.0.1:{raft}", os.path.join(self.root, f"{node_id}.log"), http=web
        )
        self.nodes[node_id] = node
        return node

    def forget(self, node_id: str) -> None:
        """No longer count ``node_id`` as one of the cluster's nodes (after RemoveNode); it is not stopped."""
        del self.nodes[node_id]

    def start(
        self,
        node_id: str,
        join: list[str] | None = None,
        env: dict[str, str] | None = None,
        module: str = "raftsched.cluster.app.main",
        python: str | None = None,
    ) -> NodeProcess:
        """Start ``node_id`` (``join``: with ``--join`` and these addresses; ``env``: extra environment;
        ``module``: another entry point taking the same arguments, e.g. a test's; ``python``: the interpreter, this
        one by default, another installation's to run its version of the node)."""
        node = self.nodes[node_id]
        if node.alive():
            return node
        log = open(node.log_path, "ab")
        env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
        extra = ["--join", ",".join(join)] if join else []
        node.proc = subprocess.Popen(
            [python or sys.executable, "-m", module, "node", "--config", self.config_path, "--node-id", node_id, *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.root,
            env=env,
            start_new_session=True,
        )
        log.close()
        return node

    def start_all(self) -> None:
        for node_id in self.nodes:
            self.start(node_id)

    def kill(self, node_id: str) -> None:
        """SIGKILL: a crash."""
        node = self.nodes[node_id]
        if node.proc is not None and node.alive():
            os.kill(node.proc.pid, signal.SIGKILL)
            node.proc.wait()

    def terminate(self, node_id: str, timeout: float = 10.0) -> int | None:
        node = self.nodes[node_id]
        if node.proc is None or not node.alive():
            return node.proc.returncode if node.proc else None
        os.kill(node.proc.pid, signal.SIGTERM)
        try:
            return node.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(node.proc.pid, signal.SIGKILL)
            return node.proc.wait()

    def stop_all(self) -> None:
        for node_id in self.nodes:
            self.terminate(node_id)

    def status(self, node_id: str, timeout: float = 1.0) -> pb.ClusterStatus | None:
        node = self.nodes[node_id]
        try:
            with open_channel(node.grpc, self.client_security()) as ch:
                return pb_grpc.ClusterServiceStub(ch).GetClusterStatus(pb.GetClusterStatusRequest(), timeout=timeout)
        except grpc.RpcError:
            return None

    def wait_leader(self, timeout: float = 30.0, among: list[str] | None = None) -> str:
        """Wait until the live nodes agree on a leader that is itself live; return its id."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            live = [n for n in (among or list(self.nodes)) if self.nodes[n].alive()]
            leaders = set()
            for n in live:
                s = self.status(n)
                leaders.add(s.leader_id if s is not None else None)
            if len(leaders) == 1:
                (leader,) = leaders
                if leader and leader in live:
                    return leader
            time.sleep(0.1)
        raise TimeoutError(f"no leader agreed within {timeout} s; see the logs in {self.root}")
