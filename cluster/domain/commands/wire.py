"""The log's wire format: how commands become Raft entries and back, from one field table per command.

A command is a frozen dataclass registered with ``@command(op, fields,
since)``. Its entry is UTF-8 JSON ``{"op": <name>, ...fields, "v": <format>,
"now": <ms>}`` where ``v`` is the command format that introduced the command
(``since``; a ``request_id`` makes it ``REQUEST_ID_FORMAT`` at least):
entries of the commands an older node knows keep the format it knows, so
adding a command never makes old entries unreadable.

Each ``Field`` of the table names the plain key in the log (never rename
one), the command's attribute, and its ``Kind`` (how the value becomes plain
values and back). A field is written in the table's order and is

* required (the default): always written; an entry without it is malformed;
* ``optional``: always written; an entry without it (older ones) decodes to
  the attribute's default;
* ``omitted``: written only when it holds something (not None where the
  default is None; else truthy), and an entry without it decodes to the
  default — so an entry from before the field existed decodes, and encodes
  again, to exactly its bytes.

From the table, each command gets its encoder and decoder as plain Python
functions (``_compile``: the same code the hand-written pairs were, so as
fast), decoding in the order of the dataclass's fields.

``FORMAT_VERSION`` is the newest command format this code understands (read
it as ``wire.FORMAT_VERSION`` at call time: a test entry point may raise it).
``decode`` raises ``UnsupportedCommand`` for an entry this node cannot
understand — a format above ``FORMAT_VERSION`` or an unknown op — and
``CommandFormatError`` for a malformed one. The state machine turns a
malformed entry into a rejected result; an unsupported one stops the node
(``UnsupportedCommand.stops_replica``), since applying past a command it does
not understand would let its replica diverge.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Callable, NamedTuple, TypeVar

from raftsched.cluster.domain.errors import RaftschedError
from raftsched.cluster.domain.model import GRANT_ORDER_FORMAT, RANKED_FORMAT, SCHEDULES_FORMAT
from raftsched.cluster.domain.spec_codec import Plain, has_extras

#: the newest command format this code understands (``raftsched.cluster.domain.commands`` says what each added)
FORMAT_VERSION = 7
#: formats that add no command, only a change in what apply stores (an older node, which cannot read it, stops
#: at the switch to it): 6 keeps runs of jobs with a priority in grant order (``model.RANKED_FORMAT``), 7 every
#: run (``model.GRANT_ORDER_FORMAT``)
STATE_ONLY_FORMATS = frozenset({RANKED_FORMAT, GRANT_ORDER_FORMAT})
#: the command format from which a command may carry a ``request_id`` (the plain key "rid"): an entry with one
#: is of that format at least, whatever its command's own (``command_format``)
REQUEST_ID_FORMAT = 3
#: the command format from which a completion carries the executor's verdict (not retryable, retry after) and a
#: renewal heartbeat details; with it, apply checks a completion's log_uri against the attempt's own place
VERDICT_FORMAT = 4
#: plain keys that do not make two requests different (``request_fingerprint``): the id itself, the proposer's
#: quotas, what the proposer derived, who asked
_NEUTRAL_KEYS = frozenset({"rid", "qp", "qj", "fp", "by"})


class CommandFormatError(RaftschedError, ValueError):
    """The bytes are not a well-formed command."""


class UnsupportedCommand(CommandFormatError):
    """A command this node does not understand: a newer format, or an unknown op.

    ``stops_replica``: the Raft adapter stops the node instead of applying past it.
    """

    stops_replica = True

    def __init__(self, message: str, command_format: int, op: str, known: int | None = None) -> None:
        super().__init__(message)
        self.command_format = command_format
        self.op = op
        #: the newest format this node understands
        self.known = FORMAT_VERSION if known is None else known


# ------------------------------------------------------------------ the field table


class Kind(NamedTuple):
    """How a field's value becomes the plain values of the log (``to_plain``; None: as it is), and back."""

    to_plain: Callable[[Any], Any] | None
    from_plain: Callable[[Any], Any]


class Field(NamedTuple):
    key: str
    attr: str
    kind: Kind
    #: how an entry without the key reads, and whether the value is written when it holds nothing (module docstring)
    optional: bool = False
    omitted: bool = False
    #: the command format that added this field to its command (0: the command's own): an entry whose field holds
    #: something is of that format at least (``command_format``), so a node that would ignore the key stops instead
    since: int = 0


def optional(key: str, attr: str, kind: Kind) -> Field:
    return Field(key, attr, kind, optional=True)


def omitted(key: str, attr: str, kind: Kind, since: int = 0) -> Field:
    return Field(key, attr, kind, optional=True, omitted=True, since=since)


def seq(value: Any) -> list[Any]:
    """A JSON array, or TypeError: a string must not pass as a list of one-letter items."""
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


