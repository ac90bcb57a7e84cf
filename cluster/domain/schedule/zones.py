"""Time zones from the pinned ``tzdata`` package only — never from the host's files: the one zone lookup.

Every replica computes cron instants inside ``apply``, so every node must use
the same zone rules: a host whose /usr/share/zoneinfo is older or newer than
another's would fire at other instants and the replicas would diverge. The
``tzdata`` package is pinned exactly in pyproject.toml, so nodes that run the
same raftsched run the same tz database (``IANA_VERSION`` names it).

``schedule_zone`` is the lookup of a schedule's zone, for every rule that
needs one (the cron rules, the format-1 rules, validation); ``zone`` the
lookup by IANA name, cached.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from zoneinfo import ZoneInfo

import tzdata

from raftsched.cluster.domain.errors import RaftschedError
from raftsched.cluster.domain.schedule.errors import ScheduleError

#: the IANA tz database release every node uses
IANA_VERSION: str = tzdata.IANA_VERSION

_NAME = re.compile(r"^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$", re.ASCII)


class UnknownZone(RaftschedError, LookupError):
    """No zone of that name in the pinned tz database."""


@functools.lru_cache(maxsize=None)
def zone(name: str) -> ZoneInfo:
    """The zone called ``name`` (an IANA name such as 'Europe/Berlin'), from the ``tzdata`` package."""
    if not _NAME.match(name) or ".." in name:
        raise UnknownZone(name)
    resource = importlib.resources.files("tzdata.zoneinfo").joinpath(*name.split("/"))
    try:
        with resource.open("rb") as f:
            return ZoneInfo.from_file(f, key=name)
    except (OSError, ValueError) as exc:  # not there (or a directory such as 'Europe'), or not a zone file
        raise UnknownZone(name) from exc


_UTC_HINT = "use an IANA name such as 'Europe/Berlin' or 'UTC'"


def schedule_zone(name: str) -> ZoneInfo:
    """A schedule's zone ('' means UTC); ``ScheduleError`` naming it if there is none."""
    if not isinstance(name, str):
        raise ScheduleError(f"unknown time zone {name!r}: {_UTC_HINT}")
    try:
        return zone(name or "UTC")
    except UnknownZone:
        raise ScheduleError(f"unknown time zone {name!r}: {_UTC_HINT}") from None
