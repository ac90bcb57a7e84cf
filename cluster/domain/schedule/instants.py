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
* ``Cron``: 5 fields (minute hour day-of-month month day-of-week) or 6 where
  the 6th (LAST) field is seconds -- croniter's convention (``0 12 * * * 30`` is
  12:00:30). The syntax, the day rule and the DST rules are those of
  ``docs/api.md`` ("Cron semantics"): ``cron_fields`` parses (croniter
  expands the plain terms), ``cron_calendar`` decides days and wall times,
  ``cron_dst`` maps wall times to instants. In short: when day-of-month and
  day-of-week are both restricted (anything but exactly ``*`` or ``?``) a day
  matches if either does; a job whose hour field is ``*`` or ``*/n`` follows
  the clock across DST (both passes of a repeated hour, nothing for a skipped
  one); a job with specific hours fires a skipped wall time once at the end
  of the gap and a repeated one once, at its first occurrence. Cron instants
  are whole seconds.

``explain_instant(s, previous_ms, instant_ms)`` is a note for people on what
DST did to an instant ("" when nothing): see ``cron_notes``.

An empty time zone means UTC. A cron search gives up after ``_HORIZON_YEARS``
years without a match and returns ``None``; ``validate_schedule`` rejects an
expression that never matches (e.g. ``0 0 30 2 *``). An expression stored
before a syntax change and no longer accepted (``W``) never fires again rather
than fail a ``Fire`` command: ``next_fire`` never raises for a ``Cron``.
"""

from __future__ import annotations

import functools
from datetime import date, datetime
from typing import NamedTuple, Union

from raftsched.cluster.domain.model import After, At, Cron, Every, Job, JobSpec, JobStatus, Schedule
from raftsched.cluster.domain.schedule import cron_notes
from raftsched.cluster.domain.schedule.cron_dst import clock_next, once_next
from raftsched.cluster.domain.schedule.cron_fields import CronFields, ScheduleError, parse_cron
from raftsched.cluster.domain.schedule.legacy import NEW_RULES_FORMAT, LegacyCron, legacy_next, under_rules
from raftsched.cluster.domain.schedule.zones import schedule_zone

__all__ = [
    "AnySchedule",
    "MIN_EVERY_MS",
    "ScheduleError",
    "explain_instant",
    "first_fire",
    "job_schedule",
    "next_fire",
    "upcoming",
    "validate_schedule",
]

MIN_EVERY_MS = 100


class Shaped(NamedTuple):
    """A schedule as a job's spec shapes it (command format 5): the union of its own instants and those of
    ``extra`` (more cron expressions), none before ``start_ms`` or after ``end_ms`` (0: unbounded)."""

    base: Union[Schedule, LegacyCron]
    extra: tuple[Union[Cron, LegacyCron], ...] = ()
    start_ms: int = 0
    end_ms: int = 0


#: what the next-instant functions take: a schedule, or a cron schedule under the rules of command
#: format 1 (``raftsched.cluster.domain.schedule.legacy``: what the state machine passes while the cluster is on format 1),
#: or either shaped by a spec's bounds and extra expressions (``job_schedule``)
AnySchedule = Union[Schedule, LegacyCron, Shaped]


def job_schedule(spec: JobSpec, cluster_format: int) -> AnySchedule:
    """The schedule the state machine evaluates for ``spec``: its own, under the cluster's cron rules, shaped by
    its bounds and extra expressions when it has any."""
    base = under_rules(spec.schedule, cluster_format)
    if not (spec.start_ms or spec.end_ms or spec.extra_crons):
        return base
    extra = tuple(under_rules(c, cluster_format) for c in spec.extra_crons)
    return Shaped(base, extra, spec.start_ms, spec.end_ms)  # type: ignore[arg-type]


#: one cron search gives up after this many years without a match. Every expression
#: without a year field that matches at all matches within any 50 years (the longest
#: real gap, a weekday-constrained Feb 29 across a century year, is 40 years).
_HORIZON_YEARS = 50
#: validation looks for a first fire from here (2000-01-01 UTC): the 50 years after it
#: contain every kind of calendar year (leap or not, starting on any weekday).
_VALIDATION_REF_MS = 946_684_800_000


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
    schedule_zone(schedule.timezone)
    _fields(expr)
    if next_fire(schedule, _VALIDATION_REF_MS, _VALIDATION_REF_MS) is None:
        raise ScheduleError(f"cron expression {expr!r} never fires: it names no date that exists (e.g. Feb 30)")


@functools.lru_cache(maxsize=1024)
def _fields(expression: str) -> CronFields:
    """The parsed expression (cached: parsing is the expensive part)."""
    return parse_cron(expression)


# -------------------------------------------------------------- next instants


def first_fire(schedule: AnySchedule, anchor_ms: int) -> int | None:
    """The first instant the job fires; ``anchor_ms`` is its creation (or last reschedule) time."""
    if isinstance(schedule, Shaped):
        return _first_shaped(schedule, anchor_ms)
    if isinstance(schedule, At):
        return schedule.at_ms
    if isinstance(schedule, After):
        return anchor_ms + schedule.after_ms
    if isinstance(schedule, Every):
        return anchor_ms + _check_every(schedule.every_ms)
    return next_fire(schedule, anchor_ms, anchor_ms)


def next_fire(schedule: AnySchedule, after_ms: int, anchor_ms: int) -> int | None:
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
    if isinstance(schedule, LegacyCron):
        return legacy_next(schedule, after_ms)
    if isinstance(schedule, Shaped):
        return _next_shaped(schedule, after_ms, anchor_ms)
    raise ScheduleError(f"unknown schedule {schedule!r}: use At, After, Every or Cron")


def _earliest(found: list[int | None]) -> int | None:
    times = [t for t in found if t is not None]
    return min(times) if times else None


def _next_shaped(s: Shaped, after_ms: int, anchor_ms: int) -> int | None:
    if s.start_ms:
        after_ms = max(after_ms, s.start_ms - 1)
    nxt = _earliest([next_fire(p, after_ms, anchor_ms) for p in (s.base, *s.extra)])
    return None if nxt is None or (s.end_ms and nxt > s.end_ms) else nxt


def _first_shaped(s: Shaped, anchor_ms: int) -> int | None:
    first = _earliest([first_fire(p, anchor_ms) for p in (s.base, *s.extra)])
    if first is not None and s.start_ms and first < s.start_ms:
        first = _next_shaped(s, s.start_ms - 1, anchor_ms)
    return None if first is None or (s.end_ms and first > s.end_ms) else first


def upcoming(schedule: AnySchedule, after_ms: int, anchor_ms: int, count: int) -> list[int]:
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


#: how many of a job's next instants a read of the job lists (``Job.upcoming`` in the API)
UPCOMING = 5
#: the last instant a timestamp in the API can carry (9999-12-31T23:59:59.999Z)
_LAST_MS = 253_402_300_799_999


def job_upcoming(job: Job, count: int = UPCOMING) -> list[int]:
    """An ACTIVE job's next ``count`` instants from its next fire, in order (fewer when its schedule ends);
    none for a job that is paused, completed, deleted or will not fire again."""
    if job.status is not JobStatus.ACTIVE or job.next_fire_ms is None or count <= 0:
        return []
    if isinstance(job.spec.schedule, (At, After)):  # a one-off: its one instant
        return [job.next_fire_ms]
    try:
        later = upcoming(job_schedule(job.spec, NEW_RULES_FORMAT), job.next_fire_ms, job.anchor_ms, count - 1)
    except (ScheduleError, OverflowError, ValueError):
        later = []
    return [job.next_fire_ms] + [t for t in later if t <= _LAST_MS]


def explain_instant(schedule: Schedule, previous_ms: int, instant_ms: int) -> str:
    """What DST did to ``instant_ms`` (the instant after ``previous_ms``), for people; "" when nothing."""
    if not isinstance(schedule, Cron):
        return ""
    try:
        zone, fields = schedule_zone(schedule.timezone), _fields(schedule.expression)
        return cron_notes.explain(zone, fields, previous_ms // 1000, instant_ms // 1000)
    except (ScheduleError, OverflowError, ValueError):
        return ""


# ----------------------------------------------------------------- cron / DST


def _next_cron(schedule: Cron, after_ms: int) -> int | None:
    after_s = after_ms // 1000  # every cron instant <= after_s * 1000 is <= after_ms
    try:
        zone, fields = schedule_zone(schedule.timezone), _fields(schedule.expression)
        start = datetime.fromtimestamp(after_s, zone)
        limit = date(min(start.year + _HORIZON_YEARS, 9998), 12, 31)
        search = clock_next if fields.follows_clock else once_next
        instant = search(zone, fields, after_s, limit)
    except (ScheduleError, OverflowError, ValueError, OSError):
        return None  # beyond datetime's range, or stored before its syntax was refused
    return None if instant is None else instant * 1000
