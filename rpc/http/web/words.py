"""How the web view writes things for people: instants (UTC, named), instants in a job's zone with UTC
beside them, spans, a job's spec in plain words (every field it sets, the newer ones only when set), text
shortened for a cell, payloads and logs as text, statuses as labels.

Pure: no I/O, no clock (``now_ms`` comes in). Every function returns plain
strings; the templates escape them (autoescape), so nothing here builds HTML.
"""

from __future__ import annotations

import datetime as dt
from typing import Callable, NamedTuple, Sequence

from raftsched.cluster.domain.model import (
    After,
    At,
    ConcurrencyPolicy,
    Cron,
    Every,
    JobSpec,
    MisfirePolicy,
    NotifyRule,
    Schedule,
)
from raftsched.cluster.domain.schedule import zones
from raftsched.cluster.domain.schedule.exceptions import zone_name
from raftsched.cluster.domain.words import flag_span

UTC = dt.timezone.utc
NONE = "-"
#: how many skip dates or windows a spec row lists before it says how many more there are
LISTED = 10

_CONCURRENCY = {
    ConcurrencyPolicy.ALLOW: "runs may overlap: an instant fires even while an earlier run is still going",
    ConcurrencyPolicy.FORBID: "no overlap: an instant that comes while a run is still going is skipped",
    ConcurrencyPolicy.REPLACE: "the newest wins: an instant that comes while a run is still going cancels that run",
}
_MISFIRE = {
    MisfirePolicy.FIRE_ALL: "after downtime, one run for every missed instant",
    MisfirePolicy.FIRE_ONCE: "after downtime, one run for all the missed instants together",
    MisfirePolicy.SKIP: "after downtime, missed instants are skipped (recorded as SKIPPED)",
}
#: (name, plural) of each cron field, in the order they are written (seconds, when given, LAST)
_CRON_FIELDS = (
    ("minute", "minutes"),
    ("hour", "hours"),
    ("day of the month", "days"),
    ("month", "months"),
    ("day of the week", "days of the week"),
    ("second", "seconds"),
)


def utc(ms: int | None, millis: bool | None = None) -> str:
    """``2026-10-25 01:30:00 UTC``, or ``01:30:00.250`` with ``millis`` (None: when the instant has any);
    "-" for none (None or 0)."""
    if not ms:
        return NONE
    when = dt.datetime.fromtimestamp(ms / 1000, UTC)
    if millis is None:
        millis = ms % 1000 != 0
    clock = when.strftime("%H:%M:%S") + (f".{when.microsecond // 1000:03d}" if millis else "")
    return f"{when:%Y-%m-%d} {clock} UTC"


def relative(ms: int | None, now_ms: int) -> str:
    """``in 4s`` / ``12s ago`` / ``in 1d12h`` / ``now``: the two largest units; "" for none."""
    if not ms:
        return ""
    delta = ms - now_ms
    if abs(delta) < 1000:
        return "now"
    text = "".join(_units(abs(delta))[:2])
    return f"in {text}" if delta > 0 else f"{text} ago"


def _units(ms: int) -> list[str]:
    parts, left = [], ms
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return parts


def utc_ago(ms: int | None, now_ms: int, none: str = NONE) -> str:
    """``2026-10-24 00:00:00 UTC (12s ago)``: an instant and how far it is from now; ``none`` for none."""
    if not ms:
        return none
    return f"{utc(ms)} ({relative(ms, now_ms)})"


def shorten(text: str, limit: int) -> str:
    """``text`` on one line (runs of white space as one space), cut to ``limit`` characters ending in "..."."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 3)] + "..."


def zone_of(name: str) -> dt.tzinfo:
    """The IANA zone ``name``; UTC for "" or "UTC" (or a name this machine does not know)."""
    if not name or name.upper() == "UTC":
        return UTC
    try:
        return zones.zone(name)  # the pinned tz database the nodes use, never the host's
    except zones.UnknownZone:
        return UTC


def in_zone(ms: int, zone_name: str) -> str:
    """``Sun 2026-10-25 02:30:00 CET (UTC+01:00)``: the instant as a clock in ``zone_name`` shows it."""
    when = dt.datetime.fromtimestamp(ms / 1000, UTC).astimezone(zone_of(zone_name))
    offset = when.strftime("%z")
    clock = when.strftime("%H:%M:%S") + (f".{ms % 1000:03d}" if ms % 1000 else "")
    return f"{when:%a %Y-%m-%d} {clock} {when.tzname()} (UTC{offset[:3]}:{offset[3:]})"


def span(ms: int) -> str:
    """``1h30m``, ``2s``, ``500ms``: the flags' form, as the command line shows it (``words.flag_span``)."""
    return flag_span(ms)


