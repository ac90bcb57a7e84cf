"""cluster.toml: frozen, validated configuration (schema in API.md and README).

Relative paths (``data_dir``, ``secret_file``) are resolved against the
directory that holds the config file, so a cluster can be started from any
working directory. ``ConfigError`` messages name the file, the key and what
is accepted.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from dataclasses import dataclass, field
from typing import Any

from cluster.domain.errors import ConfigError  # re-exported: the error of this module
from cluster.domain.validation import DEFAULT_MAX_JOBS, DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_MAX_PENDING_RUNS


@dataclass(frozen=True)
class NodeAddress:
    id: str
    raft: str
    grpc: str


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
    #: commit waits for about one period, a follower's read of it another. 10 ms instead of 20 ms took
    #: e2e runs/s from ~2,400 to ~3,900 here at ~1.5% more idle CPU per node
    append_entries_period: float = 0.01
    raft_min_timeout: float = 0.8
    raft_max_timeout: float = 1.6
    leader_fallback_timeout: float = 2.0
    snapshot_min_entries: int = 200_000
    snapshot_interval_s: float = 600.0
    #: fsync every Raft log write: survives a power loss, not only a SIGKILL (slower)
    fsync: bool = False


@dataclass(frozen=True)
class ClusterConfig:
    path: str
    data_dir: str
    secret_file: str | None
    nodes: tuple[NodeAddress, ...]
    logs: LogsConfig = field(default_factory=LogsConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    raft: RaftTuning = field(default_factory=RaftTuning)
    limits: LimitsConfig = field(default_factory=LimitsConfig)

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
        """The Raft password, or None. Refuses to run without one off loopback."""
        if self.secret_file is None:
            off_loopback = [n.raft for n in self.nodes if not is_loopback(n.raft)]
            if off_loopback:
                raise ConfigError(
                    f"{self.path}: [cluster] secret_file is required because these Raft addresses are not "
                    f"loopback: {', '.join(off_loopback)}. Without it anyone who reaches the Raft port can run "
                    "code on this node. Create a file with a long random secret on every node and set "
                    "secret_file to its path."
                )
            return None
        try:
            with open(self.secret_file, encoding="utf-8") as f:
                secret = f.read().strip()
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read secret_file {self.secret_file}: {exc.strerror}") from exc
        if len(secret) < 16:
            raise ConfigError(f"{self.path}: secret_file {self.secret_file} holds under 16 characters; use a long random secret")
        return secret


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


def _nodes(path: str, raw: Any) -> tuple[NodeAddress, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{path}: at least one [[nodes]] table (id, raft, grpc) is required")
    nodes: list[NodeAddress] = []
    for i, n in enumerate(raw):
        if not isinstance(n, dict) or not isinstance(n.get("id"), str) or not n["id"]:
            raise ConfigError(f"{path}: [[nodes]] entry {i + 1} needs a non-empty string id")
        nodes.append(
            NodeAddress(
                n["id"],
                _check_address(path, f"node {n['id']} raft", n.get("raft")),
                _check_address(path, f"node {n['id']} grpc", n.get("grpc")),
            )
        )
    for attr in ("id", "raft", "grpc"):
        values = [getattr(n, attr) for n in nodes]
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
    unknown = sorted(set(cluster) - {"data_dir", "secret_file"})
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [cluster]: {', '.join(unknown)} (known: data_dir, secret_file)")
    for key, value in cluster.items():
        _check_type(path, "cluster", key, value, str)
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
        raft=_section(path, raw, "raft", RaftTuning),
        limits=limits,
    )


def load_config(path: str) -> ClusterConfig:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
    return parse_config(text, path)
