"""Argument helpers of the command line: spans, instants, dates, the flags every client command
takes, and the table of subcommands each noun (``job``, ``run``, ``cluster``) is built from.

A noun module lists its subcommands as ``Command`` entries; ``add_noun`` makes
one argparse parser per entry, with its help line, its own flags and an
example in its ``--help``. Adding a subcommand is adding an entry.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from dataclasses import dataclass
from typing import Any, Callable

from raftsched.cluster.app.client_security import add_security_args
from raftsched.cluster.domain.errors import RaftschedError
from raftsched.cluster.domain.schedule import zones

_SPAN = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
FORMATS = ("table", "wide", "json", "jsonl", "yaml", "id")


class UsageError(RaftschedError):
    """A command line that cannot be run as given (exit status 2); the message says what to write."""


class CommandFailed(RaftschedError):
    """The command ran but could not do what it was asked (exit status 1); the message says why."""


def parse_span_ms(text: str, flag: str = "span") -> int:
    """'1s', '500ms', '1h30m', '-5s' -> milliseconds (a negative one is kept, for the server to refuse).
    A bare number is refused: it would have to guess the unit."""
    sign = -1 if text.startswith("-") else 1
    body = text.strip().lstrip("-")
    if re.fullmatch(r"\d+(?:\.\d+)?", body):
        raise UsageError(
            f"{flag} {text}: a span needs a unit: say {body}s, {body}m, {body}h or {body}d ({body}ms for milliseconds)"
        )
    pos, total = 0, 0.0
    for m in _SPAN.finditer(body):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_MS[m.group(2)]
        pos = m.end()
    if pos != len(body) or not body:
        raise UsageError(f"{flag} {text!r}: cannot read this span: use forms like 30s, 500ms, 5m, 1h30m, 1d")
    return sign * int(total)


def parse_time_ms(text: str, flag: str = "--at") -> int:
    """An instant with a zone: ISO 8601 with Z or an offset."""
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"{flag} {text!r}: cannot read this time: use ISO 8601 such as 2026-12-01T09:00:00Z") from exc
    if when.tzinfo is None:
        raise UsageError(f"{flag} {text!r} has no zone: add Z or an offset such as +01:00")
    return int(when.timestamp() * 1000)


def parse_from_ms(text: str, zone: str, flag: str = "--from") -> int:
    """A date or date and time; without a zone or offset it is read in ``zone`` (an IANA name)."""
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(
            f"{flag} {text!r}: cannot read this date: use 2026-10-20, 2026-10-20T09:00 or 2026-10-20T09:00:00+02:00"
        ) from exc
    if when.tzinfo is None:
        try:
            when = when.replace(tzinfo=zones.zone(zone or "UTC"))  # the pinned tz database the nodes use
        except zones.UnknownZone as exc:
            raise UsageError(f"--tz {zone!r} is not an IANA time zone such as Europe/Berlin") from exc
    return int(when.timestamp() * 1000)


def common_parser() -> argparse.ArgumentParser:
    """The flags every client command takes."""
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_argument_group("where the cluster is (default: $RAFTSCHED_CLUSTER, $RAFTSCHED_CONFIG, "
                                      "local-cluster/client.toml here or above, ~/.config/raftsched/client.toml, "
                                      "else 127.0.0.1:50051)")  # fmt: skip
    where.add_argument("--cluster", metavar="HOST:PORT,...", help="the nodes' gRPC addresses")
    where.add_argument("--config", metavar="FILE", help="a cluster.toml (its [[nodes]]) or a client config")
    out = common.add_argument_group("output")
    out.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default="table",
        help="table (default), wide (more columns), json, jsonl (one object a line), yaml, id (ids only, one a line)",
    )
    out.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")
    add_security_args(common.add_argument_group("security (TLS and tokens)"))  # type: ignore[arg-type]
    return common


@dataclass(frozen=True)
class Command:
    """One subcommand of a noun: ``raftsched <noun> <name> ...``."""

    name: str
    help: str
    #: one or more example lines for its --help
    example: str
    run: Callable[[argparse.Namespace, Any], None]
    add_args: Callable[[argparse.ArgumentParser], None] = lambda _p: None
    description: str = ""


def add_noun(sub: Any, noun: str, help_text: str, commands: list[Command], common: argparse.ArgumentParser) -> None:
    """``raftsched <noun> ...`` with one parser per command; each parser's ``handler`` is its ``run``."""
    examples = "\n".join(f"  {line}" for c in commands for line in c.example.splitlines()[:1])
    parser = sub.add_parser(
        noun,
        help=help_text,
        description=help_text,
        epilog=f"examples:\n{examples}\n\n`raftsched {noun} COMMAND --help` says more about each. --cluster, --config, -o and the\n"
        f"TLS and token flags go after the command, or before `{noun}`: raftsched --cluster H:P {noun} ...",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="COMMAND")
    for c in commands:
        p = actions.add_parser(
            c.name,
            parents=[common],
            help=c.help,
            description=c.description or c.help,
            epilog="example:\n" + "\n".join(f"  {line}" for line in c.example.splitlines()),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        c.add_args(p)
        p.set_defaults(handler=c.run)
