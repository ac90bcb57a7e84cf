"""DST tables (docs/api.md, "Cron semantics"): clock-following jobs and jobs with specific hours.

Transitions used (2026), in UTC:
* America/New_York: spring 03-08 07:00 (02:00 EST -> 03:00 EDT); fall 11-01 06:00 (02:00 EDT -> 01:00 EST),
  so wall 01:00-02:00 is 05:00-06:00 UTC (first pass, EDT) and 06:00-07:00 UTC (second pass, EST).
* Europe/Berlin: spring 03-29 01:00 (02:00 CET -> 03:00 CEST); fall 10-25 01:00 (03:00 CEST -> 02:00 CET),
  wall 02:00-03:00 is 00:00-01:00 UTC and 01:00-02:00 UTC.
* Australia/Sydney: fall 04-04 16:00 (03:00 AEDT -> 02:00 AEST), wall 02:00-03:00 is 15:00-16:00 and
  16:00-17:00 UTC; spring 10-03 16:00 (02:00 AEST -> 03:00 AEDT).
* Australia/Lord_Howe (30-minute shift): fall 04-04 15:00 (02:00 +11 -> 01:30 +1030), wall 01:30-02:00 is
  14:30-15:00 and 15:00-15:30 UTC; spring 10-03 15:30 (02:00 +1030 -> 02:30 +11).
"""

from __future__ import annotations

import importlib
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.model import Cron, Every
from raftsched.cluster.domain.schedule import explain_instant, upcoming
from raftsched.cluster.domain.schedule.cron_calendar import day_matches
from raftsched.cluster.domain.schedule.cron_fields import parse_cron
from raftsched.cluster.domain.validation import Limits
from raftsched.cluster.node.clock import FakeClock
from raftsched.cluster.node.job_service import JobService
from raftsched.storage import OutputReader

pytestmark = pytest.mark.unit

NY, BERLIN, SYDNEY, LORD_HOWE = "America/New_York", "Europe/Berlin", "Australia/Sydney", "Australia/Lord_Howe"


def utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> int:
    return int(datetime(y, mo, d, h, mi, s, tzinfo=timezone.utc).timestamp()) * 1000


def quarter_hours(y: int, mo: int, d: int, h: int, mi: int, n: int, step: int = 15) -> list[int]:
    return [utc(y, mo, d, h, mi) + k * step * 60_000 for k in range(n)]


# -------------------------------------------------- jobs that follow the clock

CLOCK_TABLE = [
    # the cases: no silence in a repeated hour, no extra run for a skipped one
    ("*/15 * * * *", NY, utc(2026, 11, 1, 4, 50), quarter_hours(2026, 11, 1, 5, 0, 9)),
    ("0 * * * *", NY, utc(2026, 11, 1, 4, 30), [utc(2026, 11, 1, 5), utc(2026, 11, 1, 6), utc(2026, 11, 1, 7)]),
    ("*/20 * * * *", BERLIN, utc(2026, 10, 25, 0, 30), quarter_hours(2026, 10, 25, 0, 40, 5, step=20)),
    ("30 * * * *", NY, utc(2026, 3, 8, 5), [utc(2026, 3, 8, 5, 30), utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 7, 30)]),
    # New York, spring: 03:00 EDT exists and matches */15
    ("*/15 * * * *", NY, utc(2026, 3, 8, 6, 30), [utc(2026, 3, 8, 6, 45)] + quarter_hours(2026, 3, 8, 7, 0, 3)),
    # Berlin, spring: 02:00 CET does not exist
    ("0 * * * *", BERLIN, utc(2026, 3, 28, 23, 30), [utc(2026, 3, 29, 0), utc(2026, 3, 29, 1), utc(2026, 3, 29, 2)]),
    ("30 */2 * * *", BERLIN, utc(2026, 3, 28, 22), [utc(2026, 3, 28, 23, 30), utc(2026, 3, 29, 2, 30)]),
    # Sydney: both passes of 02:00-03:00 in April; nothing for 02:45 in October
    ("*/30 * * * *", SYDNEY, utc(2026, 4, 4, 14, 50), quarter_hours(2026, 4, 4, 15, 0, 5, step=30)),
    ("45 * * * *", SYDNEY, utc(2026, 10, 3, 14, 50), [utc(2026, 10, 3, 15, 45), utc(2026, 10, 3, 16, 45)]),
    # Lord Howe: a 30-minute repeat and a 30-minute gap
    ("*/10 * * * *", LORD_HOWE, utc(2026, 4, 4, 14, 25), quarter_hours(2026, 4, 4, 14, 30, 7, step=10)),
    ("30 * * * *", LORD_HOWE, utc(2026, 4, 4, 13), [utc(2026, 4, 4, 13, 30), utc(2026, 4, 4, 14, 30), utc(2026, 4, 4, 15)]),
    ("0 * * * *", LORD_HOWE, utc(2026, 4, 4, 13, 30), [utc(2026, 4, 4, 14), utc(2026, 4, 4, 15, 30)]),
    ("*/15 * * * *", LORD_HOWE, utc(2026, 10, 3, 15), [utc(2026, 10, 3, 15, 15), utc(2026, 10, 3, 15, 30)]),
    ("0 * * * *", LORD_HOWE, utc(2026, 10, 3, 14), [utc(2026, 10, 3, 14, 30), utc(2026, 10, 3, 16)]),
    # 6 fields (seconds last): every 20 s keeps going through the second pass
    (
        "* * * * * */20",
        NY,
        utc(2026, 11, 1, 5, 59, 30),
        [utc(2026, 11, 1, 5, 59, 40), utc(2026, 11, 1, 6), utc(2026, 11, 1, 6, 0, 20)],
    ),
]