def after(ms: int | None, since_ms: int | None) -> str:
    """``+3ms``, ``+1m2s``, ``-97ms``: how long after ``since_ms`` an instant came ("-" when either is missing)."""
    if not ms or not since_ms:
        return NONE
    return ("+" if ms >= since_ms else "") + span(ms - since_ms)


def cron_fields(expression: str) -> str:
    """Each field of a cron expression in words: ``minute 30, hour 2, any day of the month, ...``."""
    fields = expression.split()
    if not fields or fields[0].startswith("@") or len(fields) > len(_CRON_FIELDS):
        return expression
    words = []
    for (name, plural), text in zip(_CRON_FIELDS, fields):
        if text in ("*", "?"):
            words.append(f"any {name}")
        elif text.startswith("*/"):
            words.append(f"every {text[2:]} {plural}")
        else:
            words.append(f"{name} {text}")
    return ", ".join(words)


def schedule_words(schedule: Schedule, anchor_ms: int) -> str:
    """When a job fires, in a sentence."""
    if isinstance(schedule, At):
        return f"once, at {utc(schedule.at_ms)}"
    if isinstance(schedule, After):
        return f"once, {span(schedule.after_ms)} after it was created (at {utc(anchor_ms + schedule.after_ms)})"
    if isinstance(schedule, Every):
        return f"every {span(schedule.every_ms)}, counted from {utc(anchor_ms, millis=True)}"
    if isinstance(schedule, Cron):
        return f"cron '{schedule.expression}' in {schedule.timezone or 'UTC'}: {cron_fields(schedule.expression)}"
    return NONE


def retry_words(spec: JobSpec) -> str:
    r = spec.retry
    if r.max_attempts <= 1:
        return "no retry: one attempt, then DEAD_LETTER"
    return (
        f"up to {r.max_attempts} attempts; the wait between them starts at {span(r.initial_backoff_ms)}, "
        f"x{r.multiplier:g} each time, at most {span(r.max_backoff_ms)}, +/-{r.jitter:.0%} jitter; then DEAD_LETTER"
    )


class SpecRow(NamedTuple):
    """One row of a job's spec: what, in words, and the key of its element id (``spec-<key>``)."""

    label: str
    text: str
    key: str


def spec_rows(spec: JobSpec, anchor_ms: int) -> list[SpecRow]:
    """A job's spec as rows, in the order a reader asks about them: the fields every job has, then each
    newer field the spec sets (``extra_rows``)."""
    misfire = (
        f"{spec.misfire.value}: {_MISFIRE.get(spec.misfire, '')} (within a catch-up window of {span(spec.catchup_window_ms)})"
    )
    return [
        SpecRow("Schedule", schedule_words(spec.schedule, anchor_ms), "schedule"),
        SpecRow("Queue", spec.queue, "queue"),
        SpecRow("Type", spec.type, "type"),
        SpecRow("Retries", retry_words(spec), "retries"),
        SpecRow("Lease", f"{span(spec.lease_ttl_ms)}, renewed by the executor while the run goes on", "lease"),
        SpecRow("Timeout", span(spec.timeout_ms) if spec.timeout_ms else "none", "timeout"),
        SpecRow("Concurrency", f"{spec.concurrency.value}: {_CONCURRENCY.get(spec.concurrency, '')}", "concurrency"),
        SpecRow("Misfire", misfire, "misfire"),
        SpecRow("History", f"keeps the last {spec.history_limit} finished runs, each for {span(spec.history_ttl_ms)}", "history"),
        *extra_rows(spec),
    ]


