"""Notes for people on what DST did to a cron instant (shown by ``job preview``).

Pure. ``explain(zone, f, previous_s, instant_s)`` explains ``instant_s``, the
instant that follows ``previous_s`` (the previous instant, or where the
preview started), and returns "" when DST did nothing to it:

* repeated wall time, clock-following job: "repeated hour (first pass, EDT)"
  or "repeated hour (second pass, EST)";
* repeated wall time, job with specific hours: "repeated hour (first pass,
  EDT): fires once, not again at 01:30 EST";
* skipped wall times, job with specific hours (the instant is the gap's end):
  "02:30 skipped by DST: fired at the end of the gap, 03:00 EDT";
* skipped wall times, clock-following job (on the first instant after the
  gap): "02:30 skipped by DST: not fired (the job follows the clock)".

"Hour" is loose: Australia/Lord_Howe repeats and skips 30 minutes.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from raftsched.cluster.domain.schedule.cron_calendar import next_wall
from raftsched.cluster.domain.schedule.cron_dst import next_change, offset_s, wall_of
from raftsched.cluster.domain.schedule.cron_fields import CronFields

__all__ = ["explain"]

_SECOND = timedelta(seconds=1)
#: how many skipped wall times a note counts one by one
_COUNT_CAP = 100


def _hm(wall: datetime) -> str:
    return f"{wall:%H:%M:%S}" if wall.second else f"{wall:%H:%M}"


def _abbr(zone: ZoneInfo, t: int) -> str:
    return datetime.fromtimestamp(t, zone).tzname() or ""


def _skipped(f: CronFields, zone: ZoneInfo, gap_end: int) -> str:
    """The matching wall times that the gap ending at ``gap_end`` skipped, as text ("" when none)."""
    first_wall, end_wall = wall_of(zone, gap_end - 1) + _SECOND, wall_of(zone, gap_end)
    found: list[datetime] = []
    wall = next_wall(f, first_wall, end_wall.date())
    while wall is not None and wall < end_wall and len(found) < _COUNT_CAP:
        found.append(wall)
        wall = next_wall(f, wall + _SECOND, end_wall.date())
    if not found:
        return ""
    shown = ", ".join(_hm(w) for w in found[:3])
    return shown + (f" and {len(found) - 3} more" if len(found) > 3 else "")


def _gap_note(zone: ZoneInfo, f: CronFields, previous_s: int, instant_s: int) -> str:
    if not f.follows_clock:
        if offset_s(zone, instant_s - 1) < offset_s(zone, instant_s):
            skipped = _skipped(f, zone, instant_s)
            if skipped:
                end = f"{_hm(wall_of(zone, instant_s))} {_abbr(zone, instant_s)}"
                return f"{skipped} skipped by DST: fired at the end of the gap, {end}"
        return ""
    notes = []
    change = next_change(zone, previous_s, instant_s)
    while change is not None:
        if offset_s(zone, change - 1) < offset_s(zone, change):
            skipped = _skipped(f, zone, change)
            if skipped:
                notes.append(f"{skipped} skipped by DST: not fired (the job follows the clock)")
        change = next_change(zone, change, instant_s)
    return "; ".join(notes)


def _repeat_note(zone: ZoneInfo, f: CronFields, instant_s: int) -> str:
    wall = wall_of(zone, instant_s)
    passes = sorted({int(wall.replace(tzinfo=zone, fold=fold).timestamp()) for fold in (0, 1)})
    if len(passes) < 2 or any(wall_of(zone, t) != wall for t in passes):
        return ""
    which = "first" if instant_s == passes[0] else "second"
    note = f"repeated hour ({which} pass, {_abbr(zone, instant_s)})"
    if not f.follows_clock:
        note += f": fires once, not again at {_hm(wall)} {_abbr(zone, passes[1])}"
    return note


def explain(zone: ZoneInfo, f: CronFields, previous_s: int, instant_s: int) -> str:
    """A note on what DST did to ``instant_s`` (the instant after ``previous_s``); "" when nothing."""
    notes = [n for n in (_gap_note(zone, f, previous_s, instant_s), _repeat_note(zone, f, instant_s)) if n]
    return "; ".join(notes)
