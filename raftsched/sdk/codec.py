"""Payloads, results and heartbeat details as bytes on the wire, and back.

Going out (``encode``): ``bytes`` travel as they are, ``str`` as UTF-8, and
anything else as compact UTF-8 JSON — dicts, lists, numbers, ``None``, and
also dataclasses (as their fields), pydantic models (``model_dump(mode=
"json")``), ``datetime``/``date`` (ISO 8601), ``timedelta`` (seconds),
enums (their value), sets and tuples (lists), UUIDs and decimals (text).

Coming back (``decode``): empty bytes are ``None``; bytes that are UTF-8 JSON
are the decoded value; other UTF-8 text is a ``str``; anything else stays
``bytes``. So a task that returns the text ``"42"`` reads back as the number
42: return a dict (or bytes) when that matters.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import uuid
from typing import Any


def encode(value: Any, what: str = "value") -> bytes:
    """``value`` as bytes (see the module); ``TypeError`` naming ``what`` for something JSON cannot hold."""
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return to_json(value, what)


def to_json(value: Any, what: str = "value") -> bytes:
    """``value`` as compact UTF-8 JSON (``None`` included: ``null``)."""
    try:
        return json.dumps(value, default=_plain, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{what} cannot be sent as JSON ({exc}): give JSON-friendly values (dict, list, str, numbers, "
            "dataclasses), or bytes or str to send them as they are"
        ) from None


def decode(data: bytes) -> Any:
    """Bytes from the cluster as a value (see the module)."""
    if not data:
        return None
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return bytes(data)
    try:
        return json.loads(text)
    except ValueError:
        return text


def _plain(value: Any) -> Any:
    """What ``json`` cannot write by itself, as something it can."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)  # pydantic 2
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        raise TypeError("bytes inside a structure have no JSON form: encode them (base64) or send bytes alone")
    raise TypeError(f"{type(value).__name__} has no JSON form")
