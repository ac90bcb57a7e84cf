"""Bearer tokens: ``tokens.toml`` (``[auth] tokens_file``), parsed and checked, and the lookup of a presented token.

The file holds one ``[[token]]`` table per caller::

    [[token]]
    name = "alice"                      # who it is: in messages, and an executor's id prefix (no "/")
    sha256 = "9f86d081..."              # hex SHA-256 of the secret token; the token is never stored
    roles = ["submitter"]               # reader, submitter, executor, admin
    queues = ["reports"]                # optional: the only queues it may touch
    types = ["shell"]                   # optional: the only job types it may create or change

``TokenTable.find`` hashes the presented token and compares it with every
entry's hash in constant time (``hmac.compare_digest``, no early exit), so
neither the answer's timing nor a partial match tells an attacker anything.
A name holds no ``/``: an executor token acts as executor ``<name>`` or
``<name>/<anything>`` (``raftsched.rpc.server.auth.may_act_as``), so a token named
``ci`` would otherwise act as ``ci/prod``, another token's own name. A file
that names one token ``ci/prod`` beside ``ci`` is refused naming both.

Pure: no gRPC; the node loads the table once at start (restart to change it).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import tomllib
from dataclasses import dataclass
from typing import Sequence

from raftsched.cluster.node.config import ConfigError, check_private_file

ROLES = ("reader", "submitter", "executor", "admin")
_KEYS = ("name", "sha256", "roles", "queues", "types")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")


@dataclass(frozen=True)
class Token:
    """One caller: its name, the SHA-256 of its secret, its roles and (empty = any) queues and types."""

    name: str
    digest: bytes
    roles: frozenset[str]
    queues: frozenset[str] = frozenset()
    types: frozenset[str] = frozenset()


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def new_token() -> str:
    """A fresh secret token: 256 random bits, URL-safe."""
    return "rst_" + secrets.token_urlsafe(32)


class TokenTable:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tuple(tokens)

    def find(self, presented: str) -> Token | None:
        """The entry whose hash matches ``presented``, compared against every entry in constant time."""
        digest = token_digest(presented)
        found: Token | None = None
        for tok in self.tokens:
            if hmac.compare_digest(digest, tok.digest):
                found = tok
        return found


def _strings(where: str, key: str, value: object, allowed: tuple[str, ...] = ()) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(
            f'{where}: {key} must be a list of non-empty strings, e.g. {key} = ["{allowed[0] if allowed else "default"}"]'
        )
    bad = sorted(set(value) - set(allowed)) if allowed else []
    if bad:
        raise ConfigError(f"{where}: unknown {key} {', '.join(map(repr, bad))}; use {', '.join(allowed)}")
    return frozenset(value)


def _token(path: str, i: int, raw: object) -> Token:
    where = f"{path}: [[token]] {i + 1}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a table")
    name = raw.get("name")
    if isinstance(name, str) and "/" in name:
        raise ConfigError(
            f"{where}: name {name!r} holds '/': an executor token acts as its name and name/<anything>, so a '/' in a "
            "name would let another token act as this one; use - or . instead"
        )
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"{where}: name must be 1-128 letters, digits or ._:@- (starting with a letter or digit), got {name!r}")
    where = f"{path}: [[token]] {name!r}"
    if "token" in raw or "secret" in raw:
        raise ConfigError(f"{where} holds the token itself: store only its sha256 (raftsched token create prints it)")
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(_KEYS)})")
    digest = raw.get("sha256")
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest.lower()):
        raise ConfigError(f"{where}: sha256 must be the 64 hex digits of the token's SHA-256, got {digest!r}")
    if "roles" not in raw:
        raise ConfigError(f"{where}: roles is missing; give one or more of {', '.join(ROLES)}")
    roles = _strings(where, "roles", raw["roles"], ROLES)
    if not roles:
        raise ConfigError(f"{where}: roles is empty; give one or more of {', '.join(ROLES)}")
    queues = _strings(where, "queues", raw.get("queues", []))
    types = _strings(where, "types", raw.get("types", []), ())
    return Token(name, bytes.fromhex(digest), roles, queues, types)


def parse_tokens(text: str, path: str = "tokens.toml") -> TokenTable:
    """The tokens of a tokens.toml text; ``ConfigError`` naming the file, the entry and the key otherwise."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    unknown = sorted(set(raw) - {"token"})
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}: the file holds only [[token]] tables")
    entries = raw.get("token")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: no [[token]] table: every call would be refused; add one (raftsched token create prints one)")
    _check_prefixes(path, entries)
    tokens = [_token(path, i, e) for i, e in enumerate(entries)]
    for attr, what in (("name", "name"), ("digest", "sha256")):
        values = [getattr(t, attr) for t in tokens]
        dupes = sorted({t.name for t in tokens if values.count(getattr(t, attr)) > 1})
        if dupes:
            raise ConfigError(f"{path}: tokens {', '.join(map(repr, dupes))} share one {what}; each caller needs its own")
    return TokenTable(tokens)


def _check_prefixes(path: str, entries: list[object]) -> None:
    """Refuse two names where one is the other + "/...": the shorter one's executor would act as the longer."""
    names = [e["name"] for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)]
    for name in names:
        for other in names:
            if other.startswith(name + "/"):
                raise ConfigError(
                    f"{path}: token {name!r} could act as executor {other!r}, the name of another token: "
                    f"an executor token acts as its name and name/<anything>. Rename {other!r} (names hold no '/')"
                )


def load_tokens(path: str) -> TokenTable:
    check_private_file(path, "[auth] tokens_file")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read [auth] tokens_file {path}: {exc.strerror}") from exc
    return parse_tokens(text, path)


def token_entry(name: str, token: str, roles: Sequence[str], queues: Sequence[str] = (), types: Sequence[str] = ()) -> str:
    """The ``[[token]]`` table for ``token`` (its hash only), checked by the same parser the node uses."""
    lines = ["[[token]]", f"name = {_toml_str(name)}", f'sha256 = "{token_digest(token).hex()}"', f"roles = {_toml_list(roles)}"]
    if queues:
        lines.append(f"queues = {_toml_list(queues)}")
    if types:
        lines.append(f"types = {_toml_list(types)}")
    text = "\n".join(lines) + "\n"
    parse_tokens(text, "the new entry")
    return text


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _toml_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(_toml_str(v) for v in values) + "]"