STR = Kind(None, str)
INT = Kind(None, int)
FLOAT = Kind(None, float)
BOOL = Kind(None, bool)
#: a string, or None (the default of a field that older entries lack)
STR_OR_NONE = Kind(None, lambda v: None if v is None else str(v))
STRS = Kind(list, lambda v: tuple(str(x) for x in seq(v)))
#: (id, token) pairs
PAIRS = Kind(lambda v: [list(x) for x in v], lambda v: tuple((str(i), int(t)) for i, t in seq(v)))
#: (id, token, draw) triples
TRIPLES = Kind(lambda v: [list(x) for x in v], lambda v: tuple((str(i), int(t), float(d)) for i, t, d in seq(v)))
#: ``request_id``: on the mutating commands from format 3 on (``command_format``)
RID = omitted("rid", "request_id", STR)


# ------------------------------------------------------------------ the registry

C = TypeVar("C")
ToPlain = Callable[[Any], Plain]
FromPlain = Callable[[Plain, int], Any]

_ENCODERS: dict[type, tuple[str, ToPlain, int]] = {}
_DECODERS: dict[str, tuple[FromPlain, int]] = {}
#: per command type, the fields a later format added: (attr, that format)
_LATER: dict[type, tuple[tuple[str, int], ...]] = {}
#: per op, the plain keys a later format added: (key, that format)
_LATER_KEYS: dict[str, tuple[tuple[str, int], ...]] = {}
_MISSING = object()


def command(op: str, fields: tuple[Field, ...] = (), since: int = 1) -> Callable[[type[C]], type[C]]:
    """Register a command class under its wire name ``op`` with its field table; ``since`` is the command format
    that introduced it (its entries carry it as ``v``)."""

    def register(cls: type[C]) -> type[C]:
        if op in _DECODERS:
            raise ValueError(f"command op {op!r} is registered twice")
        to_plain, from_plain = _compile(cls, fields)
        later = [f for f in fields if f.since > since]
        if any(not f.omitted for f in later):
            raise ValueError(f"{cls.__name__}: a field added by a later format must be omitted when it holds nothing")
        _ENCODERS[cls] = (op, to_plain, since)
        _DECODERS[op] = (from_plain, since)
        if later:
            _LATER[cls] = tuple((f.attr, f.since) for f in later)
            _LATER_KEYS[op] = tuple((f.key, f.since) for f in later)
        return cls

    return register


def _compile(cls: type, fields: tuple[Field, ...]) -> tuple[ToPlain, FromPlain]:
    """The command's encoder and decoder as plain functions, from its field table (checked against its class)."""
    attrs = [f.name for f in dataclasses.fields(cls)]
    by_attr = {f.attr: f for f in fields}
    if attrs[0] != "now_ms" or sorted(attrs[1:]) != sorted(by_attr) or len(by_attr) != len(fields):
        raise ValueError(f"{cls.__name__}: the field table must name each field but now_ms once, not {sorted(by_attr)}")
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    names: dict[str, Any] = {"_cls": cls, "_MISSING": _MISSING}
    written, later, read = [], [], []
    for i, f in enumerate(fields):
        names[f"_to{i}"], names[f"_from{i}"], names[f"_default{i}"] = f.kind.to_plain, f.kind.from_plain, defaults[f.attr]
        value = f"c.{f.attr}" if f.kind.to_plain is None else f"_to{i}(c.{f.attr})"
        if f.omitted:
            holds = f"c.{f.attr} is not None" if defaults[f.attr] is None else f"c.{f.attr}"
            later.append(f"    if {holds}:\n        plain[{f.key!r}] = {value}\n")
        elif later:
            raise ValueError(f"{cls.__name__}: field {f.key!r} follows an omitted one: write it first")
        else:
            written.append(f"{f.key!r}: {value}")
    for attr in attrs[1:]:
        i, f = next((i, f) for i, f in enumerate(fields) if f.attr == attr)
        if f.optional:
            read.append(f"_default{i} if (v := p.get({f.key!r}, _MISSING)) is _MISSING else _from{i}(v)")
        else:
            read.append(f"_from{i}(p[{f.key!r}])")
    source = (
        "def to_plain(c):\n    plain = {" + ", ".join(written) + "}\n" + "".join(later) + "    return plain\n"
        "def from_plain(p, now):\n    return _cls(now, " + ", ".join(read) + ")\n"
    )
    exec(compile(source, f"<command {cls.__name__}>", "exec"), names)
    return names["to_plain"], names["from_plain"]


def format_of(cmd_type: type) -> int:
    """The command format that introduced ``cmd_type`` (a node must understand it to apply one)."""
    return _ENCODERS[cmd_type][2]


def command_format(cmd: Any) -> int:
    """The format of this command's entry: its type's, or ``REQUEST_ID_FORMAT`` if it carries a request_id, or
    that of a later field it fills (``Field.since``)."""
    since = _ENCODERS[type(cmd)][2]
    fmt = max(since, REQUEST_ID_FORMAT) if getattr(cmd, "request_id", "") else since
    for attr, added in _LATER.get(type(cmd), ()):
        if added > fmt and getattr(cmd, attr):
            fmt = added
    spec = getattr(cmd, "spec", None)
    if spec is not None and fmt < SCHEDULES_FORMAT and has_extras(spec):
        fmt = SCHEDULES_FORMAT
    return fmt


