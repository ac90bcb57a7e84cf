"""Output formats of the command line (``-o``), as kubectl and etcdctl have them.

* ``table`` — columns with a header line, times in local time; ``wide`` — more columns;
* ``json`` — one document: an object, or ``{"jobs": [...]}`` for a list;
* ``jsonl`` — one object per line (lists and streams);
* ``yaml`` — the same document as ``json``, as YAML (``---`` between streamed events), with enums and
  durations as the flags write them (``misfire: fire_all``, ``catchup_window: 1d``, ``status: active``);
* ``id`` — only the ids, one per line (for scripts: ``TICK=$(raftsched job create ... -o id)``).

JSON follows protobuf's JSON mapping with the proto's field names (enums by
name, durations in seconds, 64-bit numbers as strings, times in RFC 3339 UTC),
a form scripts can rely on; YAML is the same document for people, but for
enums and durations in their flag forms. Both differ from the mapping for
bytes: a payload, log or result that is UTF-8 is shown as text
(``"payload": "{\\"command\\": \\"date\\"}"``); one that is not is shown as
base64 under the field's name plus ``_base64`` (``"payload_base64": "..."``).

Nothing a node sends reaches the terminal raw (``raftsched.cluster.domain.unsafe_text``):
in ``table`` and ``wide`` every control and bidirectional character of a cell
is shown as an escape (``\\x1b``, ``\\n``, ``\\u202e``), and so is any in the
text of a record shown as lines (``render_message``; its own line breaks
kept); JSON and YAML write the ones ``json.dumps`` leaves raw (DEL, C1,
bidirectional controls) as ``\\uXXXX`` escapes, which parse to the same
values. A run's log (``run logs``) is the program's own output and is
written as it is.
"""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from raftsched.cluster.app.cli.timefmt import span_text
from raftsched.cluster.domain.unsafe_text import escape, escape_json

# ---------------------------------------------------------------- protobuf -> plain values


def to_plain(msg: Message) -> dict[str, Any]:
    """``msg`` as JSON-ready values, bytes as text when they are UTF-8 (see the module docstring)."""
    plain = json_format.MessageToDict(msg, preserving_proto_field_name=True)
    _text_bytes(msg, plain)
    return plain


def to_flag_forms(msg: Message) -> dict[str, Any]:
    """``msg`` as ``to_plain`` gives it, with enums and durations as the flags write them (YAML's form):
    ``fire_all`` for ``MISFIRE_POLICY_FIRE_ALL``, ``active`` for ``JOB_STATUS_ACTIVE``, ``1d`` for ``"86400s"``."""
    plain = to_plain(msg)
    _flag_forms(msg, plain)
    return plain


def _enum_flag(enum: Any, number: int) -> str | int:
    """An enum value as a flag names it: its name without the prefix all its enum's names share, lower case."""
    names = [v.name for v in enum.values]
    value = enum.values_by_number.get(number)
    if value is None:
        return number
    prefix = os.path.commonprefix(names)
    prefix = prefix[: prefix.rfind("_") + 1] if len(names) > 1 else ""
    return value.name.removeprefix(prefix).lower()


