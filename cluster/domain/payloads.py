"""The payloads of the built-in job types, parsed and checked (pure).

``validate_payload(type, payload)`` is called with every spec a node is
asked to store: a ``shell`` or ``http`` job whose payload an executor could
never run is ``INVALID_ARGUMENT`` at create, naming the expected shape,
instead of a job whose every attempt fails. Other types' payloads are the
user's handler's business and pass as they are.

The executor parses with the same functions (``strict=False``: it ignores
keys it does not know, so a newer node's payload does not fail an older
executor's run):

* ``shell`` — ``{"command": "...", "env": {"NAME": "value"}, "cwd": "/dir"}``;
  ``command`` is required, ``env`` and ``cwd`` optional.
* ``http`` — ``{"url": "https://...", "method": "POST", "headers":
  {"Name": "value"}, "body": "..."}``; ``url`` (``http://`` or ``https://``,
  with a host) is required, the rest optional.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from raftsched.cluster.domain.errors import ValidationError

SHELL_SHAPE = '{"command": "...", "env": {"NAME": "value"}, "cwd": "/dir"} (env and cwd optional)'
HTTP_SHAPE = '{"url": "https://...", "method": "POST", "headers": {"Name": "value"}, "body": "..."} (all but url optional)'
HTTP_SCHEMES = ("http", "https")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$")  # RFC 9110 token: methods and header names
_ENV_NAME = re.compile(r"^[^=\x00]{1,256}$")


@dataclass(frozen=True)
class ShellPayload:
    command: str
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""


@dataclass(frozen=True)
class HttpPayload:
    url: str
    method: str = "GET"
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None


def _object(job_type: str, payload: bytes, shape: str) -> dict[str, Any]:
    try:
        value = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise ValidationError(f"a {job_type} job's payload must be a UTF-8 JSON object {shape}; got {_preview(payload)}")
    return value


def _preview(payload: bytes) -> str:
    text = payload[:60].decode("utf-8", "replace")
    return repr(text + ("..." if len(payload) > 60 else "")) if payload else "an empty payload"


def _unknown(job_type: str, value: dict[str, Any], known: tuple[str, ...], shape: str) -> None:
    extra = sorted(set(value) - set(known))
    if extra:
        raise ValidationError(f"a {job_type} job's payload has unknown field(s) {', '.join(map(repr, extra))}; expected {shape}")


def _string(job_type: str, value: dict[str, Any], key: str, shape: str, required: bool = False) -> str | None:
    item = value.get(key)
    if item is None and not required:
        return None
    if not isinstance(item, str) or (required and not item.strip()):
        what = "a non-empty string" if required else "a string"
        raise ValidationError(f"a {job_type} job's payload needs {what} {key!r}, e.g. {shape}; got {item!r}")
    if "\x00" in item:
        raise ValidationError(f"a {job_type} job's {key!r} contains a NUL character, which no program can be given")
    return item


def _string_map(
    job_type: str, value: dict[str, Any], key: str, shape: str, name_re: re.Pattern[str], forbidden: str
) -> dict[str, str]:
    items = value.get(key)
    if items is None:
        return {}
    if not isinstance(items, dict) or not all(isinstance(v, str) for v in items.values()):
        raise ValidationError(f"a {job_type} job's {key!r} must be an object of strings, e.g. {shape}")
    for name, text in items.items():
        if not name_re.match(name):
            raise ValidationError(f"a {job_type} job's {key!r} has an invalid name {name!r}")
        if any(ch in text for ch in forbidden):
            raise ValidationError(f"a {job_type} job's {key!r} value of {name!r} contains a NUL character or a line break")
    return dict(items)


def parse_shell_payload(payload: bytes, strict: bool = True) -> ShellPayload:
    value = _object("shell", payload, SHELL_SHAPE)
    if strict:
        _unknown("shell", value, ("command", "env", "cwd"), SHELL_SHAPE)
    command = _string("shell", value, "command", SHELL_SHAPE, required=True)
    assert command is not None
    env = _string_map("shell", value, "env", SHELL_SHAPE, _ENV_NAME, "\x00")
    return ShellPayload(command, env, _string("shell", value, "cwd", SHELL_SHAPE) or "")


def check_http_url(url: str) -> str:
    """Return ``url`` if it is an ``http://`` or ``https://`` URL with a host; else raise ``ValidationError``."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise ValidationError(f"URL {url!r} is not valid: {exc}") from exc
    if parts.scheme.lower() not in HTTP_SCHEMES:
        raise ValidationError(f"URL {url!r} is not allowed: only http:// and https:// URLs can be fetched")
    if not host:
        raise ValidationError(f"URL {url!r} names no host: give one, e.g. https://example.com/hook")
    if any(ch in url for ch in "\x00\r\n\t "):
        raise ValidationError(f"URL {url!r} contains whitespace or control characters: percent-encode them")
    return url


def parse_http_payload(payload: bytes, strict: bool = True) -> HttpPayload:
    value = _object("http", payload, HTTP_SHAPE)
    if strict:
        _unknown("http", value, ("url", "method", "headers", "body"), HTTP_SHAPE)
    url = _string("http", value, "url", HTTP_SHAPE, required=True)
    assert url is not None
    method = _string("http", value, "method", HTTP_SHAPE) or "GET"
    if not _TOKEN.match(method):
        raise ValidationError(f"an http job's method {method!r} is not an HTTP method: use e.g. GET, POST or PUT")
    headers = _string_map("http", value, "headers", HTTP_SHAPE, _TOKEN, "\x00\r\n")
    return HttpPayload(check_http_url(url), method.upper(), headers, _string("http", value, "body", HTTP_SHAPE))


def validate_payload(job_type: str, payload: bytes) -> None:
    """Raise ``ValidationError`` if a built-in type's payload could never run; other types pass."""
    if job_type == "shell":
        parse_shell_payload(payload)
    elif job_type == "http":
        parse_http_payload(payload)
