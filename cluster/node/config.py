"""cluster.toml: frozen, validated configuration (reference: docs/config.md).

Relative paths (``data_dir``, ``secret_file``, the ``[tls]`` files,
``tokens_file``) are resolved against the directory that holds the config
file, so a cluster can be started from any working directory. ``ConfigError``
messages name the file, the key and what is accepted.

Each ``[[nodes]]`` table names what a node advertises (``raft``, ``grpc``,
optional ``http``) and, optionally, where it listens (``raft_listen``,
``grpc_listen``, ``http_listen``; each defaults to the advertised address).
gRPC off loopback needs both ``[tls]`` and ``[auth]`` unless ``[cluster]
allow_insecure_grpc = true``, and the web view likewise unless ``[cluster]
allow_insecure_http = true`` (``raftsched.cluster.node.exposure``); secrets, keys and
token files must be readable by their owner only (``check_private_file``).
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
import tomllib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from raftsched.cluster.domain.errors import ConfigError  # re-exported: the error of this module
from raftsched.cluster.domain.limits import DEFAULT_MAX_JOBS, DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_MAX_PENDING_RUNS

if TYPE_CHECKING:
    from raftsched.cluster.node.exposure import HttpExposure

#: ``[cluster] max_clock_offset`` when the config does not say (CockroachDB's default too)
DEFAULT_MAX_CLOCK_OFFSET_MS = 500


@dataclass(frozen=True)
class NodeAddress:
    """A node's addresses: advertised to the others (``raft``, ``grpc``, ``http``) and listened on (``*_listen``)."""

    id: str
    raft: str
    grpc: str
    http: str = ""
    #: empty = the advertised address (filled in on construction)
    raft_listen: str = ""
    grpc_listen: str = ""
    http_listen: str = ""

    def __post_init__(self) -> None:
        for name in ("raft", "grpc", "http"):
            if not getattr(self, name + "_listen"):
                object.__setattr__(self, name + "_listen", getattr(self, name))


#: the keys a [[nodes]] table may hold
NODE_KEYS = ("id", "raft", "grpc", "http", "raft_listen", "grpc_listen", "http_listen")


@dataclass(frozen=True)
class LogsConfig:
    store: str = "local"
    bucket: str = ""
    prefix: str = "raftsched"
    endpoint_url: str = ""
    region: str = ""
    #: store = "local": the directory run output lives in (default <data_dir>/outputs). Executors started
    #: with --config write there; a node accepts, reads and deletes file:// logs under it only
    dir: str = ""


@dataclass(frozen=True)
class SchedulerConfig:
    #: a fire may be committed this long before its instant (no executor can lease it earlier)
    fire_lookahead_s: float = 0.1
    #: an instant fired later than this counts as missed, and the job's misfire policy decides
    misfire_threshold_s: float = 5.0
    #: at most this many fire items go into one Raft entry
    fire_batch: int = 2000
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    #: how long an RPC waits for its command to commit before answering UNAVAILABLE
    request_timeout_s: float = 5.0
    #: a new leader gives every live lease at least this long (about one election timeout)
    lease_grace_s: float = 2.0
    #: the largest result a CompleteRun may carry
    max_result_bytes: int = 1024 * 1024


@dataclass(frozen=True)
class LimitsConfig:
    """``[limits]``: quotas, answered RESOURCE_EXHAUSTED with the limit named."""

    #: jobs kept (deleted ones until purged); travels in each CreateJob and is checked in apply
    max_jobs: int = DEFAULT_MAX_JOBS
    #: PENDING runs; travels in TriggerJob and Fire (a due instant over it is recorded SKIPPED)
    max_pending_runs: int = DEFAULT_MAX_PENDING_RUNS
    #: open WatchRuns streams on this node
    max_watch_streams: int = 256
    #: AcquireLease calls waiting (long polls) on this node
    max_long_polls: int = 512


@dataclass(frozen=True)
class RaftTuning:
    #: how often the leader sends AppendEntries (pysyncobj batches new entries until then): a write's
    #: commit waits for up to one period (half at the median), a follower's read of it another. 10 ms instead of 20 ms took
    #: e2e runs/s from ~2,400 to ~3,900 here. A leader with nothing in flight sends every 100 ms instead
    #: (``raftsched.raft.heartbeats``), and a node with nothing to do ticks every 25 ms (``raftsched.raft.quiet_ticks``)
    append_entries_period: float = 0.01
    raft_min_timeout: float = 0.8
    raft_max_timeout: float = 1.6
    leader_fallback_timeout: float = 2.0
    snapshot_min_entries: int = 200_000
    snapshot_interval_s: float = 600.0
    #: sync the Raft log, term and vote to disk before anything depends on them: an acknowledged write
    #: survives a power loss of every node. false: only handed to the OS (survives SIGKILL, not power loss)
    fsync: bool = True
    #: the most the Raft log may hold (its LMDB map; the file grows as the log does). Proposals are refused
    #: with a message naming this key when less than a sixteenth of it is left
    max_log_bytes: int = 8 << 30