def _flag_value(fd: FieldDescriptor, value: Any, shown: Any) -> Any:
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return _enum_flag(fd.enum_type, value)
    if fd.type == FieldDescriptor.TYPE_MESSAGE and fd.message_type.full_name == "google.protobuf.Duration":
        return span_text(value.seconds * 1000 + value.nanos // 1_000_000)
    if fd.type == FieldDescriptor.TYPE_MESSAGE and isinstance(shown, dict):
        _flag_forms(value, shown)
    return shown


def _flag_forms(msg: Message, plain: dict[str, Any]) -> None:
    for fd, value in msg.ListFields():
        if fd.name not in plain:
            continue
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            value_fd, shown_map = fd.message_type.fields_by_name["value"], plain[fd.name]
            for key, item in value.items():
                shown_key = str(key).lower() if isinstance(key, bool) else str(key)
                if shown_key in shown_map:
                    shown_map[shown_key] = _flag_value(value_fd, item, shown_map[shown_key])
        elif fd.is_repeated:
            plain[fd.name] = [_flag_value(fd, v, shown) for v, shown in zip(value, plain[fd.name])]
        else:
            plain[fd.name] = _flag_value(fd, value, plain[fd.name])


def _text_bytes(msg: Message, plain: dict[str, Any]) -> None:
    for fd, value in msg.ListFields():
        name = fd.name
        if name not in plain:
            continue
        if fd.type == FieldDescriptor.TYPE_BYTES and not fd.is_repeated:
            text = bytes_text(value)
            if text is None:
                plain[f"{name}_base64"] = plain.pop(name)
            else:
                plain[name] = text
        elif fd.type == FieldDescriptor.TYPE_MESSAGE and not fd.message_type.GetOptions().map_entry:
            if fd.is_repeated:
                for sub_msg, sub_plain in zip(value, plain[name]):
                    if isinstance(sub_plain, dict):
                        _text_bytes(sub_msg, sub_plain)
            elif isinstance(plain[name], dict):
                _text_bytes(value, plain[name])


def bytes_text(data: bytes) -> str | None:
    """``data`` as text when it is UTF-8, else None."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def payload_text(data: bytes, limit: int = 60) -> str:
    """A payload for a table cell: its text, cut to ``limit``, or ``<N bytes, not UTF-8>``."""
    text = bytes_text(data)
    if text is None:
        return f"<{len(data)} bytes, not UTF-8>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------- YAML (enough for JSON-shaped data)

_PLAIN_SCALAR = re.compile(r"^[A-Za-z_./][A-Za-z0-9_ .,/@+()-]*$")
#: a span as the flags write it (``1d``, ``1h30m``, ``500ms``): a string in YAML, written plain
_SPAN_SCALAR = re.compile(r"^(\d+(ms|s|m|h|d))+$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def to_yaml(value: Any, indent: int = 0) -> str:
    """YAML for JSON-shaped data (dicts, lists, strings, numbers, booleans, None)."""
    return escape_json("\n".join(_yaml_lines(value, indent)) + "\n")


def to_json(value: Any, indent: int | None = None) -> str:
    """JSON for JSON-shaped data, non-ASCII text as it is but for the characters a terminal acts on."""
    return escape_json(json.dumps(value, indent=indent, ensure_ascii=False))


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    text = str(value)
    if _PLAIN_SCALAR.match(text) and text.lower() not in _YAML_WORDS and not text.endswith(" ") and ": " not in text:
        return text
    if _SPAN_SCALAR.match(text):
        return text
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def _yaml_lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return [pad + "{}"]
        lines = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{_scalar(key)}:")
                lines += _yaml_lines(item, indent + 2)
            else:
                lines.append(f"{pad}{_scalar(key)}: {_inline(item)}")
        return lines
    if isinstance(value, list):
        if not value:
            return [pad + "[]"]
        lines = []
        for item in value:
            if isinstance(item, (dict, list)) and item:
                nested = _yaml_lines(item, indent + 2)
                lines.append(f"{pad}- {nested[0].lstrip()}")
                lines += nested[1:]
            else:
                lines.append(f"{pad}- {_inline(item)}")
        return lines
    return [pad + _scalar(value)]


def _inline(item: Any) -> str:
    if isinstance(item, dict):
        return "{}"
    if isinstance(item, list):
        return "[]"
    return _scalar(item)


# ---------------------------------------------------------------- tables


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Columns under a header line; every cell on one line, its control and bidirectional characters escaped."""
    rows = [[escape(cell) for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


@dataclass(frozen=True)
class Column:
    header: str
    value: Callable[[Any], str]


@dataclass(frozen=True)
class View:
    """How one kind of record is shown: its columns (``wide`` adds some), its id, and the key a
    list of them has in JSON and YAML."""

    columns: list[Column]
    wide: list[Column] = field(default_factory=list)
    id: Callable[[Any], str] = lambda _m: ""
    list_key: str = "items"

    def render(self, items: list[Any], wide: bool = False) -> str:
        cols = self.columns + (self.wide if wide else [])
        return table([c.header for c in cols], [[c.value(m) for c in cols] for m in items])


def render(fmt: str, view: View, items: Iterable[Any], single: bool = False) -> str:
    """``items`` (or the one item, with ``single``) in the format ``fmt``."""
    items = list(items)
    if fmt in ("table", "wide"):
        return view.render(items, wide=fmt == "wide")
    if fmt == "id":
        return "\n".join(escape(view.id(m)) for m in items)
    if fmt == "jsonl":
        return "\n".join(to_json(to_plain(m)) for m in items)
    plain = to_flag_forms if fmt == "yaml" else to_plain
    doc: Any = plain(items[0]) if single else {view.list_key: [plain(m) for m in items]}
    if fmt == "yaml":
        return to_yaml(doc).rstrip("\n")
    return to_json(doc, indent=2)


def render_message(fmt: str, msg: Message, text: Callable[[], str], ident: str = "") -> str:
    """A record with no table view of its own: ``text()`` for table and wide (escaped, its line breaks
    kept), ``ident`` for id."""
    if fmt in ("table", "wide"):
        return escape(text(), keep_newlines=True)
    if fmt == "id":
        return escape(ident)
    if fmt == "yaml":
        return to_yaml(to_flag_forms(msg)).rstrip("\n")
    return to_json(to_plain(msg), indent=None if fmt == "jsonl" else 2)


def encode_bytes(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