@pytest.mark.parametrize("expression, zone, after, expected", CLOCK_TABLE)
def test_clock_following_jobs(expression: str, zone: str, after: int, expected: list[int]) -> None:
    assert upcoming(Cron(expression, zone), after, after, len(expected)) == expected


TRANSITIONS = [
    (NY, utc(2026, 3, 8, 7)),
    (NY, utc(2026, 11, 1, 6)),
    (BERLIN, utc(2026, 3, 29, 1)),
    (BERLIN, utc(2026, 10, 25, 1)),
    (SYDNEY, utc(2026, 4, 4, 16)),
    (SYDNEY, utc(2026, 10, 3, 16)),
    (LORD_HOWE, utc(2026, 4, 4, 15)),
    (LORD_HOWE, utc(2026, 10, 3, 15, 30)),
]


@pytest.mark.parametrize("zone, change", TRANSITIONS)
@pytest.mark.parametrize("expression", ["*/15 * * * *", "0 * * * *", "30 * * * *", "*/10 */2 * * *", "45,50 * * * *"])
def test_clock_following_matches_the_definition(expression: str, zone: str, change: int) -> None:
    """Minute by minute around a change: an instant fires exactly when its local wall time matches."""
    f, z = parse_cron(expression), ZoneInfo(zone)

    def matches(ms: int) -> bool:
        wall = datetime.fromtimestamp(ms // 1000, z)
        return wall.minute in f.minutes and wall.hour in f.hours and day_matches(f, wall.date())

    start, end = change - 3 * 3_600_000, change + 3 * 3_600_000
    expected = [t for t in range(start + 60_000, end, 60_000) if matches(t)]
    fired = [t for t in upcoming(Cron(expression, zone), start, start, len(expected) + 1) if t < end]
    assert fired == expected


# ---------------------------------------------- jobs with specific hours

TIME_OF_DAY_TABLE = [
    # skipped: once, at the end of the gap
    ("30 2 * * *", NY, utc(2026, 3, 7, 12), [utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)]),
    ("30 2 * * *", BERLIN, utc(2026, 3, 28, 12), [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]),
    ("30 2 * * *", SYDNEY, utc(2026, 10, 3, 0), [utc(2026, 10, 3, 16), utc(2026, 10, 4, 15, 30)]),
    ("15 2 * * *", LORD_HOWE, utc(2026, 10, 3, 0), [utc(2026, 10, 3, 15, 30), utc(2026, 10, 4, 15, 15)]),
    # every skipped wall time of one gap and the gap's end are one fire
    ("0 1-3 * * *", NY, utc(2026, 3, 8, 5), [utc(2026, 3, 8, 6), utc(2026, 3, 8, 7), utc(2026, 3, 9, 5)]),
    ("* 2 * * *", BERLIN, utc(2026, 3, 29, 0), [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0)]),
    # repeated: once, at the first pass
    ("30 1 * * *", NY, utc(2026, 10, 31, 12), [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]),
    ("0,30 2 * * *", BERLIN, utc(2026, 10, 24, 12), [utc(2026, 10, 25, 0), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1)]),
    ("*/15 2 * * *", SYDNEY, utc(2026, 4, 4, 12), quarter_hours(2026, 4, 4, 15, 0, 4) + [utc(2026, 4, 5, 16)]),
    ("45 1 * * *", LORD_HOWE, utc(2026, 4, 4, 12), [utc(2026, 4, 4, 14, 45), utc(2026, 4, 5, 15, 15)]),
    # specific hours that are not '*' or '*/n' keep the once-rule, even when they cover the day
    ("0 0-23 * * *", NY, utc(2026, 11, 1, 4, 30), [utc(2026, 11, 1, 5), utc(2026, 11, 1, 7)]),
]


