"""Which instants a backfill makes runs for: pure, so that the proposer's dry run and apply agree.

``backfill_instants(schedule, anchor_ms, cursor_ms, start_ms, end_ms,
has_run)``: the job's instants in ``[start_ms, end_ms)`` that it has already
passed (at or before its cursor: an instant after it fires when it comes, and
a backfilled run must not take its place), without those ``has_run`` says
have a run. A range of more than ``MAX_BACKFILL`` instants is refused
(``BackfillTooLarge``) rather than cut short silently.

A backfilled run's id is ``backfill_run_id``: an instant's own id may be
held by the SKIPPED record of a range the job skipped.
"""

from __future__ import annotations

from typing import Callable

from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.schedule.instants import AnySchedule, next_fire

#: instants one BackfillJob may make runs for
MAX_BACKFILL = 10_000


class BackfillTooLarge(ValidationError):
    """The range holds more instants than one backfill makes."""


def backfill_run_id(job_id: str, instant_ms: int) -> str:
    return f"{job_id}@{instant_ms}-backfill"


def backfill_instants(
    schedule: AnySchedule, anchor_ms: int, cursor_ms: int, start_ms: int, end_ms: int, has_run: Callable[[int], bool]
) -> list[int]:
    """The instants to backfill, in order (see the module docstring)."""
    out: list[int] = []
    seen = 0
    t = next_fire(schedule, start_ms - 1, anchor_ms)
    while t is not None and t < end_ms and t <= cursor_ms:
        seen += 1
        if seen > MAX_BACKFILL:
            raise BackfillTooLarge(f"the range holds more than {MAX_BACKFILL} of the job's instants: backfill it in parts")
        if not has_run(t):
            out.append(t)
        t = next_fire(schedule, t, anchor_ms)
    return out
