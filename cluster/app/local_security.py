"""Tokens, and TLS files, of a local cluster (``LocalCluster.create(..., auth=True)`` or ``secure=True``).

Everything lives in ``<root>/secure`` (0700): ``tokens.toml`` (hashes only)
and one ``<name>.token`` per token holding its secret; with TLS also
``ca.crt`` and ``ca.key`` (kept so that a node added later gets its
certificate: ``issue_node``), ``<node id>.crt``/``.key`` for each
node (naming 127.0.0.1 and localhost), and ``client.crt``/``.key`` when
nodes require client certificates. Keys, tokens and ``tokens.toml`` are
0600. The config gets ``[auth]`` (and ``[tls]``) pointing at them
(``config_text``).

Tokens without TLS are what the quick start uses: on one machine loopback
keeps the traffic off the network, but not away from the machine's other
users — any of them can connect to a loopback port. With tokens, only a
user who can read a token file (its owner) can call the cluster.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from raftsched.cluster.app.pki import issue, load_ca, make_ca, write_private
from raftsched.rpc.client.channel import ChannelSecurity
from raftsched.rpc.server.tokens import new_token, token_entry

SECURE_DIR = "secure"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class Grant:
    """What a token of a local cluster may do."""

    roles: tuple[str, ...]
    queues: tuple[str, ...] = ()
    types: tuple[str, ...] = ()


#: the token every secure local cluster has: what its harness and the launch script's user call with
ADMIN = "admin"


@dataclass
class LocalSecurity:
    dir: str
    client_auth: bool
    #: token name -> secret
    tokens: dict[str, str] = field(default_factory=dict)
    #: the nodes serve TLS (else tokens over plaintext on loopback)
    tls: bool = True

    @property
    def ca_file(self) -> str:
        return os.path.join(self.dir, "ca.crt")

    @property
    def client_files(self) -> tuple[str, str] | None:
        """(cert, key) of the client certificate, when the nodes require one."""
        return (os.path.join(self.dir, "client.crt"), os.path.join(self.dir, "client.key")) if self.client_auth else None

    def issue_node(self, node_id: str) -> None:
        """A certificate for a node added to the cluster (with TLS; nothing without)."""
        if not self.tls:
            return
        ca = load_ca(self.ca_file, os.path.join(self.dir, "ca.key"))
        issue(ca, node_id, LOCAL_HOSTS).write(os.path.join(self.dir, f"{node_id}.crt"), os.path.join(self.dir, f"{node_id}.key"))

    def token_file(self, name: str = ADMIN) -> str:
        return os.path.join(self.dir, f"{name}.token")

    def channel(self, token: str = ADMIN) -> ChannelSecurity:
        cert, key = self.client_files or ("", "")
        return ChannelSecurity.from_files(self.ca_file if self.tls else "", cert, key, self.tokens[token])

    def flags(self, token: str = ADMIN) -> list[str]:
        """The command-line flags of a client calling with ``token``."""
        out = (["--ca-file", self.ca_file] if self.tls else []) + ["--token-file", self.token_file(token)]
        files = self.client_files
        return out + (["--cert-file", files[0], "--key-file", files[1]] if files else [])

    def env(self, token: str = ADMIN) -> dict[str, str]:
        """The same as environment variables."""
        out = ({"RAFTSCHED_CA_FILE": self.ca_file} if self.tls else {}) | {"RAFTSCHED_TOKEN_FILE": self.token_file(token)}
        files = self.client_files
        return out | ({"RAFTSCHED_CERT_FILE": files[0], "RAFTSCHED_KEY_FILE": files[1]} if files else {})

    def config_text(self) -> str:
        rel = os.path.basename(self.dir)
        auth = f'\n[auth]\ntokens_file = "{rel}/tokens.toml"\n'
        if not self.tls:
            return auth
        return (
            f'\n[tls]\ncert_file = "{rel}/{{node_id}}.crt"\nkey_file = "{rel}/{{node_id}}.key"\nca_file = "{rel}/ca.crt"\n'
            f"client_auth = {'true' if self.client_auth else 'false'}\n" + auth
        )


def create_local_security(
    root: str, node_ids: list[str], client_auth: bool = False, grants: dict[str, Grant] | None = None, tls: bool = True
) -> LocalSecurity:
    """Make tokens (``admin`` and ``grants``) and, with ``tls``, a CA and node certificates under ``root/secure``."""
    sec = LocalSecurity(os.path.join(root, SECURE_DIR), client_auth and tls, tls=tls)
    os.makedirs(sec.dir, mode=0o700, exist_ok=True)
    os.chmod(sec.dir, 0o700)
    if tls:
        ca = make_ca("raftsched local CA")
        ca.write(sec.ca_file, os.path.join(sec.dir, "ca.key"))
        for node_id in node_ids:
            issue(ca, node_id, LOCAL_HOSTS).write(
                os.path.join(sec.dir, f"{node_id}.crt"), os.path.join(sec.dir, f"{node_id}.key")
            )
        if client_auth:
            issue(ca, "raftsched local client").write(os.path.join(sec.dir, "client.crt"), os.path.join(sec.dir, "client.key"))
    entries = []
    for name, grant in {ADMIN: Grant((ADMIN,)), **(grants or {})}.items():
        secret = new_token()
        sec.tokens[name] = secret
        write_private(sec.token_file(name), (secret + "\n").encode())
        entries.append(token_entry(name, secret, grant.roles, grant.queues, grant.types))
    write_private(os.path.join(sec.dir, "tokens.toml"), "\n".join(entries).encode())
    return sec


def open_local_security(root: str) -> LocalSecurity | None:
    """The security files of the local cluster in ``root`` (None when it runs without)."""
    directory = os.path.join(root, SECURE_DIR)
    if not os.path.isdir(directory):
        return None
    sec = LocalSecurity(
        directory, os.path.exists(os.path.join(directory, "client.crt")), tls=os.path.exists(os.path.join(directory, "ca.crt"))
    )
    for entry in sorted(os.listdir(directory)):
        if entry.endswith(".token"):
            with open(os.path.join(directory, entry), encoding="utf-8") as f:
                sec.tokens[entry[: -len(".token")]] = f.read().strip()
    return sec
