"""How the command line writes instants and spans: local time in tables, a job's own zone in
previews (with UTC beside it), ISO 8601 UTC in JSON and YAML (protobuf's own form).

"Local" is the zone of the machine the command runs on (``$TZ`` if set).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from raftsched.cluster.domain.schedule import zones
from raftsched.cluster.domain.words import flag_span

UTC = dt.timezone.utc


def ts_ms(t: Any) -> int | None:
    """A protobuf Timestamp in ms; None when unset (0)."""
    if not t.seconds and not t.nanos:
        return None
    return t.seconds * 1000 + t.nanos // 1_000_000


def local(ms: int | None, millis: bool = False, today_short: bool = False) -> str:
    """``2026-03-29 03:00:00 CEST`` in the local zone ("-" for none); ``millis`` adds .mmm;
    ``today_short`` leaves out the date for an instant of today."""
    if ms is None:
        return "-"
    when = dt.datetime.fromtimestamp(ms / 1000, UTC).astimezone()
    clock = when.strftime("%H:%M:%S") + (f".{when.microsecond // 1000:03d}" if millis else "")
    if today_short and when.date() == dt.datetime.now().astimezone().date():
        return clock
    return f"{when:%Y-%m-%d} {clock} {when.tzname()}"


def local_zone_text() -> str:
    """The local zone as people read it: ``Europe/Berlin, UTC+01:00 now`` (or just the offset)."""
    now = dt.datetime.now().astimezone()
    offset = now.strftime("%z")
    label = f"UTC{offset[:3]}:{offset[3:]}"
    name = now.tzname() or label
    return name if name == "UTC" else f"{name}, {label}"


def utc_iso(ms: int) -> str:
    when = dt.datetime.fromtimestamp(ms / 1000, UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{when.microsecond // 1000:03d}Z" if when.microsecond else "Z")


def zone_or_utc(name: str) -> dt.tzinfo:
    """The IANA zone ``name`` (UTC for "" or "UTC"); an unknown name also gives UTC (the server
    refuses it with its own message)."""
    if not name or name.upper() == "UTC":
        return UTC
    try:
        return zones.zone(name)  # the pinned tz database the nodes use, never the host's
    except zones.UnknownZone:
        return UTC


def preview_line(ms: int, zone: dt.tzinfo, note: str = "") -> str:
    """One previewed instant: ``Sun 2026-10-25 02:30:00 CET (UTC+01:00)  2026-10-25T01:30:00Z  note``
    in the job's zone, with UTC beside it (only once when the zone is UTC)."""
    when = dt.datetime.fromtimestamp(ms / 1000, UTC).astimezone(zone)
    text = f"{when:%a %Y-%m-%d %H:%M:%S} {when.tzname()}"
    if zone is not UTC:
        offset = when.strftime("%z")
        text += f" (UTC{offset[:3]}:{offset[3:]})  {utc_iso(ms)}"
    return f"{text}  {note}".rstrip()


def span_text(ms: int) -> str:
    """``1h30m``, ``2s``, ``500ms``: the flags' form (``words.flag_span``)."""
    return flag_span(ms)
