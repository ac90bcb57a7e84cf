"""Where the cluster is and how to reach it, found exactly as the command line finds it.

``Connection(cluster=None, config=None, token=None, ...)`` holds what a
program said; ``resolve()`` makes a ``Target`` of it:

* the addresses: ``cluster`` (``"h:p,h:p"`` or a list), else ``config`` (a
  cluster.toml or a client config), else ``$RAFTSCHED_CLUSTER``,
  ``$RAFTSCHED_CONFIG``, ``local-cluster/client.toml`` here or in a parent,
  ``~/.config/raftsched/client.toml``, ``127.0.0.1:50051``
  (``raftsched.cluster.app.client_config``);
* TLS and the token: the arguments, else ``$RAFTSCHED_CA_FILE``,
  ``$RAFTSCHED_CERT_FILE``, ``$RAFTSCHED_KEY_FILE``,
  ``$RAFTSCHED_TOKEN_FILE``/``$RAFTSCHED_TOKEN``, else the config's
  (``raftsched.cluster.app.client_security``); a token never goes in the
  clear off loopback unless ``insecure``;
* for a worker, where run logs go: ``output_dir``, else the config's
  (``[logs]`` of a cluster.toml, ``output_dir`` of the client config that
  names these nodes — also when they came from ``cluster`` or
  ``$RAFTSCHED_CLUSTER``), as ``raftsched executor`` does
  (``raftsched.cluster.app.executor_main.resolve_target``, with the
  environment passed in rather than read from the process).

Anything that cannot be used raises ``ConfigurationError`` saying what to give.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from typing import Mapping, Sequence

from raftsched.cluster.app.client_config import ClientConfig, discover, load_any, resolve
from raftsched.cluster.app.client_security import security_from_args
from raftsched.cluster.node.config import ClusterConfig
from raftsched.rpc.client.channel import ChannelSecurity, check_token_transport
from raftsched.sdk.errors import ConfigurationError, translated

_TOKEN_VARS = ("RAFTSCHED_TOKEN", "RAFTSCHED_TOKEN_FILE")


@dataclass(frozen=True)
class Target:
    """A resolved cluster: its addresses (and where they came from), the channel security, and, for workers,
    the output directory the nodes accept logs in ("" when not known) and the cluster.toml when one was given."""

    addresses: list[str]
    source: str
    security: ChannelSecurity
    output_dir: str = ""
    cluster_config: ClusterConfig | None = None


@dataclass(frozen=True)
class Connection:
    """What a program said about the cluster (``None``: find it as the command line does)."""

    cluster: str | Sequence[str] | None = None
    config: str | None = None
    token: str | None = None
    token_file: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False

    def overridden(self, **changes: object) -> "Connection":
        """This connection with the given settings replaced (those given as ``None`` are kept)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})  # type: ignore[arg-type]

    def resolve(self, env: Mapping[str, str] | None = None) -> Target:
        """The cluster, its TLS and token (see the module); ``ConfigurationError`` saying what to give."""
        env = dict(os.environ if env is None else env)
        with translated():
            found = self._found(env)
            files = dict(found.files)
            if self.token is not None:  # a token given in the program wins over every other source
                env = {k: v for k, v in env.items() if k not in _TOKEN_VARS}
                files.pop("token_file", None)
            flags = argparse.Namespace(
                ca_file=self.ca_file,
                cert_file=self.cert_file,
                key_file=self.key_file,
                token_file=self.token_file,
                insecure=self.insecure,
            )
            security = security_from_args(flags, found.cluster, env, files, found.addresses)
            if self.token is not None:
                security = dataclasses.replace(security, token=self.token.strip())
                check_token_transport(found.addresses, security)
        if not found.addresses:
            raise ConfigurationError("no cluster address given: give cluster='host:port,...'")
        return Target(found.addresses, found.source, security, found.output_dir, found.cluster)

    def _found(self, env: Mapping[str, str]) -> ClientConfig:
        """The addresses and what goes with them; a ``cluster`` given with the client config found by itself
        naming the same nodes takes that config's output directory and files (as ``raftsched executor``)."""
        cluster = self.cluster if isinstance(self.cluster, str) or self.cluster is None else ",".join(self.cluster)
        if self.config or not cluster:
            found = resolve(cluster, self.config, env)
            if found.output_dir or found.cluster is not None or found.source != "$RAFTSCHED_CLUSTER":
                return found
            known = self._known(env, found.addresses)  # $RAFTSCHED_CLUSTER: a worker may still learn where logs go
            return dataclasses.replace(found, output_dir=known.output_dir) if known is not None else found
        given = resolve(cluster, None, env)
        known = self._known(env, given.addresses)
        if known is not None:
            return ClientConfig(given.addresses, "cluster=", known.output_dir, known.files)
        return given

    @staticmethod
    def _known(env: Mapping[str, str], addresses: list[str]) -> ClientConfig | None:
        """The client config found by itself, when it names (at least) these nodes."""
        path = discover(env)
        if path is None:
            return None
        known = load_any(path, path)
        return known if set(addresses) <= set(known.addresses) else None
