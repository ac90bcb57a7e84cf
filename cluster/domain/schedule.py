"""When a job fires: validation and next-instant arithmetic for schedules.

Pure: no clock, no randomness, no I/O beyond ``zoneinfo`` reading tzdata. Every
node must compute the same instants, so results depend only on the arguments (and
the installed tzdata). Times are int milliseconds since the Unix epoch (UTC).

Contract
--------
``next_fire(s, after_ms, anchor_ms)`` is the first scheduled instant strictly
greater than ``after_ms``, or ``None`` if there is none. It is monotone: for
every ``x`` in ``[after_ms, n)`` with ``n = next_fire(s, after_ms, ...)``,
``next_fire(s, x, ...) == n``, so walking ``after = next_fire(after)`` visits
every instant exactly once, in strictly increasing order.

* ``At``: fires once at ``at_ms`` (a past ``at`` is due at once: ``first_fire``
  returns it even when it is before the anchor).
* ``After``: fires once at ``anchor_ms + after_ms``.
* ``Every``: fires at ``anchor_ms + k * every_ms`` for ``k >= 1``.
* ``Cron``: croniter's syntax with 5 fields (minute hour day-of-month month
  day-of-week) or 6 fields where the 6th (LAST) field is seconds -- croniter's
  own convention. The ``@hourly``/``@daily``/... aliases are accepted. Hashed
  (``H``) and random (``R``) fields and the 7-field year form are rejected (``R``
  would make nodes disagree). Cron instants are whole seconds.

Cron and daylight saving time (a public guarantee)
--------------------------------------------------
The expression is matched against the zone's naive LOCAL wall-clock times, and
each matching wall time is mapped to one instant:

* a wall time that exists once fires at that instant;
* a wall time the clocks SKIP (spring forward) fires at the instant the gap ends,
  e.g. ``30 2 * * *`` in America/New_York on 2026-03-08 fires at 03:00 EDT; all
  skipped wall times of one gap, and the wall time at the gap's end, collapse
  into that single fire;
* a wall time the clocks REPEAT (fall back) fires only at its FIRST occurrence
  (the daylight-time one); nothing fires during the repeated pass.

An empty time zone means UTC. A cron search gives up after ``_HORIZON_YEARS``
years without a match and returns ``None``; ``validate_schedule`` rejects an
expression that never matches (e.g. ``0 0 30 2 *``).
"""

from __future__ import annotations

import copy
import functools
import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter

from cluster.domain.model import After, At, Cron, Every, Schedule

__all__ = ["MIN_EVERY_MS", "ScheduleError", "first_fire", "next_fire", "upcoming", "validate_schedule"]

MIN_EVERY_MS = 100

#: croniter's convention: in a 6-field expression the seconds field is the LAST one.
_SECONDS_FIRST = False
#: one cron search gives up after this many years without a match. Every expression
#: without a year field that matches at all matches within any 50 years (the longest
#: real gap, a weekday-constrained Feb 29 across a century year, is 40 years).
_HORIZON_YEARS = 50
#: safety bound on wall-time candidates examined by one ``next_fire`` call.
_MAX_CANDIDATES = 1000
#: validation looks for a first fire from here (2000-01-01 UTC): the 50 years after it
#: contain every kind of calendar year (leap or not, starting on any weekday).
_VALIDATION_REF_MS = 946_684_800_000
_ALIASES = frozenset({"@midnight", "@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually"})
_FIELD_RE = re.compile(r"\S+", re.ASCII)
_HASHED_RE = re.compile(r"^[hr](\(\d+-\d+\))?(/\d+)?$", re.ASCII | re.IGNORECASE)
_UTC_HINT = "use an IANA name such as 'Europe/Berlin' or 'UTC'"


class ScheduleError(ValueError):
    """A schedule that cannot be accepted; the message names the value and what is allowed."""


# ---------------------------------------------------------------- validation


def _check_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScheduleError(f"{name} must be an integer number of milliseconds, got {value!r}")
    return value


def validate_schedule(schedule: Schedule) -> None:
    """Raise ``ScheduleError`` unless ``schedule`` is a well-formed schedule that can fire."""
    if isinstance(schedule, At):
        if _check_int("at_ms", schedule.at_ms) < 0:
            raise ScheduleError(f"at_ms {schedule.at_ms} is before 1970: use an instant >= 0 (ms since the Unix epoch)")
    elif isinstance(schedule, After):
        if _check_int("after_ms", schedule.after_ms) < 0:
            raise ScheduleError(f"after_ms {schedule.after_ms} is a negative span: use a delay >= 0 ms")
    elif isinstance(schedule, Every):
        _check_every(schedule.every_ms)
    elif isinstance(schedule, Cron):
        _validate_cron(schedule)
    else:
        raise ScheduleError(f"unknown schedule {schedule!r}: use At, After, Every or Cron")


def _check_every(every_ms: object) -> int:
    every = _check_int("every_ms", every_ms)
    if every < MIN_EVERY_MS:
        kind = "negative" if every < 0 else "zero" if every == 0 else "too short"
        raise ScheduleError(f"every_ms {every} is {kind}: the interval must be at least {MIN_EVERY_MS} ms")
    return every


def _validate_cron(schedule: Cron) -> None:
    expr = schedule.expression
    if not isinstance(expr, str) or not expr.strip():
        raise ScheduleError(f"cron expression {expr!r} is empty: use e.g. '*/5 * * * *'")
    _zone(schedule.timezone)
    _parsed(expr)
    if next_fire(schedule, _VALIDATION_REF_MS, _VALIDATION_REF_MS) is None:
        raise ScheduleError(f"cron expression {expr!r} never fires: it names no date that exists (e.g. Feb 30)")


