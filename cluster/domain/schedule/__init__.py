"""When a job fires: schedules, their next instants, and which due instants fire or are skipped.

* ``instants`` — validation and next-instant arithmetic of ``At``, ``After``,
  ``Every`` and ``Cron`` (``next_fire``, ``first_fire``, ``upcoming``), and
  what DST did to an instant (``explain_instant``); the cron rules in
  ``cron_fields`` (syntax), ``cron_calendar`` (days and wall times),
  ``cron_dst`` (wall times to instants) and ``cron_notes`` (words for DST).
* ``legacy`` — the cron rules of command format 1, which a cluster on that
  format keeps evaluating (``under_rules`` picks by the cluster's format).
* ``zones`` — the one zone lookup, from the pinned tzdata.
* ``firing`` — the misfire rules: which due instants fire and which are
  skipped, with a record.

Pure: no clock, no randomness; zones only from the pinned tzdata package. The names below load when first
used: a module that needs only ``zones`` (the command line reading a date) does not load the cron rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raftsched.cluster.domain.lazy_names import lazy_getattr

if TYPE_CHECKING:
    from raftsched.cluster.domain.schedule.errors import ScheduleError
    from raftsched.cluster.domain.schedule.instants import (
        MIN_EVERY_MS,
        AnySchedule,
        Shaped,
        explain_instant,
        first_fire,
        job_schedule,
        next_fire,
        upcoming,
        validate_schedule,
    )
    from raftsched.cluster.domain.schedule.legacy import under_rules

_WHERE = {
    "MIN_EVERY_MS": "instants",
    "AnySchedule": "instants",
    "ScheduleError": "errors",
    "Shaped": "instants",
    "explain_instant": "instants",
    "first_fire": "instants",
    "job_schedule": "instants",
    "next_fire": "instants",
    "under_rules": "legacy",
    "upcoming": "instants",
    "validate_schedule": "instants",
}

__all__ = [
    "MIN_EVERY_MS",
    "AnySchedule",
    "ScheduleError",
    "Shaped",
    "explain_instant",
    "first_fire",
    "job_schedule",
    "next_fire",
    "under_rules",
    "upcoming",
    "validate_schedule",
]


__getattr__ = lazy_getattr(__name__, _WHERE, globals())