@dataclass(frozen=True)
class StateConfig:
    """``[state]``: the jobs and runs in each node's LMDB environment (``<data_dir>/<node>/state.mdb``)."""

    #: the most the state may hold (its LMDB map; the file grows as the state does). Proposals are refused with
    #: a message naming this key when less than a sixteenth of it (at most 1 GiB) is left
    max_bytes: int = 64 << 30


@dataclass(frozen=True)
class TlsConfig:
    """[tls]: nodes serve gRPC over TLS; clients verify the nodes against ``ca_file``.

    ``{node_id}`` in a path stands for the node's id (``for_node``)."""

    cert_file: str = ""
    key_file: str = ""
    #: the CA that signed the node certificates (clients verify servers against it) and, with
    #: ``client_auth``, the client certificates
    ca_file: str = ""
    #: clients must present a certificate signed by ``ca_file`` (mutual TLS)
    client_auth: bool = False

    def for_node(self, node_id: str) -> "TlsConfig":
        def fill(path: str) -> str:
            return path.replace("{node_id}", node_id)

        return replace(self, cert_file=fill(self.cert_file), key_file=fill(self.key_file), ca_file=fill(self.ca_file))


@dataclass(frozen=True)
class AuthConfig:
    """[auth]: when ``tokens_file`` is set, every RPC needs a bearer token listed in it."""

    tokens_file: str = ""


