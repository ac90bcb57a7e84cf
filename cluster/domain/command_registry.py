"""The command registry and the log's wire format: how commands become Raft entries and back.

A command is a frozen dataclass registered with ``@command(op, to_plain,
from_plain, since)``; its state-machine handler is in the machine's table
(``raftsched.cluster.fsm.machine.HANDLERS``).
The wire form is UTF-8 JSON ``{"v": <format>, "op": <name>, "now": <ms>,
...fields}`` where ``v`` is the command format that introduced the command
(``since``): entries of the commands an older node knows keep the format it
knows, so adding a command never makes old entries unreadable.

``FORMAT_VERSION`` is the newest command format this code understands
(read it as ``command_registry.FORMAT_VERSION`` at call time: a test
entry point may raise it). ``decode`` raises ``UnsupportedCommand`` for an
entry this node cannot understand — a format above ``FORMAT_VERSION`` or an
unknown op — and ``CommandFormatError`` for a malformed one. The state
machine turns a malformed entry into a rejected result; an unsupported one
stops the node (``UnsupportedCommand.stops_replica``), since applying past a
command it does not understand would let its replica diverge.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, TypeVar

from raftsched.cluster.domain.errors import RaftschedError
from raftsched.cluster.domain.spec_codec import Plain

#: the newest command format this code understands (``raftsched.cluster.domain.commands`` says what each format added)
FORMAT_VERSION = 3
#: the command format from which a command may carry a ``request_id`` (the plain key "rid"): an entry with one
#: is of that format at least, whatever its command's own (``command_format``)
REQUEST_ID_FORMAT = 3
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


C = TypeVar("C")
#: how a command becomes the plain values of its log entry (without "op", "v", "now"), and back
ToPlain = Callable[[Any], Plain]
FromPlain = Callable[[Plain, int], Any]

_ENCODERS: dict[type, tuple[str, ToPlain, int]] = {}
_DECODERS: dict[str, tuple[FromPlain, int]] = {}


def command(op: str, to_plain: ToPlain, from_plain: FromPlain, since: int = 1) -> Callable[[type[C]], type[C]]:
    """Register a command class under its wire name ``op`` with its plain-value codec; ``since`` is the
    command format that introduced it (its entries carry it as ``v``)."""

    def register(cls: type[C]) -> type[C]:
        if op in _DECODERS:
            raise ValueError(f"command op {op!r} is registered twice")
        _ENCODERS[cls] = (op, to_plain, since)
        _DECODERS[op] = (from_plain, since)
        return cls

    return register


def format_of(cmd_type: type) -> int:
    """The command format that introduced ``cmd_type`` (a node must understand it to apply one)."""
    return _ENCODERS[cmd_type][2]


def command_format(cmd: Any) -> int:
    """The format of this command's entry: its type's, or ``REQUEST_ID_FORMAT`` if it carries a request_id."""
    since = _ENCODERS[type(cmd)][2]
    return max(since, REQUEST_ID_FORMAT) if getattr(cmd, "request_id", "") else since


def request_fingerprint(cmd: Any) -> str:
    """What makes a request the same request again: its op and plain fields, without its request_id, the
    proposer's quotas and the ids a proposer makes up (a new job's id)."""
    op, to_plain, _ = _ENCODERS[type(cmd)]
    plain = {k: v for k, v in to_plain(cmd).items() if k not in _NEUTRAL_KEYS}
    if op == "create_job":
        plain.pop("job_id", None)
    body = json.dumps([op, plain], sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(body).hexdigest()[:32]


def registered_commands() -> list[type]:
    return list(_ENCODERS)


def seq(value: Any) -> list[Any]:
    """A JSON array, or TypeError: a string must not pass as a list of one-letter items."""
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


#: ``json.dumps(plain, separators=(",", ":"))``'s encoder, built once (``dumps`` builds one per call)
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode
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
    try:
        return decoder(plain, int(plain["now"]))
    except CommandFormatError:
        raise
    except (KeyError, TypeError, ValueError, OverflowError) as exc:  # OverflowError: int(1e999)
        raise CommandFormatError(f"malformed {op} command: {exc!r}") from exc
