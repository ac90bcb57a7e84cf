"""The cron rules of command format 1 (before the rules of format 2), kept so that a rolling upgrade stays deterministic.

Format 2 changed which instants some cron jobs have (clock-following jobs
across DST; the day rule for ``*/n``, ``n#k``; ``L`` and ``nL``). Every
replica must compute the same instants for the same entry, so the rules a
command is applied with are part of the replicated state: a cluster on
command format 1 — a rolling upgrade from the release before, not finished
yet — applies the old rules on every node, the upgraded ones included; the
committed ``SetClusterFormat(2)`` switches every replica to the new rules at
the same entry. A log replayed from the start gives the same state.

``under_rules(schedule, cluster_format)`` is what the state machine calls:
a ``Cron`` becomes a ``LegacyCron`` while the cluster is on format 1, and
``raftsched.cluster.domain.schedule.next_fire`` evaluates it with ``legacy_next``: the
previous release's evaluator (croniter, pinned, as it was), with one
difference on purpose — an expression it cannot read never fires (``None``)
instead of failing the whole ``Fire`` command. Such an expression (``L``,
``nL``, ...) can only come from an upgraded node; ``check_legacy`` lets the
proposer refuse it while the cluster is on format 1.

Pure: no clock; zones from the pinned tzdata (``zones``).
"""

from __future__ import annotations

import copy
import functools
import re
from datetime import datetime, timedelta
from typing import NamedTuple
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, CroniterError, croniter

from raftsched.cluster.domain.model import Cron, Schedule
from raftsched.cluster.domain.schedule.zones import schedule_zone

#: the first command format whose cron rules are today's
NEW_RULES_FORMAT = 2
_HORIZON_YEARS = 50
_MAX_CANDIDATES = 1000
_ALIASES = frozenset({"@midnight", "@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually"})
_FIELD_RE = re.compile(r"\S+", re.ASCII)
_HASHED_RE = re.compile(r"^[hr](\(\d+-\d+\))?(/\d+)?$", re.ASCII | re.IGNORECASE)


class LegacyCron(NamedTuple):
    """A cron schedule evaluated with the rules of command format 1."""

    expression: str
    timezone: str = "UTC"


def under_rules(schedule: Schedule, cluster_format: int) -> Schedule | LegacyCron:
    """``schedule`` as the cluster's command format evaluates it."""
    if cluster_format < NEW_RULES_FORMAT and isinstance(schedule, Cron):
        return LegacyCron(schedule.expression, schedule.timezone)
    return schedule


def check_legacy(expression: str) -> str | None:
    """Why the format-1 rules cannot read ``expression`` (None: they can)."""
    try:
        _parsed(expression)
        return None
    except ValueError as exc:
        return str(exc)


@functools.lru_cache(maxsize=1024)
def _parsed(expression: str) -> croniter:
    fields = _FIELD_RE.findall(expression)
    if len(fields) == 1 and fields[0].startswith("@"):
        if fields[0].lower() not in _ALIASES:
            raise ValueError(f"cron alias {expression!r} is not supported")
    elif len(fields) not in (5, 6):
        raise ValueError(f"cron expression {expression!r} has {len(fields)} fields")
    if any(_HASHED_RE.match(part) for f in fields for part in f.split(",")):
        raise ValueError(f"cron expression {expression!r} uses H or R fields")
    try:
        return croniter(
            expression,
            datetime(2000, 1, 1),
            ret_type=datetime,
            max_years_between_matches=_HORIZON_YEARS,
            second_at_beginning=False,
        )
    except (CroniterError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"invalid cron expression {expression!r} ({exc})") from None


def legacy_next(schedule: LegacyCron, after_ms: int) -> int | None:
    """The first instant after ``after_ms`` under the format-1 rules (the previous release's ``_next_cron``)."""
    try:
        zone = schedule_zone(schedule.timezone)
        it = copy.copy(_parsed(schedule.expression))
    except ValueError:  # an unknown zone (ScheduleError) too
        return None
    after_s = after_ms // 1000
    try:
        it.set_current(_start_wall(zone, after_s), force=True)
        for _ in range(_MAX_CANDIDATES):
            wall: datetime = it.get_next(datetime)
            instant = _instant(zone, wall)
            if instant * 1000 > after_ms:
                return instant * 1000
    except (CroniterBadDateError, OverflowError, ValueError):
        return None
    return None


def _start_wall(zone: ZoneInfo, after_s: int) -> datetime:
    local = datetime.fromtimestamp(after_s, zone)
    if local.fold:
        first_pass = int(local.replace(fold=0).timestamp())
        shift = after_s - first_pass
        second_pass_start = _transition(zone, first_pass, after_s)
        local = datetime.fromtimestamp(second_pass_start + shift - 1, zone)
    return local.replace(tzinfo=None, fold=0)


def _instant(zone: ZoneInfo, wall: datetime) -> int:
    t0 = int(wall.replace(tzinfo=zone, fold=0).timestamp())
    if datetime.fromtimestamp(t0, zone).replace(tzinfo=None) == wall:
        return t0
    t1 = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    return _transition(zone, min(t0, t1), max(t0, t1))


def _transition(zone: ZoneInfo, lo: int, hi: int) -> int:
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