@dataclass(frozen=True)
class ClusterConfig:
    path: str
    data_dir: str
    secret_file: str | None
    nodes: tuple[NodeAddress, ...]
    logs: LogsConfig = field(default_factory=LogsConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    raft: RaftTuning = field(default_factory=RaftTuning)
    #: None: gRPC in plaintext
    tls: TlsConfig | None = None
    auth: AuthConfig = field(default_factory=AuthConfig)
    #: serve gRPC off loopback without [tls] or [auth] (logged as a warning at every start)
    allow_insecure_grpc: bool = False
    #: serve the web view off loopback without [tls] or [auth] (logged as a warning at every start)
    allow_insecure_http: bool = False
    #: ``[cluster] max_clock_offset``: the most a node's wall clock may differ from a majority of the members'
    #: before it stops firing, granting and expiring leases and gives up leadership (``raftsched.cluster.node.clock_guard``)
    max_clock_offset_ms: int = DEFAULT_MAX_CLOCK_OFFSET_MS
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    state: StateConfig = field(default_factory=StateConfig)

    def output_dir(self) -> str:
        """Where local run output lives: ``[logs] dir`` (relative to the config file), else <data_dir>/outputs."""
        if self.logs.dir:
            return os.path.join(os.path.dirname(os.path.abspath(self.path)), self.logs.dir)
        return os.path.join(self.data_dir, "outputs")

    def node(self, node_id: str) -> NodeAddress:
        for n in self.nodes:
            if n.id == node_id:
                return n
        known = ", ".join(n.id for n in self.nodes)
        raise ConfigError(f"{self.path}: no [[nodes]] entry has id {node_id!r} (known: {known})")

    def node_dir(self, node_id: str) -> str:
        return os.path.join(self.data_dir, node_id)

    def grpc_addresses(self) -> list[str]:
        return [n.grpc for n in self.nodes]

    def read_secret(self) -> str | None:
        """The Raft password, or None. Refuses to run without one off loopback (advertised or listen
        addresses), and refuses a secret file that others can read."""
        if self.secret_file is None:
            addresses = dict.fromkeys(a for n in self.nodes for a in (n.raft, n.raft_listen))
            off_loopback = [a for a in addresses if not is_loopback(a)]
            if off_loopback:
                raise ConfigError(
                    f"{self.path}: [cluster] secret_file is required because these Raft addresses are not "
                    f"loopback: {', '.join(off_loopback)}. Without it anyone who reaches the Raft port can run "
                    "code on this node. Create a file with a long random secret on every node (chmod 600) and "
                    "set secret_file to its path."
                )
            return None
        check_private_file(self.secret_file, f"{self.path}: [cluster] secret_file")
        try:
            with open(self.secret_file, encoding="utf-8") as f:
                secret = f.read().strip()
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read secret_file {self.secret_file}: {exc.strerror}") from exc
        if len(secret) < 16:
            raise ConfigError(f"{self.path}: secret_file {self.secret_file} holds under 16 characters; use a long random secret")
        return secret

    def check_grpc_exposure(self, node_id: str) -> str | None:
        """``raftsched.cluster.node.exposure.grpc_exposure``: refuses gRPC off loopback without [tls] and [auth]."""
        from raftsched.cluster.node.exposure import grpc_exposure

        return grpc_exposure(self, node_id)

    def check_http_exposure(self, node_id: str) -> "HttpExposure":
        """``raftsched.cluster.node.exposure.http_exposure``: off loopback without [tls] and [auth], no web view."""
        from raftsched.cluster.node.exposure import http_exposure

        return http_exposure(self, node_id)


def check_private_file(path: str, what: str) -> None:
    """Refuse a secret, key or token file that its group or other users can read (or write).

    ``what`` names the setting in the message (e.g. ``"cluster.toml: [tls] key_file"``). A missing
    file is left to the caller's own read, which names it.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"{what}: cannot read {path}: {exc.strerror}") from exc
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise ConfigError(
            f"{what} {path} is readable by other users (mode {stat.S_IMODE(st.st_mode):04o}); it must be readable "
            f"by its owner only: run chmod 600 {path}"
        )


def is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_address(path: str, where: str, address: Any) -> str:
    if not isinstance(address, str) or ":" not in address:
        raise ConfigError(f"{path}: {where} must be 'host:port', got {address!r}")
    host, port = address.rsplit(":", 1)
    if not host.strip("[]"):
        raise ConfigError(f"{path}: {where} has no host in {address!r}")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{path}: {where} has a bad port in {address!r}")
    return address


def _node(path: str, i: int, n: Any) -> NodeAddress:
    if not isinstance(n, dict) or not isinstance(n.get("id"), str) or not n["id"]:
        raise ConfigError(f"{path}: [[nodes]] entry {i + 1} needs a non-empty string id")
    unknown = sorted(set(n) - set(NODE_KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) in the [[nodes]] table of {n['id']}: {', '.join(unknown)} (known: {', '.join(NODE_KEYS)})"
        )
    required = {key: _check_address(path, f"node {n['id']} {key}", n.get(key)) for key in ("raft", "grpc")}
    optional = {key: _check_address(path, f"node {n['id']} {key}", n[key]) for key in NODE_KEYS[3:] if key in n}
    if "http_listen" in optional and "http" not in optional:
        raise ConfigError(f"{path}: node {n['id']} has http_listen but no http address to advertise; add http")
    return NodeAddress(n["id"], **required, **optional)


def _nodes(path: str, raw: Any) -> tuple[NodeAddress, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{path}: at least one [[nodes]] table (id, raft, grpc) is required")
    nodes = [_node(path, i, n) for i, n in enumerate(raw)]
    for attr in ("id", "raft", "grpc", "http"):
        values = [getattr(n, attr) for n in nodes if getattr(n, attr)]
        dupes = sorted({v for v in values if values.count(v) > 1})
        if dupes:
            raise ConfigError(f"{path}: duplicate node {attr}: {', '.join(dupes)}")
    return tuple(nodes)


_KINDS: dict[type, tuple[type, ...]] = {float: (int, float), int: (int,), str: (str,)}


def _check_type(path: str, section: str, key: str, value: Any, want: type) -> None:
    """A number where a number belongs (never a bool), a string where a string belongs."""
    if want is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: [{section}] {key} must be true or false, got {value!r}")
        return
    if isinstance(value, bool) or not isinstance(value, _KINDS.get(want, (want,))):
        raise ConfigError(f"{path}: [{section}] {key} must be a {want.__name__}, got {value!r}")


def _section(path: str, raw: dict[str, Any], name: str, cls: Any) -> Any:
    table = raw.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [{name}] must be a table")
    known = set(cls.__dataclass_fields__)
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [{name}]: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    for key, value in table.items():
        _check_type(path, name, key, value, type(cls.__dataclass_fields__[key].default))
    try:
        return cls(**table)
    except TypeError as exc:
        raise ConfigError(f"{path}: [{name}]: {exc}") from exc


def parse_config(text: str, path: str = "cluster.toml") -> ClusterConfig:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    base = os.path.dirname(os.path.abspath(path))
    cluster = raw.get("cluster", {})
    if not isinstance(cluster, dict):
        raise ConfigError(f"{path}: [cluster] must be a table")
    unknown = sorted(set(cluster) - set(_CLUSTER_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [cluster]: {', '.join(unknown)} (known: {', '.join(_CLUSTER_KEYS)})")
    for key, value in cluster.items():
        _check_type(path, "cluster", key, value, _CLUSTER_KEYS[key])
    data_dir = os.path.join(base, str(cluster.get("data_dir", "var")))
    secret = cluster.get("secret_file")
    logs = _section(path, raw, "logs", LogsConfig)
    if logs.store not in ("local", "s3"):
        raise ConfigError(f"{path}: [logs] store must be 'local' or 's3', got {logs.store!r}")
    if logs.store == "s3" and not logs.bucket:
        raise ConfigError(f"{path}: [logs] store = 's3' needs a bucket")
    sched = _section(path, raw, "scheduler", SchedulerConfig)
    if sched.max_payload_bytes <= 0 or sched.fire_batch <= 0 or sched.request_timeout_s <= 0:
        raise ConfigError(f"{path}: [scheduler] max_payload_bytes, fire_batch and request_timeout_s must be positive")
    raft = _section(path, raw, "raft", RaftTuning)
    if raft.max_log_bytes < 64 << 20:
        raise ConfigError(f"{path}: [raft] max_log_bytes must be at least 67108864 (64 MiB), got {raft.max_log_bytes}")
    state = _section(path, raw, "state", StateConfig)
    if state.max_bytes < 64 << 20:
        raise ConfigError(f"{path}: [state] max_bytes must be at least 67108864 (64 MiB), got {state.max_bytes}")
    limits = _section(path, raw, "limits", LimitsConfig)
    bad = [k for k, v in vars(limits).items() if v <= 0]
    if bad:
        raise ConfigError(f"{path}: [limits] {', '.join(bad)} must be positive")
    return ClusterConfig(
        path=path,
        data_dir=data_dir,
        secret_file=None if secret in (None, "") else os.path.join(base, str(secret)),
        nodes=_nodes(path, raw.get("nodes")),
        logs=logs,
        scheduler=sched,
        raft=raft,
        tls=_tls(path, raw, base),
        auth=_auth(path, raw, base),
        allow_insecure_grpc=bool(cluster.get("allow_insecure_grpc", False)),
        allow_insecure_http=bool(cluster.get("allow_insecure_http", False)),
        max_clock_offset_ms=_max_clock_offset(path, cluster.get("max_clock_offset")),
        limits=limits,
        state=state,
    )


_CLUSTER_KEYS: dict[str, type] = {
    "data_dir": str,
    "secret_file": str,
    "allow_insecure_grpc": bool,
    "allow_insecure_http": bool,
    "max_clock_offset": str,
}
_SPAN = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000}


def _max_clock_offset(path: str, text: str | None) -> int:
    """``[cluster] max_clock_offset``: a span such as "500ms" or "1s", from 10 ms to 1 minute."""
    if text is None:
        return DEFAULT_MAX_CLOCK_OFFSET_MS
    body, pos, total = text.strip(), 0, 0.0
    for m in _SPAN.finditer(body):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_MS[m.group(2)]
        pos = m.end()
    if not body or pos != len(body) or not 10 <= total <= 60_000:
        raise ConfigError(
            f'{path}: [cluster] max_clock_offset = {text!r}: give a span from 10ms to 1m, such as "500ms" or "1s" '
            f'(default "{DEFAULT_MAX_CLOCK_OFFSET_MS}ms")'
        )
    return int(total)


def _resolve(base: str, value: str) -> str:
    return os.path.join(base, value) if value else ""


def _tls(path: str, raw: dict[str, Any], base: str) -> TlsConfig | None:
    if "tls" not in raw:
        return None
    tls: TlsConfig = _section(path, raw, "tls", TlsConfig)
    if not tls.cert_file or not tls.key_file:
        raise ConfigError(f"{path}: [tls] needs cert_file and key_file (PEM; {{node_id}} in a path is replaced by the node's id)")
    if tls.client_auth and not tls.ca_file:
        raise ConfigError(f"{path}: [tls] client_auth = true needs ca_file: the CA that signs the client certificates")
    return replace(
        tls, cert_file=_resolve(base, tls.cert_file), key_file=_resolve(base, tls.key_file), ca_file=_resolve(base, tls.ca_file)
    )


def _auth(path: str, raw: dict[str, Any], base: str) -> AuthConfig:
    auth: AuthConfig = _section(path, raw, "auth", AuthConfig)
    return AuthConfig(tokens_file=_resolve(base, auth.tokens_file))


def load_config(path: str) -> ClusterConfig:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
    return parse_config(text, path)
