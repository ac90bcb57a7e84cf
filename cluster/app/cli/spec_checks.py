"""What the command line says about a job before it sends it: the surprises a spec holds that the cluster
accepts without a word.

Pure: the spec is the domain's (``raftsched.rpc.convert.spec_from_pb``: the
defaults filled in as the cluster fills them) and ``now_ms`` comes in.

* ``past_at_refusal`` — an ``--at`` instant in the past: the cluster would
  skip it at once (older than the job's catch-up window, or under misfire
  policy SKIP) or fire it at once as a missed instant. ``job create`` and
  ``job update`` refuse it, naming the instant and the catch-up window,
  unless ``--allow-past``.
* ``catch_up_note`` — misfire policy FIRE_ALL with instants less than a
  minute apart: after an outage every missed instant fires, one run each,
  all at once (30 runs after a minute down for an every-2s job).
* ``six_field_warning`` (``raftsched.cluster.app.cli.cron_hint``) — a
  6-field cron whose seconds field, the last, is ``*``.
"""

from __future__ import annotations

import re

from raftsched.cluster.app.cli.timefmt import span_text, utc_iso
from raftsched.cluster.domain.model import At, Cron, Every, JobSpec, MisfirePolicy, Schedule

#: how late an instant may be and still fire as on time: the default of the nodes' [scheduler] misfire_threshold_s
ON_TIME_MS = 5_000
_MINUTE, _HOUR = 60_000, 3_600_000
#: instants of a cron schedule counted one by one for the note (an hour of an every-second schedule)
_COUNT_CAP = 3_601


def age_text(ms: int) -> str:
    """``2158d3h``, ``5m12s``, ``40s``: the two largest units of a span (for how long ago something was)."""
    return "".join(re.findall(r"\d+[a-z]+", span_text(ms - ms % 1000 if ms >= 1000 else ms))[:2])


def _window(spec: JobSpec) -> str:
    return f"the job's catch-up window ({span_text(spec.catchup_window_ms)}, --catchup-window)"


def past_at_refusal(spec: JobSpec, now_ms: int) -> str | None:
    """Why an ``--at`` instant in the past is refused (None when the schedule is not one, or is not past)."""
    if not isinstance(spec.schedule, At):
        return None
    late = now_ms - spec.schedule.at_ms
    if late <= ON_TIME_MS:
        return None
    when = f"--at {utc_iso(spec.schedule.at_ms)} is {age_text(late)} in the past (by this machine's clock)"
    policy = f"misfire policy {spec.misfire.value.lower()} (--misfire)"
    if late > max(spec.catchup_window_ms, ON_TIME_MS):
        fate = f"it is older than {_window(spec)}, so the cluster would skip it at once (a SKIPPED run): it would never run"
    elif spec.misfire is MisfirePolicy.SKIP:
        fate = f"it is within {_window(spec)}, but {policy} would skip it at once (a SKIPPED run)"
    else:
        fate = f"it is within {_window(spec)}, so {policy} would fire it at once, as a missed instant"
    return f"{when}: {fate}. Give a later instant (--after 1m: a minute from now), or add --allow-past to create it as it is"


def _per_hour(schedule: Schedule, now_ms: int) -> tuple[int, int] | None:
    """(instants in an hour, ms between two of them, the least) of a repeating schedule; None for a one-off."""
    if isinstance(schedule, Every):
        every = max(1, schedule.every_ms)
        return _HOUR // every, every
    if isinstance(schedule, Cron):
        from raftsched.cluster.domain.schedule import upcoming  # the cron rules load when a cron is checked

        try:
            times = [t for t in upcoming(schedule, now_ms, now_ms, _COUNT_CAP) if t <= now_ms + _HOUR]
        except (ValueError, OverflowError):  # the cluster refuses it, with its own message
            return None
        gaps = [b - a for a, b in zip(times, times[1:])]
        return (len(times), min(gaps)) if gaps else None
    return None


def catch_up_note(spec: JobSpec, now_ms: int, chosen: bool) -> str | None:
    """What FIRE_ALL does after an outage to a job whose instants are less than a minute apart (None otherwise);
    ``chosen``: the policy was given (else it is the default)."""
    if spec.misfire is not MisfirePolicy.FIRE_ALL:
        return None
    found = _per_hour(spec.schedule, now_ms)
    if found is None or found[0] <= 60:
        return None
    per_hour, gap = found
    policy = "misfire policy fire_all" + ("" if chosen else " (the default)")
    head = (
        f"{policy} fires every instant the cluster missed while it could not fire (its nodes down, or no leader) "
        "once it can again, one run each, all at once"
    )
    window = spec.catchup_window_ms
    if isinstance(spec.schedule, Every):
        counts = (
            f"this job fires every {span_text(gap)}: a minute down brings {_MINUTE // gap:,} runs, an hour "
            f"{per_hour:,}, and up to {window // gap:,} (every instant within its catch-up window, {span_text(window)})"
        )
    else:
        counts = (
            f"this schedule has {per_hour:,} instants an hour (some {span_text(gap)} apart): an hour down brings "
            f"{per_hour:,} runs, and a longer outage up to about {per_hour * window // _HOUR:,} (its catch-up window, "
            f"{span_text(window)})"
        )
    return f"{head}: {counts}. --misfire fire_once fires one run for them all; --misfire skip fires none"
