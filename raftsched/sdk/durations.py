"""Spans and instants as Python programs give them: ``timedelta``, seconds, ``"1h30m"``; aware ``datetime``, ISO text.

``span_ms(value, name)`` takes a ``timedelta``, a number of seconds (int or
float), or a span as the command line writes it (``"10s"``, ``"500ms"``,
``"5m"``, ``"1h30m"``, ``"1d"``: the same parser,
``raftsched.cluster.app.cli.args.parse_span_ms``). ``instant_ms(value,
name)`` takes an aware ``datetime`` or ISO 8601 text with a zone
(``"2026-12-01T09:00:00Z"``); a naive one is refused, since it would have to
guess the zone. Both raise ``ValueError``/``TypeError`` naming the argument.
``to_datetime``/``to_timedelta`` go the other way.
"""

from __future__ import annotations

import datetime as dt
from typing import Union

from raftsched.cluster.app.cli.args import UsageError, parse_span_ms, parse_time_ms

#: what a span may be given as
Span = Union[dt.timedelta, int, float, str]
#: what an instant may be given as
Instant = Union[dt.datetime, str]

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def span_ms(value: Span, name: str) -> int:
    """``value`` as milliseconds (see the module); ``name`` is the argument, for messages."""
    if isinstance(value, bool):
        raise TypeError(f"{name}={value!r}: give a timedelta, a number of seconds, or text such as '10s', '5m', '1h30m'")
    if isinstance(value, dt.timedelta):
        return round(value / dt.timedelta(milliseconds=1))
    if isinstance(value, (int, float)):
        return round(value * 1000)
    if isinstance(value, str):
        try:
            return parse_span_ms(value.strip(), f"{name}=")
        except UsageError as exc:
            raise ValueError(str(exc)) from None
    raise TypeError(
        f"{name}={value!r}: give a timedelta, a number of seconds, or text such as '10s', '5m', '1h30m' "
        f"(not {type(value).__name__})"
    )


def instant_ms(value: Instant, name: str) -> int:
    """``value`` as milliseconds since the epoch (see the module)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"{name}={value!r} is a naive datetime: say which zone it is in, e.g. "
                f"datetime(..., tzinfo=timezone.utc) or ZoneInfo('Europe/Berlin'), or use text such as "
                f"'{value.isoformat(timespec='seconds')}Z'"
            )
        return (value - EPOCH) // dt.timedelta(milliseconds=1)
    if isinstance(value, str):
        try:
            return parse_time_ms(value.strip(), f"{name}=")
        except UsageError as exc:
            raise ValueError(str(exc)) from None
    raise TypeError(f"{name}={value!r}: give an aware datetime or ISO 8601 text such as '2026-12-01T09:00:00Z'")


def to_datetime(ms: int) -> dt.datetime:
    """Milliseconds since the epoch as an aware UTC ``datetime``."""
    return EPOCH + dt.timedelta(milliseconds=ms)


def to_timedelta(ms: int) -> dt.timedelta:
    """Milliseconds as a ``timedelta``."""
    return dt.timedelta(milliseconds=ms)
