"""A job's exceptions to its schedule and the spread of its runs (command format 5): skip dates, skip windows,
jitter.

* ``skip_reason(spec, instant_ms)``: why an instant is skipped — it falls on
  one of ``skip_dates`` (a calendar date in the schedule's zone: a cron
  schedule's time zone, else UTC) or inside one of ``skip_windows``
  (``[start, end)``) — or "" when it fires. The state machine records such
  an instant as skipped, like a misfire.
* ``jitter_ms(job_id, instant_ms, jitter_ms)``: the offset in ``[0, jitter)``
  of an instant's run from a hash of the job id and the instant: the same on
  every replica, for every leader, and spread evenly.

Pure: no clock, no randomness; zones from the pinned tzdata.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone

from raftsched.cluster.domain.model import Cron, JobSpec
from raftsched.cluster.domain.schedule.zones import schedule_zone


def zone_name(spec: JobSpec) -> str:
    """The zone a spec's dates are in: its cron schedule's, else UTC."""
    return (spec.schedule.timezone or "UTC") if isinstance(spec.schedule, Cron) else "UTC"


def local_date(spec: JobSpec, instant_ms: int) -> str:
    """``YYYY-MM-DD`` of the instant in the spec's zone."""
    return datetime.fromtimestamp(instant_ms / 1000, schedule_zone(zone_name(spec))).date().isoformat()


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def skip_reason(spec: JobSpec, instant_ms: int) -> str:
    """Why ``instant_ms`` is skipped by the spec's exceptions ("": it is not)."""
    if spec.skip_dates:
        day = local_date(spec, instant_ms)
        if day in spec.skip_dates:
            return f"{day} is one of the job's skip dates ({zone_name(spec)})"
    for w in spec.skip_windows:
        if w.start_ms <= instant_ms < w.end_ms:
            return f"inside the job's skip window {_utc(w.start_ms)} - {_utc(w.end_ms)}"
    return ""


def jitter_ms(job_id: str, instant_ms: int, jitter: int) -> int:
    """The offset of the run for ``instant_ms`` of job ``job_id``: in ``[0, jitter)``, 0 without jitter."""
    if jitter <= 0:
        return 0
    digest = hashlib.blake2b(f"{job_id}@{instant_ms}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % jitter