@pytest.mark.parametrize("expression, zone, after, expected", TIME_OF_DAY_TABLE)
def test_jobs_with_specific_hours(expression: str, zone: str, after: int, expected: list[int]) -> None:
    assert upcoming(Cron(expression, zone), after, after, len(expected)) == expected


# ------------------------------------------------------------------ notes


def notes(expression: str, zone: str, after: int, count: int) -> list[str]:
    s = Cron(expression, zone)
    times = upcoming(s, after, after, count)
    return [explain_instant(s, prev, t) for prev, t in zip([after] + times, times)]


@pytest.mark.parametrize(
    "expression, zone, after, count, expected",
    [
        (
            "0 * * * *",
            NY,
            utc(2026, 11, 1, 4, 30),
            3,
            ["repeated hour (first pass, EDT)", "repeated hour (second pass, EST)", ""],
        ),
        (
            "30 * * * *",
            NY,
            utc(2026, 3, 8, 6),
            2,
            ["", "02:30 skipped by DST: not fired (the job follows the clock)"],
        ),
        (
            "30 2 * * *",
            NY,
            utc(2026, 3, 7, 12),
            2,
            ["02:30 skipped by DST: fired at the end of the gap, 03:00 EDT", ""],
        ),
        (
            "0,30 2,3 * * *",
            NY,
            utc(2026, 3, 8, 6),
            2,
            ["02:00, 02:30 skipped by DST: fired at the end of the gap, 03:00 EDT", ""],
        ),
        (
            "30 1 * * *",
            NY,
            utc(2026, 10, 31, 12),
            2,
            ["repeated hour (first pass, EDT): fires once, not again at 01:30 EST", ""],
        ),
        (
            "*/10 * * * *",
            LORD_HOWE,
            utc(2026, 10, 3, 15, 25),
            1,
            ["02:00, 02:10, 02:20 skipped by DST: not fired (the job follows the clock)"],
        ),
        ("0 12 * * *", BERLIN, utc(2026, 10, 24), 2, ["", ""]),
        ("0 12 * * *", "UTC", utc(2026, 10, 24), 1, [""]),
    ],
)
def test_preview_notes(expression: str, zone: str, after: int, count: int, expected: list[str]) -> None:
    assert notes(expression, zone, after, count) == expected


def test_job_service_preview_pairs_each_time_with_its_note() -> None:
    svc = JobService(None, FakeClock(utc(2026, 3, 7, 12)), Limits(), OutputReader())  # type: ignore[arg-type]  # preview reads no state
    assert svc.preview(Cron("30 2 * * *", NY), None, 2) == [
        (utc(2026, 3, 8, 7), "02:30 skipped by DST: fired at the end of the gap, 03:00 EDT"),
        (utc(2026, 3, 9, 6, 30), ""),
    ]
    assert svc.preview(Every(60_000), utc(2026, 1, 1), 1) == [(utc(2026, 1, 1, 0, 1), "")]
    with pytest.raises(ValidationError, match="day-of-week field '9L'"):
        svc.preview(Cron("0 0 * * 9L", NY), None, 1)


# ------------------------------------------------------------- assumption


@pytest.mark.parametrize("zone", [NY, BERLIN, SYDNEY, LORD_HOWE, "America/Santiago", "Asia/Kolkata", "Pacific/Apia"])
def test_offset_changes_are_more_than_a_day_apart(zone: str) -> None:
    """cron_dst probes the offset once a day: two changes within 24 hours would hide from it."""
    try:
        pure = importlib.import_module("zoneinfo._zoneinfo").ZoneInfo
    except (ImportError, AttributeError):
        pure = None
    if pure is None or not hasattr(pure.no_cache(zone), "_trans_utc"):
        pytest.skip("the pure-Python zoneinfo with its transition list is not available")
    since_1900 = [t for t in pure.no_cache(zone)._trans_utc if t > -2_208_988_800]
    assert all(b - a > 86_400 for a, b in zip(since_1900, since_1900[1:]))
