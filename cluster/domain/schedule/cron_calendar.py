"""Which calendar days and wall-clock times a cron expression matches.

Pure. Wall times are naive ``datetime`` values (local time, no zone): this
module knows nothing of instants or DST (``cron_dst`` maps wall times to
instants).

Contract
--------
* ``day_matches(f, d)`` is the day rule of ``docs/api.md``: a day field is
  unrestricted only when its text is exactly ``*`` or ``?``. When both
  day-of-month and day-of-week are restricted a day matches if EITHER matches
  (Kubernetes CronJob's robfig/cron rule), whatever their form: lists, ranges,
  ``*/n``, ``L``, ``n#k``, ``nL``. When one is restricted, it alone decides;
  when neither is, every day matches. The month must match in every case.
* ``next_wall(f, start, limit)`` is the first matching wall time ``>= start``
  on a date ``<= limit``, or ``None``. It walks dates (months that cannot
  match are jumped over) and then the sorted hours, minutes and seconds of the
  first matching date.
"""

from __future__ import annotations

import bisect
import calendar
from datetime import date, datetime, timedelta

from raftsched.cluster.domain.schedule.cron_fields import CronFields

__all__ = ["day_matches", "next_wall"]

_DAY = timedelta(days=1)


def _dom_matches(f: CronFields, d: date, last: int) -> bool:
    return d.day in f.days or (f.last_day and d.day == last)


def _dow_matches(f: CronFields, d: date, last: int) -> bool:
    weekday = (d.weekday() + 1) % 7  # cron counts from Sunday = 0
    if weekday in f.weekdays:
        return True
    if (weekday, (d.day + 6) // 7) in f.nth_weekdays:
        return True
    return weekday in f.last_weekdays and d.day + 7 > last


def day_matches(f: CronFields, d: date) -> bool:
    """Whether ``d`` is a day the expression fires on (month and day rule)."""
    if d.month not in f.months:
        return False
    if not f.dom_restricted and not f.dow_restricted:
        return True
    last = calendar.monthrange(d.year, d.month)[1]
    if f.dom_restricted and f.dow_restricted:
        return _dom_matches(f, d, last) or _dow_matches(f, d, last)
    if f.dom_restricted:
        return _dom_matches(f, d, last)
    return _dow_matches(f, d, last)


def _next_month_start(d: date) -> date:
    return date(d.year + 1, 1, 1) if d.month == 12 else date(d.year, d.month + 1, 1)


def _next_day(f: CronFields, d: date, limit: date) -> date | None:
    """The first matching date ``>= d`` and ``<= limit``."""
    while d <= limit:
        if d.month not in f.months:
            if d.year == limit.year and d.month == limit.month:
                return None
            d = _next_month_start(d)
        elif day_matches(f, d):
            return d
        elif d == limit:
            return None
        else:
            d += _DAY
    return None


def _next_time(f: CronFields, hour: int, minute: int, second: int) -> tuple[int, int, int] | None:
    """The first (hour, minute, second) of the expression at or after the given one, same day."""
    for h in f.hours[bisect.bisect_left(f.hours, hour) :]:
        if h > hour:
            return h, f.minutes[0], f.seconds[0]
        for m in f.minutes[bisect.bisect_left(f.minutes, minute) :]:
            if m > minute:
                return h, m, f.seconds[0]
            i = bisect.bisect_left(f.seconds, second)
            if i < len(f.seconds):
                return h, m, f.seconds[i]
    return None


def next_wall(f: CronFields, start: datetime, limit: date) -> datetime | None:
    """The first matching naive wall time ``>= start`` (whole seconds) on a date ``<= limit``."""
    d: date | None = start.date()
    first = (f.hours[0], f.minutes[0], f.seconds[0])
    while d is not None and d <= limit:
        d = _next_day(f, d, limit)
        if d is None:
            return None
        hms = _next_time(f, start.hour, start.minute, start.second) if d == start.date() else first
        if hms is not None:
            return datetime(d.year, d.month, d.day, *hms)
        if d == limit:
            return None
        d += _DAY
    return None