def request_fingerprint(cmd: Any) -> str:
    """What makes a request the same request again: its op and plain fields, without its request_id, the
    proposer's quotas and the ids a proposer makes up (a new job's id)."""
    op, to_plain, _ = _ENCODERS[type(cmd)]
    plain = {k: v for k, v in to_plain(cmd).items() if k not in _NEUTRAL_KEYS}
    if op == "create_job":
        plain.pop("job_id", None)
    body = _FINGERPRINT_TEXT([op, plain]).encode("utf-8")
    return hashlib.sha256(body).hexdigest()[:32]


def field_formats(cmd_type: type) -> dict[str, int]:
    """The fields a later format added to ``cmd_type``, by attribute: the format that added each."""
    return dict(_LATER.get(cmd_type, ()))


def registered_commands() -> list[type]:
    return list(_ENCODERS)


# ------------------------------------------------------------------ bytes

#: ``json.dumps(plain, separators=(",", ":"))``'s encoder, built once (``dumps`` builds one per call)
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode
#: ``json.dumps(value, sort_keys=True, separators=(",", ":"))``'s text, with one encoder built once and no check for
#: cycles (plain values have none): the same text, on every replica's apply of a command with a request id
_FINGERPRINT_TEXT = json.JSONEncoder(sort_keys=True, separators=(",", ":"), check_circular=False).encode
#: json's C scanner, called directly by ``loads`` (an attribute typeshed does not declare)
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def loads(data: bytes) -> Any:
    """``json.loads(data)``, in half its time for what ``encode`` writes: a JSON object in UTF-8 from the first
    byte to the last is read by json's C scanner directly (``json.loads`` first guesses the text's encoding
    and skips whitespace in Python). Anything else — whitespace around it, a byte-order mark, another
    encoding, malformed text — goes through ``json.loads`` itself, which gives its own answer or error."""
    if type(data) is bytes and data[:1] == b"{":
        try:
            text = data.decode("utf-8", "surrogatepass")  # as json.loads decodes UTF-8
            plain, end = _SCAN(text, 0)
            if end == len(text):
                return plain
        except (UnicodeDecodeError, StopIteration, ValueError):
            pass  # json.loads raises its own error for it
    return json.loads(data)


def encode(cmd: Any) -> bytes:
    entry = _ENCODERS.get(type(cmd))
    if entry is None:
        raise TypeError(f"not a command: {cmd!r}")
    op, to_plain, _ = entry
    plain = {"op": op, **to_plain(cmd), "v": command_format(cmd), "now": cmd.now_ms}
    return _ENCODE(plain).encode("utf-8")


def decode(data: bytes) -> Any:
    try:
        plain: Any = loads(data)
    except (ValueError, TypeError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
        raise CommandFormatError(f"command is not valid JSON: {exc}") from exc
    if not isinstance(plain, dict):
        raise CommandFormatError("command is not a JSON object")
    version, op = plain.get("v"), plain.get("op")
    if type(version) is not int or version < 1:  # not True, not 1.0
        raise CommandFormatError(f"command format version {version!r} is not valid (formats are whole numbers from 1)")
    if not isinstance(op, str):
        raise CommandFormatError(f"unknown command {op!r}: an entry without an op name is malformed")
    if version > FORMAT_VERSION:
        raise UnsupportedCommand(
            f"command {op!r} has command format version {version}, which is not supported by this node (it understands "
            f"command formats up to {FORMAT_VERSION}): upgrade this node",
            version,
            str(op),
        )
    known = _DECODERS.get(str(op))
    if known is None:
        raise UnsupportedCommand(
            f"unknown command {op!r} (command format {version}; this node understands command formats up to "
            f"{FORMAT_VERSION}): upgrade this node",
            version,
            str(op),
        )
    decoder, since = known
    if version < since:
        raise CommandFormatError(f"malformed {op} command: format {version}, but {op} came with format {since}")
    if "rid" in plain and version < REQUEST_ID_FORMAT:
        raise CommandFormatError(f"malformed {op} command: a request_id needs format {REQUEST_ID_FORMAT}, not {version}")
    for key, added in _LATER_KEYS.get(str(op), ()):
        if key in plain and version < added:
            raise CommandFormatError(f"malformed {op} command: its {key!r} needs format {added}, not {version}")
    try:
        cmd = decoder(plain, int(plain["now"]))
    except CommandFormatError:
        raise
    except (KeyError, TypeError, ValueError, OverflowError) as exc:  # OverflowError: int(1e999)
        raise CommandFormatError(f"malformed {op} command: {exc!r}") from exc
    spec = getattr(cmd, "spec", None)
    if spec is not None and version < SCHEDULES_FORMAT and has_extras(spec):
        raise CommandFormatError(f"malformed {op} command: its spec's fields of format {SCHEDULES_FORMAT} in format {version}")
    return cmd
