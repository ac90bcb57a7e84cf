"""Plain words for the values the state machine writes into a run's explanation (``run_history``).

Pure and deterministic: the same value reads the same on every node (no clock, no locale).
"""

from __future__ import annotations

from datetime import datetime, timezone

from cluster.domain.model import After, At, Cron, Every, Schedule


def iso(ms: int) -> str:
    """An instant as UTC ISO 8601 with milliseconds (``2026-11-26T14:00:00.000Z``)."""
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def span(ms: int) -> str:
    """A span: ``850 ms``, ``1.2 s``, ``3 min 5 s``, ``2 h 0 min``."""
    if ms < 0:
        return f"-{span(-ms)}"
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s".replace(".0 s", " s")
    if ms < 3_600_000:
        return f"{ms // 60_000} min {(ms % 60_000) // 1000} s"
    return f"{ms // 3_600_000} h {(ms % 3_600_000) // 60_000} min"


def schedule_words(schedule: Schedule) -> str:
    if isinstance(schedule, Every):
        return f"every {span(schedule.every_ms)}"
    if isinstance(schedule, Cron):
        return f"cron {schedule.expression!r} in {schedule.timezone}"
    if isinstance(schedule, At):
        return f"once at {iso(schedule.at_ms)}"
    if isinstance(schedule, After):
        return f"once, {span(schedule.after_ms)} after the job was created"
    return repr(schedule)