@functools.lru_cache(maxsize=256)
def _zone(name: str) -> ZoneInfo:
    """The zone called ``name`` ('' means UTC); ``ScheduleError`` if there is none."""
    if not isinstance(name, str):
        raise ScheduleError(f"unknown time zone {name!r}: {_UTC_HINT}")
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(f"unknown time zone {name!r}: {_UTC_HINT}") from None


@functools.lru_cache(maxsize=1024)
def _parsed(expression: str) -> croniter:
    """A parsed prototype iterator for ``expression``; copy it before use (it is stateful)."""
    fields = _FIELD_RE.findall(expression)
    shape = "use 5 fields (minute hour day-of-month month day-of-week) or 6 (the same, then seconds)"
    if len(fields) == 1 and fields[0].startswith("@"):
        if fields[0].lower() not in _ALIASES:
            raise ScheduleError(f"cron alias {expression!r} is not supported: use one of {', '.join(sorted(_ALIASES))}")
    elif len(fields) not in (5, 6):
        raise ScheduleError(f"cron expression {expression!r} has {len(fields)} fields: {shape}")
    if any(_HASHED_RE.match(part) for f in fields for part in f.split(",")):
        raise ScheduleError(f"cron expression {expression!r} uses H (hashed) or R (random) fields: use explicit values")
    try:
        return croniter(
            expression,
            datetime(2000, 1, 1),
            ret_type=datetime,
            max_years_between_matches=_HORIZON_YEARS,
            second_at_beginning=_SECONDS_FIRST,
        )
    except (CroniterError, ValueError, KeyError, TypeError) as exc:
        raise ScheduleError(f"invalid cron expression {expression!r} ({exc}): {shape}") from None


# -------------------------------------------------------------- next instants


def first_fire(schedule: Schedule, anchor_ms: int) -> int | None:
    """The first instant the job fires; ``anchor_ms`` is its creation (or last reschedule) time."""
    if isinstance(schedule, At):
        return schedule.at_ms
    if isinstance(schedule, After):
        return anchor_ms + schedule.after_ms
    if isinstance(schedule, Every):
        return anchor_ms + _check_every(schedule.every_ms)
    return next_fire(schedule, anchor_ms, anchor_ms)


def next_fire(schedule: Schedule, after_ms: int, anchor_ms: int) -> int | None:
    """The first scheduled instant strictly greater than ``after_ms``, or ``None``."""
    if isinstance(schedule, At):
        return schedule.at_ms if schedule.at_ms > after_ms else None
    if isinstance(schedule, After):
        due = anchor_ms + schedule.after_ms
        return due if due > after_ms else None
    if isinstance(schedule, Every):
        every = _check_every(schedule.every_ms)
        k = max(1, (after_ms - anchor_ms) // every + 1)
        return anchor_ms + k * every
    if isinstance(schedule, Cron):
        return _next_cron(schedule, after_ms)
    raise ScheduleError(f"unknown schedule {schedule!r}: use At, After, Every or Cron")


def upcoming(schedule: Schedule, after_ms: int, anchor_ms: int, count: int) -> list[int]:
    """The next ``count`` instants strictly after ``after_ms``, fewer if the schedule ends."""
    out: list[int] = []
    cursor = after_ms
    while len(out) < count:
        nxt = next_fire(schedule, cursor, anchor_ms)
        if nxt is None:
            break
        out.append(nxt)
        cursor = nxt
    return out


# ----------------------------------------------------------------- cron / DST


def _next_cron(schedule: Cron, after_ms: int) -> int | None:
    zone = _zone(schedule.timezone)
    it = copy.copy(_parsed(schedule.expression))
    after_s = after_ms // 1000  # every cron instant <= after_s * 1000 is <= after_ms
    try:
        it.set_current(_start_wall(zone, after_s), force=True)
        for _ in range(_MAX_CANDIDATES):
            wall: datetime = it.get_next(datetime)
            instant = _instant(zone, wall)
            if instant * 1000 > after_ms:
                return instant * 1000
    except (CroniterBadDateError, OverflowError, ValueError):
        return None  # no match within the horizon, or beyond datetime's range
    return None


def _start_wall(zone: ZoneInfo, after_s: int) -> datetime:
    """The naive wall time to search from so that no later wall time maps to <= after_s.

    In the second pass of a repeated interval, every wall time up to the end of the
    repetition maps to its first pass (already past), so start from that end instead.
    """
    local = datetime.fromtimestamp(after_s, zone)
    if local.fold:
        first_pass = int(local.replace(fold=0).timestamp())
        shift = after_s - first_pass
        second_pass_start = _transition(zone, first_pass, after_s)
        local = datetime.fromtimestamp(second_pass_start + shift - 1, zone)
    return local.replace(tzinfo=None, fold=0)


def _instant(zone: ZoneInfo, wall: datetime) -> int:
    """The instant (whole seconds) a naive wall time fires at, per the DST rules above."""
    t0 = int(wall.replace(tzinfo=zone, fold=0).timestamp())
    if datetime.fromtimestamp(t0, zone).replace(tzinfo=None) == wall:
        return t0  # exists (once, or first of two passes)
    t1 = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    return _transition(zone, min(t0, t1), max(t0, t1))  # skipped: the gap's end


def _transition(zone: ZoneInfo, lo: int, hi: int) -> int:
    """The smallest second in ``(lo, hi]`` whose UTC offset differs from ``lo``'s (bisection)."""
    before = _offset(zone, lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset(zone, mid) == before:
            lo = mid
        else:
            hi = mid
    return hi


def _offset(zone: ZoneInfo, t: int) -> timedelta | None:
    return datetime.fromtimestamp(t, zone).utcoffset()
