"""TLS and token settings of the command-line clients (``job``/``run``/``cluster`` and ``executor``).

Each comes from its flag, else its environment variable, else the client
config (``raftsched.cluster.app.client_config``: a cluster.toml gives its ``[tls]
ca_file``, a client config any of ``ca_file``, ``cert_file``, ``key_file``,
``token_file``):

=============== ===================== ============================================
flag            environment           meaning
=============== ===================== ============================================
--ca-file       RAFTSCHED_CA_FILE     TLS: verify the nodes against this CA (PEM)
--cert-file     RAFTSCHED_CERT_FILE   a client certificate, for [tls] client_auth
--key-file      RAFTSCHED_KEY_FILE    its key (must be readable by its owner only)
--token-file    RAFTSCHED_TOKEN_FILE  a file holding the bearer token (owner only)
                RAFTSCHED_TOKEN       the bearer token itself
--insecure                            send the token without TLS off loopback
=============== ===================== ============================================

A token is never sent in the clear to an address that is not loopback: without
a CA (so without TLS) such a client stops with an error naming ``--ca-file``
and ``RAFTSCHED_CA_FILE``, unless ``--insecure`` says a network you trust
carries it (``raftsched.rpc.client.channel.check_token_transport``). A cluster.toml with
``[cluster] allow_insecure_grpc = true`` says as much for its own addresses.
"""

from __future__ import annotations

import argparse
import os
from typing import Mapping, Sequence

from raftsched.cluster.node.config import ClusterConfig, ConfigError, check_private_file
from raftsched.rpc.client.channel import ChannelSecurity, check_token_transport


def add_security_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ca-file", help="TLS: verify the nodes against this CA ($RAFTSCHED_CA_FILE, or [tls] ca_file of --config)")
    p.add_argument("--cert-file", help="client certificate for nodes with [tls] client_auth ($RAFTSCHED_CERT_FILE)")
    p.add_argument("--key-file", help="the client certificate's key ($RAFTSCHED_KEY_FILE)")
    p.add_argument("--token-file", help="file holding the bearer token ($RAFTSCHED_TOKEN_FILE; or the token in $RAFTSCHED_TOKEN)")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="send the token without TLS to addresses that are not loopback (only on a network you trust)",
    )


def _pick(args: argparse.Namespace, flag: str, env: Mapping[str, str], var: str, default: str = "") -> str:
    return str(getattr(args, flag, None) or env.get(var, "") or default)


def read_token(args: argparse.Namespace, env: Mapping[str, str], default_file: str = "") -> str:
    """The bearer token: --token-file, else $RAFTSCHED_TOKEN_FILE, else $RAFTSCHED_TOKEN, else
    ``default_file`` ("" for none)."""
    path = _pick(args, "token_file", env, "RAFTSCHED_TOKEN_FILE")
    if not path and env.get("RAFTSCHED_TOKEN", "").strip():
        return env["RAFTSCHED_TOKEN"].strip()
    path = path or default_file
    if not path:
        return ""
    check_private_file(path, "the token file")
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc.strerror}") from exc
    if not token or any(c.isspace() for c in token):
        raise ConfigError(f"the token file {path} must hold exactly one token (no spaces)")
    return token


def security_from_args(
    args: argparse.Namespace,
    cfg: ClusterConfig | None = None,
    env: Mapping[str, str] = os.environ,
    files: Mapping[str, str] | None = None,
    addresses: Sequence[str] = (),
) -> ChannelSecurity:
    """The channel security the flags, the environment, ``cfg`` and a client config's ``files`` ask for;
    ``ConfigError`` saying what to fix — also when the token would go in the clear to one of ``addresses``."""
    files = files or {}
    ca_file = _pick(args, "ca_file", env, "RAFTSCHED_CA_FILE", files.get("ca_file", ""))
    tls = bool(ca_file)
    if not ca_file and cfg is not None and cfg.tls is not None:
        ca_file, tls = cfg.tls.ca_file, True
    cert_file = _pick(args, "cert_file", env, "RAFTSCHED_CERT_FILE", files.get("cert_file", ""))
    key_file = _pick(args, "key_file", env, "RAFTSCHED_KEY_FILE", files.get("key_file", ""))
    if key_file:
        check_private_file(key_file, "the client key file")
    insecure = bool(getattr(args, "insecure", False)) or (cfg is not None and cfg.allow_insecure_grpc)
    try:
        token = read_token(args, env, files.get("token_file", ""))
        security = ChannelSecurity.from_files(ca_file, cert_file, key_file, token, tls=tls, insecure=insecure)
    except ValueError as exc:
        raise ConfigError(f"{exc} (--ca-file, --cert-file, --key-file)") from exc
    check_token_transport(addresses, security)
    return security
