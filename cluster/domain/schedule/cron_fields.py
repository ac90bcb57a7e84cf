"""Cron fields: what a cron expression says, parsed once into plain sets.

Pure and deterministic. ``parse_cron(expression)`` returns ``CronFields`` or
raises ``ScheduleError`` (a ``ValueError``) whose message quotes the
expression, names the field and says what is accepted there.

Accepted (``docs/api.md``, "Cron semantics"):

* 5 fields ``minute hour day-of-month month day-of-week``, or 6 whose 6th
  (LAST) field is seconds -- croniter's form: ``0 12 * * * 30`` is 12:00:30
  every day. The aliases ``@yearly @annually @monthly @weekly @daily
  @midnight @hourly``.
* In every field: numbers, names (``JAN``, ``MON``), ranges, lists and steps
  (``*/15``, ``10-40/10``, ``5/10``). croniter parses these "plain" terms, one
  field at a time so that an error names its field. Where croniter is wrong we
  step in: a one-value range ``5-5`` (croniter 7 expands it to ``*``) is
  handed over as ``5``, and ``W`` (croniter's expansion drops it silently) is
  refused.
* ``?`` in a day field means ``*``. ``L`` in day-of-month is the month's last
  day. In day-of-week, ``n#k`` (the k-th weekday n of the month, k 1-5:
  ``5#3`` is the third Friday) and ``nL`` (the last weekday n of the month:
  ``5L`` is the last Friday; croniter's spelling ``L5`` reads the same), mixed
  freely with plain terms. These are parsed here: croniter refuses ``nL`` and
  lists that mix ``#`` with plain values. Weekdays are 0-7, 0 and 7 Sunday.
* Refused: ``H``/``R`` (hashed/random: nodes would disagree), ``W``/``LW``,
  ``L-n``, a 7th (year) field.

Two more facts ride along, for the day rule and the DST rule: whether each
day field is *restricted* (its text is anything but exactly ``*`` or ``?``)
and whether the job *follows the clock* (its hour field is exactly ``*`` or
``*/n``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from croniter import CroniterError, croniter

from raftsched.cluster.domain.schedule.errors import ScheduleError  # re-exported: this module's error

__all__ = ["CronFields", "FIELD_NAMES", "ScheduleError", "parse_cron"]

#: the fields in the order they are written (seconds, when given, come LAST)
FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week", "second")
_FULL = {
    "minute": range(0, 60),
    "hour": range(0, 24),
    "day-of-month": range(1, 32),
    "month": range(1, 13),
    "day-of-week": range(0, 7),
    "second": range(0, 60),
}
_ACCEPTED = {
    "minute": "0-59, ranges (0-29), lists (0,30), steps (*/15, 5-55/10)",
    "hour": "0-23, ranges (9-17), lists (9,13), steps (*/2)",
    "day-of-month": "1-31, L (the last day), ?, ranges (1-7), lists (1,15), steps (*/5)",
    "month": "1-12 or JAN-DEC, ranges (JAN-MAR), lists, steps (*/3)",
    "day-of-week": (
        "0-7 or SUN-SAT (0 and 7 are Sunday), ?, ranges (MON-FRI), lists, steps (*/2), "
        "n#k (5#3: the third Friday), nL (5L: the last Friday)"
    ),
    "second": "0-59, ranges, lists, steps (the 6th field is seconds: '0 12 * * * 30' is 12:00:30)",
}
_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_WEEKDAY_NAMES = {name: i for i, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
_WEEKDAY = r"(\d|[A-Z]{3})"
_NTH_RE = re.compile(rf"^{_WEEKDAY}#(\d+)$")
_LAST_RE = re.compile(rf"^(?:{_WEEKDAY}L|L(\d))$")
_POINT_RANGE_RE = re.compile(r"^([0-9A-Z]+)-\1(/\d+)?$")
_CLOCK_HOUR_RE = re.compile(r"^\*(/\d+)?$")
_HASHED_RE = re.compile(r"^[HR](\(\d+-\d+\))?(/\d+)?$")
_SHAPE = "use 5 fields (minute hour day-of-month month day-of-week) or 6 (the same, then seconds)"


@dataclass(frozen=True, slots=True)
class CronFields:
    """The parsed expression: sorted time-of-day values, day sets, and the two rule flags."""

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: frozenset[int]
    days: frozenset[int]
    last_day: bool
    weekdays: frozenset[int]  # 0 = Sunday
    nth_weekdays: frozenset[tuple[int, int]]  # (weekday, k): the k-th such weekday of the month
    last_weekdays: frozenset[int]
    dom_restricted: bool
    dow_restricted: bool
    follows_clock: bool


def parse_cron(expression: str) -> CronFields:
    """The fields of ``expression``; ``ScheduleError`` naming the field when one is not accepted."""
    if not isinstance(expression, str) or not expression.strip():
        raise ScheduleError(f"cron expression {expression!r} is empty: use e.g. '*/5 * * * *'")
    texts = expression.upper().split()
    if len(texts) == 1 and texts[0].startswith("@"):
        if texts[0].lower() not in _ALIASES:
            raise ScheduleError(f"cron alias {expression!r} is not supported: use one of {', '.join(sorted(_ALIASES))}")
        texts = _ALIASES[texts[0].lower()].split()
    elif len(texts) not in (5, 6):
        raise ScheduleError(f"cron expression {expression!r} has {len(texts)} fields: {_SHAPE}")
    if any(_HASHED_RE.match(term) for text in texts for term in text.split(",")):
        raise ScheduleError(f"cron expression {expression!r} uses H (hashed) or R (random) fields: use explicit values")
    text = dict(zip(FIELD_NAMES, texts + ["0"] if len(texts) == 5 else texts))
    dom_terms = [t for t in text["day-of-month"].split(",") if t != "L"]
    weekdays, nth, last = _weekday_terms(expression, text["day-of-week"])
    return CronFields(
        seconds=tuple(sorted(_plain(expression, "second", [text["second"]]))),
        minutes=tuple(sorted(_plain(expression, "minute", [text["minute"]]))),
        hours=tuple(sorted(_plain(expression, "hour", [text["hour"]]))),
        months=_plain(expression, "month", [text["month"]]),
        days=_plain(expression, "day-of-month", dom_terms),
        last_day="L" in text["day-of-month"].split(","),
        weekdays=weekdays,
        nth_weekdays=nth,
        last_weekdays=last,
        dom_restricted=text["day-of-month"] not in ("*", "?"),
        dow_restricted=text["day-of-week"] not in ("*", "?"),
        follows_clock=bool(_CLOCK_HOUR_RE.match(text["hour"])),
    )


def _refuse(expression: str, field: str, text: str, why: str = "is not accepted") -> ScheduleError:
    return ScheduleError(f"invalid cron expression {expression!r}: the {field} field {text!r} {why}; use {_ACCEPTED[field]}")


def _plain(expression: str, field: str, terms: list[str]) -> frozenset[int]:
    """The values of plain terms (numbers, names, ranges, lists, steps), expanded by croniter."""
    if not terms:
        return frozenset()
    joined = ",".join(terms)
    if joined == "?" and field in ("day-of-month", "day-of-week"):
        joined = "*"
    if "W" in joined and field == "day-of-month":
        raise _refuse(expression, field, joined, "uses W (nearest weekday), which raftsched does not support")
    joined = ",".join(_POINT_RANGE_RE.sub(r"\1", term) for term in joined.split(","))
    probe = ["*"] * len(FIELD_NAMES)
    probe[FIELD_NAMES.index(field)] = joined
    try:
        expanded, nth = croniter.expand(" ".join(probe), second_at_beginning=False)
    except (CroniterError, ValueError, KeyError, TypeError, IndexError):
        raise _refuse(expression, field, joined) from None
    values = expanded[FIELD_NAMES.index(field)]
    if nth or any(not isinstance(v, int) for v in values if v != "*"):
        raise _refuse(expression, field, joined)
    return frozenset(_FULL[field]) if "*" in values else frozenset(int(v) for v in values)


def _weekday(expression: str, text: str, name: str) -> int:
    value = _WEEKDAY_NAMES.get(name) if not name.isdigit() else int(name)
    if value is None or not 0 <= value <= 7:
        raise _refuse(expression, "day-of-week", text, f"names no weekday ({name!r})")
    return value % 7


def _weekday_terms(expression: str, text: str) -> tuple[frozenset[int], frozenset[tuple[int, int]], frozenset[int]]:
    """Plain weekdays, ``n#k`` pairs and ``nL`` weekdays of the day-of-week field."""
    plain: list[str] = []
    nth: set[tuple[int, int]] = set()
    last: set[int] = set()
    for term in text.split(","):
        if m := _NTH_RE.match(term):
            k = int(m.group(2))
            if not 1 <= k <= 5:
                raise _refuse(expression, "day-of-week", text, f"asks for week {k} in {term!r} (k must be 1-5)")
            nth.add((_weekday(expression, text, m.group(1)), k))
        elif m := _LAST_RE.match(term):
            last.add(_weekday(expression, text, m.group(1) or m.group(2)))
        else:
            plain.append(term)
    return _plain(expression, "day-of-week", plain), frozenset(nth), frozenset(last)
