"""Plain words for the values the state machine writes into a run's explanation (``run_history``).

Pure and deterministic: the same value reads the same on every node (no clock, no locale).
"""

from __future__ import annotations

from datetime import date, timedelta

from raftsched.cluster.domain.model import After, At, Cron, Every, Schedule

#: day number since the epoch -> its ISO date (a few are in use at a time: cleared when it grows)
_DAYS: dict[int, str] = {}
_EPOCH = date(1970, 1, 1)


def iso(ms: int) -> str:
    """An instant as UTC ISO 8601 with milliseconds (``2026-11-26T14:00:00.000Z``); cheap: it runs inside apply."""
    day, rest = divmod(ms, 86_400_000)
    prefix = _DAYS.get(day)
    if prefix is None:
        try:
            prefix = (_EPOCH + timedelta(days=day)).isoformat()
        except OverflowError:
            return f"{ms} ms"
        if len(_DAYS) >= 1024:
            _DAYS.clear()
        _DAYS[day] = prefix
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{prefix}T{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}Z"


def span(ms: int) -> str:
    """A span: ``850 ms``, ``1.2 s``, ``3 min 5 s``, ``2 h 0 min``."""
    if ms < 0:
        return f"-{span(-ms)}"
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s".replace(".0 s", " s")
    if ms < 3_600_000:
        return f"{ms // 60_000} min {(ms % 60_000) // 1000} s"
    return f"{ms // 3_600_000} h {(ms % 3_600_000) // 60_000} min"


def flag_span(ms: int) -> str:
    """A span as the flags write it: ``1h30m``, ``2s``, ``500ms`` (the largest units that divide it). For people
    reading tables and pages (the command line, the web view); apply's own messages keep ``span``'s form."""
    if ms == 0:
        return "0s"
    parts, left = [], abs(ms)
    for unit, size in _FLAG_UNITS:
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    if left:
        parts.append(f"{left}ms")
    return ("-" if ms < 0 else "") + "".join(parts)


_FLAG_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000))


def schedule_words(schedule: Schedule) -> str:
    if isinstance(schedule, Every):
        return f"every {span(schedule.every_ms)}"
    if isinstance(schedule, Cron):
        return f"cron {schedule.expression!r} in {schedule.timezone}"
    if isinstance(schedule, At):
        return f"once at {iso(schedule.at_ms)}"
    if isinstance(schedule, After):
        return f"once, {span(schedule.after_ms)} after the job was created"
    return repr(schedule)
