"""Zones come from the pinned tzdata package, never from the host's /usr/share/zoneinfo."""

from __future__ import annotations

import importlib.resources
import zoneinfo
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from raftsched.cluster.domain.model import Cron
from raftsched.cluster.domain.schedule import ScheduleError, next_fire, validate_schedule
from raftsched.cluster.domain.schedule import zones as tz

pytestmark = pytest.mark.unit


def test_a_hosts_different_zone_file_is_never_used(tmp_path: Path) -> None:
    """A host whose Europe/Berlin says UTC (an odd or stale tz database): the standard lookup takes
    the host's file; raftsched takes the pinned package's, as every other node does."""
    (tmp_path / "Europe").mkdir()
    (tmp_path / "Europe" / "Berlin").write_bytes(importlib.resources.files("tzdata.zoneinfo").joinpath("UTC").read_bytes())
    summer = datetime(2026, 7, 1, 12, tzinfo=timezone.utc)
    zoneinfo.reset_tzpath(to=[str(tmp_path)])
    try:
        zoneinfo.ZoneInfo.clear_cache()
        tz.zone.cache_clear()
        assert summer.astimezone(zoneinfo.ZoneInfo("Europe/Berlin")).utcoffset() == timedelta(0)  # the host's file
        assert summer.astimezone(tz.zone("Europe/Berlin")).utcoffset() == timedelta(hours=2)  # the package's
    finally:
        zoneinfo.reset_tzpath()
        zoneinfo.ZoneInfo.clear_cache()
        tz.zone.cache_clear()


@pytest.mark.parametrize(
    "name", ["Mars/Olympus", "Europe", "../etc/passwd", "/etc/localtime", "Europe//Berlin", "", "Europe/Berlin\n"]
)
def test_unknown_or_odd_names_are_unknown(name: str) -> None:
    with pytest.raises(tz.UnknownZone):
        tz.zone(name)


def test_a_schedule_with_an_unknown_zone_is_refused_with_a_hint() -> None:
    with pytest.raises(ScheduleError, match="unknown time zone 'Mars/Olympus'.*IANA"):
        validate_schedule(Cron("0 9 * * *", "Mars/Olympus"))


def test_cron_instants_use_the_package_zone() -> None:
    after = int(datetime(2026, 7, 1, tzinfo=timezone.utc).timestamp() * 1000)
    fire = next_fire(Cron("0 9 * * *", "Europe/Berlin"), after, after)
    assert fire == int(datetime(2026, 7, 1, 7, tzinfo=timezone.utc).timestamp() * 1000)
    assert tz.IANA_VERSION[:4].isdigit()
