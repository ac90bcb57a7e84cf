"""Cron wall times to instants in a time zone, across DST changes.

Pure: zone data comes in as a ``ZoneInfo``; times are whole seconds since the
Unix epoch. Both searches return the first instant strictly after
``after_s``, or ``None`` when no wall time matches on a date up to ``limit``.

The two rules (``docs/api.md``, "Cron semantics"):

* ``clock_next`` -- a job that follows the clock (hour field ``*`` or
  ``*/n``): an instant fires when its local wall time matches. A repeated
  hour fires in both passes (an every-15-minutes job keeps firing every 15
  real minutes); a skipped hour has no instants, and nothing fires for it.
* ``once_next`` -- a job with specific hours (a time of day): each matching
  wall time fires once -- at its instant; at the end of the gap when a change
  skips it (all skipped wall times of one gap, and the gap's end itself, are
  one fire); at its first occurrence when a change repeats it.

Assumption: a zone's UTC offset changes at most once in any 24 hours (in
tzdata 2025 the closest two changes since 1900 are 95 hours apart;
tests/unit/test_cron_dst.py checks the zones it uses), so probing the offset
once a day finds every change, and bisection pins it to the second.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from raftsched.cluster.domain.schedule.cron_calendar import next_wall
from raftsched.cluster.domain.schedule.cron_fields import CronFields

__all__ = ["clock_next", "next_change", "offset_s", "once_instant", "once_next", "wall_of"]

_EPOCH = datetime(1970, 1, 1)
_SECOND = timedelta(seconds=1)
_PROBE_S = 86_400


def offset_s(zone: ZoneInfo, t: int) -> int:
    """The zone's UTC offset at instant ``t``, in seconds."""
    off = datetime.fromtimestamp(t, zone).utcoffset()
    return 0 if off is None else off // _SECOND


def wall_of(zone: ZoneInfo, t: int) -> datetime:
    """The naive local wall time of instant ``t``."""
    return _EPOCH + timedelta(seconds=t + offset_s(zone, t))


def _epoch_of(wall: datetime) -> int:
    """Seconds of a naive wall time read as if it were UTC."""
    return (wall - _EPOCH) // _SECOND


def _bisect_change(zone: ZoneInfo, lo: int, hi: int) -> int:
    """The smallest second in ``(lo, hi]`` whose offset differs from ``lo``'s (one change in between)."""
    before = offset_s(zone, lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if offset_s(zone, mid) == before:
            lo = mid
        else:
            hi = mid
    return hi


def next_change(zone: ZoneInfo, lo: int, hi: int) -> int | None:
    """The first second in ``(lo, hi]`` whose offset differs from ``lo``'s, or ``None``."""
    before = offset_s(zone, lo)
    while lo < hi:
        probe = min(lo + _PROBE_S, hi)
        if offset_s(zone, probe) != before:
            return _bisect_change(zone, lo, probe)
        lo = probe
    return None


def clock_next(zone: ZoneInfo, f: CronFields, after_s: int, limit: date) -> int | None:
    """The first instant ``> after_s`` whose local wall time matches (a clock-following job)."""
    t = after_s + 1
    while True:
        off = offset_s(zone, t)
        wall = next_wall(f, _EPOCH + timedelta(seconds=t + off), limit)
        if wall is None:
            return None
        candidate = _epoch_of(wall) - off  # right while the offset stays ``off``
        change = next_change(zone, t, candidate)
        if change is None:
            return candidate
        t = change  # the wall times of [t, change) did not match: go on under the new offset


def once_instant(zone: ZoneInfo, wall: datetime) -> int:
    """The instant a wall time fires at under the once-rule: itself, its first pass, or its gap's end."""
    first = int(wall.replace(tzinfo=zone, fold=0).timestamp())
    if wall_of(zone, first) == wall:
        return first  # exists (once, or the first of two passes)
    other = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    return _bisect_change(zone, min(first, other), max(first, other))  # skipped: the gap's end


def _last_handled_wall(zone: ZoneInfo, after_s: int) -> datetime:
    """The wall time after which every matching wall time fires (once-rule) strictly after ``after_s``.

    In the second pass of a repeated interval, every wall time up to the end of
    the repetition fired in the first pass (already past): skip to that end.
    """
    local = datetime.fromtimestamp(after_s, zone)
    if local.fold:
        first_pass = int(local.replace(fold=0).timestamp())
        second_pass_start = _bisect_change(zone, first_pass, after_s)
        return wall_of(zone, second_pass_start + (after_s - first_pass) - 1)
    return local.replace(tzinfo=None)


def once_next(zone: ZoneInfo, f: CronFields, after_s: int, limit: date) -> int | None:
    """The first instant ``> after_s`` of a job with specific hours (the once-rule)."""
    wall = next_wall(f, _last_handled_wall(zone, after_s) + _SECOND, limit)
    return None if wall is None else once_instant(zone, wall)
