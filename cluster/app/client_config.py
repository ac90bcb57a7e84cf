"""Where the command line finds the cluster when no flag names it: the client config.

``raftsched job|run|cluster ...`` and ``raftsched executor`` take the nodes'
addresses from the first of:

1. ``--cluster host:port,...``;
2. ``--config FILE``: a ``cluster.toml`` (its ``[[nodes]]``) or a client config;
3. ``$RAFTSCHED_CLUSTER`` (``host:port,...``);
4. ``$RAFTSCHED_CONFIG`` (a client config or a ``cluster.toml``);
5. ``local-cluster/client.toml`` in the current directory or the nearest
   parent that has one (``scripts/launch_cluster.sh`` writes it);
6. ``$XDG_CONFIG_HOME/raftsched/client.toml`` (``~/.config/raftsched/client.toml``);
7. ``127.0.0.1:50051``.

A client config is a small TOML file (relative paths are relative to it)::

    cluster = ["127.0.0.1:50051", "127.0.0.1:50052", "127.0.0.1:50053"]
    output_dir = "var/outputs"   # executors: where the nodes accept run output
    ca_file = "secure/ca.crt"    # optional: TLS (and cert_file, key_file, token_file)

Flags and environment variables still win over its ``ca_file``,
``cert_file``, ``key_file`` and ``token_file`` (``raftsched.cluster.app.client_security``).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from typing import Any, Mapping

from raftsched.cluster.node.config import ClusterConfig, ConfigError, load_config

DEFAULT_ADDRESS = "127.0.0.1:50051"
#: where ``scripts/launch_cluster.sh`` writes the client config, relative to the directory it runs in
LOCAL_CLIENT_CONFIG = os.path.join("local-cluster", "client.toml")
_KEYS = {"cluster", "output_dir", "ca_file", "cert_file", "key_file", "token_file"}


@dataclass(frozen=True)
class ClientConfig:
    addresses: list[str]
    #: where the addresses came from, for messages ("--cluster", "local-cluster/client.toml", ...)
    source: str
    #: executors: where the nodes accept local run output ("" when not known)
    output_dir: str = ""
    #: security defaults (flags and environment win): the files a client config names
    files: dict[str, str] = field(default_factory=dict)
    #: when the addresses came from a cluster.toml
    cluster: ClusterConfig | None = None


def split_addresses(text: str) -> list[str]:
    return [a.strip() for a in text.split(",") if a.strip()]


def resolve(
    cluster_flag: str | None, config_flag: str | None, env: Mapping[str, str] = os.environ, cwd: str | None = None
) -> ClientConfig:
    """The addresses (and what goes with them) by the order in the module docstring."""
    if cluster_flag:
        return ClientConfig(split_addresses(cluster_flag), "--cluster", **_file_extras(config_flag))
    if config_flag:
        return load_any(config_flag, f"--config {config_flag}")
    if env.get("RAFTSCHED_CLUSTER", "").strip():
        return ClientConfig(split_addresses(env["RAFTSCHED_CLUSTER"]), "$RAFTSCHED_CLUSTER")
    if env.get("RAFTSCHED_CONFIG", "").strip():
        return load_any(env["RAFTSCHED_CONFIG"], f"$RAFTSCHED_CONFIG ({env['RAFTSCHED_CONFIG']})")
    found = discover(env, cwd)
    if found is not None:
        return load_any(found, _shown(found, cwd))
    return ClientConfig([DEFAULT_ADDRESS], "the default address")


def _file_extras(config_flag: str | None) -> dict[str, Any]:
    """With both --cluster and --config, the addresses come from the flag, the rest from the file."""
    if not config_flag:
        return {}
    loaded = load_any(config_flag, f"--config {config_flag}")
    return {"output_dir": loaded.output_dir, "files": loaded.files, "cluster": loaded.cluster}


def discover(env: Mapping[str, str] = os.environ, cwd: str | None = None) -> str | None:
    """The client config found by itself: ``local-cluster/client.toml`` here or in a parent, else the
    user's; None when there is none."""
    here = os.path.abspath(cwd or os.getcwd())
    while True:
        candidate = os.path.join(here, LOCAL_CLIENT_CONFIG)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    user = os.path.join(base, "raftsched", "client.toml")
    return user if os.path.isfile(user) else None


def _shown(path: str, cwd: str | None) -> str:
    rel = os.path.relpath(path, cwd or os.getcwd())
    return rel if not rel.startswith(os.pardir + os.sep + os.pardir) else path


def load_any(path: str, source: str) -> ClientConfig:
    """A client config, or a cluster.toml (it has ``[[nodes]]``); ``ConfigError`` naming the file."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read {path} ({source}): {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    if "nodes" in data:
        cfg = load_config(path)
        files = {"ca_file": cfg.tls.ca_file} if cfg.tls is not None else {}
        return ClientConfig(cfg.grpc_addresses(), source, cfg.output_dir(), files, cfg)
    return _client_config(path, data, source)


def _client_config(path: str, data: dict[str, Any], source: str) -> ClientConfig:
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}; a client config may hold {', '.join(sorted(_KEYS))}")
    raw = data.get("cluster")
    addresses = split_addresses(raw) if isinstance(raw, str) else raw
    if not isinstance(addresses, list) or not addresses or not all(isinstance(a, str) and a for a in addresses):
        raise ConfigError(f'{path}: cluster must list the nodes\' gRPC addresses, e.g. cluster = ["127.0.0.1:50051"]')
    base = os.path.dirname(os.path.abspath(path))
    paths: dict[str, str] = {}
    for key in sorted(_KEYS - {"cluster"}):
        value = data.get(key, "")
        if not isinstance(value, str):
            raise ConfigError(f"{path}: {key} must be a path (a string)")
        paths[key] = os.path.join(base, value) if value else ""
    output_dir = paths.pop("output_dir")
    return ClientConfig(addresses, source, output_dir, {k: v for k, v in paths.items() if v})


def client_config_text(addresses: list[str], output_dir: str = "", ca_file: str = "", token_file: str = "") -> str:
    """A client config for ``addresses`` (what ``scripts/launch_cluster.sh`` writes)."""
    lines = [
        "# The cluster `raftsched` commands and executors use when no --cluster or --config is given",
        "# (found as local-cluster/client.toml from this directory or below, or through $RAFTSCHED_CONFIG).",
        "cluster = [" + ", ".join(f'"{a}"' for a in addresses) + "]",
    ]
    if output_dir:
        lines.append(f'output_dir = "{output_dir}"  # executors write run output here: the nodes accept it only here')
    if ca_file:
        lines.append(f'ca_file = "{ca_file}"  # the nodes serve TLS: verify them against this CA')
    if token_file:
        lines.append(f'token_file = "{token_file}"  # the nodes require a token: this one (readable by its owner only)')
    return "\n".join(lines) + "\n"
