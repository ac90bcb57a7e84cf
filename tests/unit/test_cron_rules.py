"""Cron syntax and the day rule (docs/api.md, "Cron semantics"): cron_fields, cron_calendar, schedule."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from raftsched.cluster.domain.model import Cron
from raftsched.cluster.domain.schedule import upcoming, validate_schedule
from raftsched.cluster.domain.schedule.cron_calendar import day_matches
from raftsched.cluster.domain.schedule.cron_fields import ScheduleError, parse_cron

pytestmark = pytest.mark.unit


def utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> int:
    return int(datetime(y, mo, d, h, mi, s, tzinfo=timezone.utc).timestamp()) * 1000


def days(expression: str, start: date, end: date) -> list[int]:
    """Day numbers in [start, end] (one month) on which the expression fires."""
    f = parse_cron(expression)
    return [d for d in range(start.day, end.day + 1) if day_matches(f, date(start.year, start.month, d))]


# ------------------------------------------------------------------ syntax


@pytest.mark.parametrize(
    "expression, attr, expected",
    [
        ("5-5 * * * *", "minutes", (5,)),  # croniter 7 alone reads a one-value range as '*'
        ("0 9-9/2 * * *", "hours", (9,)),
        ("0 0 * * 7-7", "weekdays", frozenset({0})),  # before: croniter's '*', every day
        ("*/20 * * * *", "minutes", (0, 20, 40)),
        ("0 0 * * * 30", "seconds", (30,)),  # 6 fields: seconds LAST
        ("0 0 * * *", "seconds", (0,)),
        ("0 0 * JAN-MAR,dec *", "months", frozenset({1, 2, 3, 12})),
        ("0 0 * * 7", "weekdays", frozenset({0})),
        ("0 0 * * 5-7", "weekdays", frozenset({0, 5, 6})),
        ("0 0 * * 5L", "last_weekdays", frozenset({5})),
        ("0 0 * * friL,L1", "last_weekdays", frozenset({5, 1})),  # croniter's spelling L1 too
        ("0 0 * * 5#3,1,SUN#1", "nth_weekdays", frozenset({(5, 3), (0, 1)})),
        ("0 0 * * 5#3,1,SUN#1", "weekdays", frozenset({1})),
        ("0 0 L * *", "last_day", True),
        ("0 0 1,L * *", "days", frozenset({1})),
        ("0 0 ? * MON", "dom_restricted", False),
        ("0 0 * * ?", "dow_restricted", False),
        ("0 0 */1 * *", "dom_restricted", True),  # only exactly '*' or '?' is unrestricted
        ("0 0 1-31 * *", "dom_restricted", True),
        ("0 * * * *", "follows_clock", True),
        ("0 */3 * * *", "follows_clock", True),
        ("0 0-23 * * *", "follows_clock", False),  # not '*' or '*/n': specific hours
        ("0 9 * * *", "follows_clock", False),
        ("@hourly", "follows_clock", True),
        ("@daily", "follows_clock", False),
    ],
)
def test_parse(expression: str, attr: str, expected: object) -> None:
    assert getattr(parse_cron(expression), attr) == expected


@pytest.mark.parametrize(
    "expression, fragments",
    [
        ("0 0 * * 5X", ["'0 0 * * 5X'", "day-of-week field '5X'", "5L", "n#k"]),
        ("0 0 * * 1#6", ["day-of-week field", "1#6", "1-5"]),
        ("0 0 * * 8#2", ["day-of-week field", "8#2", "names no weekday"]),
        ("0 0 * * L", ["day-of-week field 'L'", "nL"]),
        ("0 0 15W * *", ["day-of-month field '15W'", "W (nearest weekday)", "L (the last day)"]),
        ("0 0 LW * *", ["day-of-month field 'LW'"]),
        ("0 0 L-2 * *", ["day-of-month field 'L-2'"]),
        ("0 0 32 * *", ["day-of-month field '32'", "1-31"]),
        ("61 * * * *", ["invalid", "minute field '61'", "0-59"]),
        ("0 24 * * *", ["hour field '24'", "0-23"]),
        ("0 0 * 13 *", ["month field '13'", "JAN-DEC"]),
        ("0 0 * * * 60", ["second field '60'", "6th field is seconds"]),
        ("? * * * *", ["minute field '?'"]),
        ("0 0 * * * * 2030", ["7 fields", "5 fields"]),
    ],
)
def test_refused_expression_names_the_field(expression: str, fragments: list[str]) -> None:
    with pytest.raises(ScheduleError) as info:
        validate_schedule(Cron(expression))
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize(
    "expression",
    ["0 0 * * 5L", "0 0 L * *", "0 0 L 2 *", "0 0 * * 5#3,1", "6,17,46 * 17,21 */5 1#2", "0 0 31 2 5L", "0 0 30 2 1#1"],
)
def test_accepted(expression: str) -> None:
    validate_schedule(Cron(expression))


# ---------------------------------------------------------------- day rule

SEP_2026 = (date(2026, 9, 1), date(2026, 9, 30))  # 2026-09-01 is a Tuesday


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("0 0 * * *", list(range(1, 31))),
        ("0 0 14-18 * *", [14, 15, 16, 17, 18]),
        ("0 0 * * FRI", [4, 11, 18, 25]),
        ("0 0 ? * FRI", [4, 11, 18, 25]),
        ("0 0 14-18 * ?", [14, 15, 16, 17, 18]),
        # both restricted: either matches (also for #, L, nL and */n)
        ("0 0 1,2 * FRI", [1, 2, 4, 11, 18, 25]),
        ("0 0 14-18 * 5#3", [14, 15, 16, 17, 18]),  # third Friday is the 18th: inside the range anyway
        ("0 0 2,16,17 * 2#3", [2, 15, 16, 17]),  # third Tuesday is the 15th
        ("0 0 1 * 5L", [1, 25]),
        ("0 0 L * MON", [7, 14, 21, 28, 30]),
        ("0 0 L * 1L", [28, 30]),
        ("0 0 */10 * MON", [1, 7, 11, 14, 21, 28]),
        ("0 0 1 * */3", [1, 2, 5, 6, 9, 12, 13, 16, 19, 20, 23, 26, 27, 30]),  # SUN, WED, SAT
        ("0 0 * * 5L", [25]),
        ("0 0 * * 1#1,1#5", [7]),  # September 2026 has four Mondays
        ("0 0 * * 2#5", [29]),
        ("0 0 L * *", [30]),
    ],
)
def test_day_rule(expression: str, expected: list[int]) -> None:
    assert days(expression, *SEP_2026) == expected


@pytest.mark.parametrize(
    "expression, after, expected",
    [
        # the cases: days 14-18 OR the third Friday (2026-08-21), not the day that is both
        ("32 19-21 14-18 * 5#3", utc(2026, 8, 19), [utc(2026, 8, 21, 19, 32), utc(2026, 8, 21, 20, 32)]),
        ("30 17 2,16,17 * 2#3", utc(2026, 9, 1), [utc(2026, 9, 2, 17, 30), utc(2026, 9, 15, 17, 30)]),
        # never coincide under AND (days 17/21 of May and October, and the second Monday): OR fires
        ("6,17,46 * 17,21 */5 1#2", utc(2026, 1, 1), [utc(2026, 1, 12, 0, 6), utc(2026, 1, 12, 0, 17)]),
        ("0 12 * * 5L", utc(2026, 2, 1), [utc(2026, 2, 27, 12), utc(2026, 3, 27, 12)]),
        ("0 0 31 * 5L", utc(2026, 4, 1), [utc(2026, 4, 24), utc(2026, 5, 29)]),  # April has no 31st
        ("0 12 L 2 *", utc(2027, 1, 1), [utc(2027, 2, 28, 12), utc(2028, 2, 29, 12)]),
        # a one-value range is that value (before this change '0 5-5 * * *' fired every hour)
        ("0 5-5 * * *", utc(2026, 1, 1), [utc(2026, 1, 1, 5), utc(2026, 1, 2, 5)]),
    ],
)
def test_day_rule_instants(expression: str, after: int, expected: list[int]) -> None:
    assert upcoming(Cron(expression), after, after, len(expected)) == expected