def listed(items: Sequence[str], sep: str = ", ", limit: int = LISTED) -> str:
    """The first ``limit`` items, then how many more there are (``a, b and 3 more``)."""
    more = len(items) - limit
    return sep.join(items[:limit]) + (f" and {more} more" if more > 0 else "")


def notify_words(rule: NotifyRule) -> str:
    """``FAILED, RECOVERED → https://hooks.example/x, signed with the secret named 'hooks'``: never a secret's
    value (the cluster holds none: it stays in the executors' ``--notify-secrets`` file)."""
    signed = (
        f"signed with the secret named '{rule.secret_name}' (its value stays with the executors)"
        if rule.secret_name
        else "unsigned"
    )
    return f"{', '.join(rule.events)} → {rule.url}, {signed}"


def _skip_dates(spec: JobSpec) -> str:
    return f"{listed(spec.skip_dates)} (in {zone_name(spec)}): an instant on these dates is skipped, recorded as SKIPPED"


def _skip_windows(spec: JobSpec) -> str:
    windows = listed([f"{utc(w.start_ms)} to {utc(w.end_ms)}" for w in spec.skip_windows], "; ")
    return f"{windows}: an instant inside is skipped, recorded as SKIPPED"


def _extra_crons(spec: JobSpec) -> str:
    crons = "; ".join(f"cron '{c.expression}' in {c.timezone or 'UTC'}" for c in spec.extra_crons)
    return f"{crons} (the job fires at the instants of all its expressions)"


#: (label, key, the field whose default shows no row, its words) of each newer field, in the order of the rows
_EXTRA_ROWS: tuple[tuple[str, str, str, Callable[[JobSpec], str]], ...] = (
    ("Starts", "start", "start_ms", lambda s: f"no instant before {utc(s.start_ms)}"),
    ("Ends", "end", "end_ms", lambda s: f"no instant after {utc(s.end_ms)}: the job is COMPLETED then"),
    ("Also fires", "extra-crons", "extra_crons", _extra_crons),
    (
        "Jitter", "jitter", "jitter_ms",
        lambda s: f"each instant's run becomes leasable up to {span(s.jitter_ms)} after it (a fixed offset per instant)",
    ),
    ("Skip dates", "skip-dates", "skip_dates", _skip_dates),
    ("Skip windows", "skip-windows", "skip_windows", _skip_windows),
    (
        "Max runs", "max-runs", "max_runs",
        lambda s: f"{s.max_runs}: the job is COMPLETED after {s.max_runs} runs of its schedule (runs triggered by hand do not count)",
    ),
    (
        "Pauses itself", "pause-after-failures", "pause_after_failures",
        lambda s: f"after {s.pause_after_failures} runs in a row end FAILED, DEAD_LETTER or EXPIRED",
    ),
    ("Run on create", "trigger-on-create", "trigger_on_create", lambda s: "yes: creating the job also made one run at once"),
    (
        "Pending TTL", "pending-ttl", "pending_ttl_ms",
        lambda s: f"{span(s.pending_ttl_ms)}: a run still PENDING that long after it became leasable ends EXPIRED",
    ),
    ("Priority", "priority", "priority", lambda s: f"{s.priority} (0-9): leased before runs of lower priorities in queue {s.queue}"),
    (
        "Concurrency key", "concurrency-key", "concurrency_key",
        lambda s: f"'{s.concurrency_key}': at most {s.concurrency_limit} run(s) LEASED at once across every job with this key",
    ),
)  # fmt: skip


def extra_rows(spec: JobSpec) -> list[SpecRow]:
    """A row for each of the spec's bounds, exceptions, limits and rules that is set (a default shows none), and
    one for each notification rule."""
    rows = [SpecRow(label, words(spec), key) for label, key, field, words in _EXTRA_ROWS if getattr(spec, field)]
    rows.extend(SpecRow("Notify", notify_words(rule), f"notify-{i}") for i, rule in enumerate(spec.notify))
    return rows


def text_of(data: bytes) -> tuple[str, bool]:
    """(text, was UTF-8): bytes as text to show; bytes that are not UTF-8 are shown with replacement marks."""
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace"), False


def status_class(value: str) -> str:
    """The CSS class of a status label (``status-dead-letter``); the label itself always shows its name."""
    return "status-" + value.lower().replace("_", "-")
