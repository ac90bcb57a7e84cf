"""Validation of a spec's schedule bounds and exceptions, labels and limits (command format 5), and label selectors.

``validate_extras`` raises ``ValidationError`` (INVALID_ARGUMENT) naming the
field: bad dates, windows that end before they start, an end before the
start, jitter longer than the schedule's period, extra crons without a cron
schedule, more than 16 labels or a bad label key, and the fields this
version does not act on yet (``pending_ttl``, ``priority``,
``concurrency_key``/``concurrency_limit``, ``notify``): refused rather than
stored and ignored.

``parse_selector``/``matches``: Kubernetes' equality-based label selectors
(``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, comma-separated, all must hold).
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from typing import NamedTuple

from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.model import MAX_PRIORITY, NOTIFY_EVENTS, After, At, Cron, Every, JobSpec
from raftsched.cluster.domain.payloads import check_http_url
from raftsched.cluster.domain.schedule import ScheduleError, upcoming, validate_schedule
from raftsched.cluster.domain.unsafe_text import check_text

MAX_LABELS = 16
MAX_LABEL_VALUE_CHARS = 256
LABEL_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9._/-]{0,62}$")
MAX_SKIP_DATES = 1000
MAX_SKIP_WINDOWS = 100
MAX_EXTRA_CRONS = 16
#: the longest jitter of a one-off job (``at``, ``after``): it has no period to bound it
MAX_ONE_OFF_JITTER_MS = 24 * 3600 * 1000
#: how many instants of a cron schedule the jitter bound looks at for its shortest gap
_GAP_SAMPLE = 200
MAX_SELECTOR_CHARS = 1024
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_KEY_RE = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")
_SECRET_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_NOTIFY_RULES = 8
MAX_NOTIFY_URL_CHARS = 2048


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def validate_extras(spec: JobSpec) -> None:
    """Raise ``ValidationError`` unless the spec's format 5 fields may be stored."""
    _check_bounds(spec)
    _check_extra_crons(spec)
    _check_jitter(spec)
    _check_skips(spec)
    validate_labels(spec.labels)
    if spec.max_runs < 0:
        raise ValidationError(f"max_runs {spec.max_runs} is negative: give a count, or 0 for no limit")
    if not 0 <= spec.pause_after_failures <= 1_000_000:
        raise ValidationError(f"pause_after_failures {spec.pause_after_failures} must be between 0 (never) and 1000000")
    if spec.pending_ttl_ms and not 1000 <= spec.pending_ttl_ms <= lim.MAX_SPAN_MS:
        raise ValidationError(f"pending_ttl {spec.pending_ttl_ms} ms must be at least 1 s (leave it unset for no limit)")
    if not 0 <= spec.priority <= MAX_PRIORITY:
        raise ValidationError(f"priority {spec.priority} must be between 0 (the default) and {MAX_PRIORITY} (leased first)")
    _check_concurrency_key(spec)
    _check_notify(spec)


def _check_notify(spec: JobSpec) -> None:
    if len(spec.notify) > MAX_NOTIFY_RULES:
        raise ValidationError(f"notify has {len(spec.notify)} rules; the limit is {MAX_NOTIFY_RULES}")
    for i, rule in enumerate(spec.notify):
        where = f"notify[{i}]"
        if not rule.events:
            raise ValidationError(f"{where}.events is empty: name any of {', '.join(NOTIFY_EVENTS)}")
        unknown = [e for e in rule.events if e not in NOTIFY_EVENTS]
        if unknown:
            raise ValidationError(f"{where}.events: {lim.shown(unknown[0])} is not an event; use {', '.join(NOTIFY_EVENTS)}")
        lim.check_chars(f"{where}.url", rule.url, MAX_NOTIFY_URL_CHARS)
        try:
            check_http_url(rule.url)
        except ValidationError as exc:
            raise ValidationError(f"{where}.url: {exc}") from None
        if rule.secret_name and not _SECRET_RE.match(rule.secret_name):
            raise ValidationError(
                f"{where}.secret_name {lim.shown(rule.secret_name)} is not valid: 1-64 letters, digits and _ . -"
            )


def _check_concurrency_key(spec: JobSpec) -> None:
    if not spec.concurrency_key:
        if spec.concurrency_limit:
            raise ValidationError("concurrency_limit needs a concurrency_key: name the key the jobs share")
        return
    check_text("concurrency_key", spec.concurrency_key)
    if not _KEY_RE.match(spec.concurrency_key):
        raise ValidationError(
            f"concurrency_key {lim.shown(spec.concurrency_key)} is not valid: use 1-128 letters, digits and _ . : / -"
        )
    if not 1 <= spec.concurrency_limit <= 1_000_000:
        raise ValidationError(
            f"concurrency_limit {spec.concurrency_limit} must be between 1 and 1000000: at most that many runs of the "
            "jobs sharing the key are LEASED at once"
        )


def _check_bounds(spec: JobSpec) -> None:
    for field, ms in (("start_time", spec.start_ms), ("end_time", spec.end_ms)):
        if ms < 0:
            raise ValidationError(f"{field} is before 1970: give a later instant")
        lim.check_instant_ms(field, ms)
    if spec.start_ms and spec.end_ms and spec.end_ms < spec.start_ms:
        raise ValidationError(f"end_time ({_iso(spec.end_ms)}) is before start_time ({_iso(spec.start_ms)})")


def _check_extra_crons(spec: JobSpec) -> None:
    if not spec.extra_crons:
        return
    if not isinstance(spec.schedule, Cron):
        raise ValidationError("extra_crons need a cron schedule: set cron, or put every expression in cron and extra_crons")
    if len(spec.extra_crons) > MAX_EXTRA_CRONS:
        raise ValidationError(f"extra_crons has {len(spec.extra_crons)} expressions; the limit is {MAX_EXTRA_CRONS}")
    for i, cron in enumerate(spec.extra_crons):
        lim.check_chars(f"extra_crons[{i}] expression", cron.expression, lim.MAX_CRON_CHARS)
        lim.check_chars(f"extra_crons[{i}] timezone", cron.timezone, lim.MAX_TIMEZONE_CHARS)
        try:
            validate_schedule(cron)
        except ScheduleError as exc:
            raise ValidationError(f"extra_crons[{i}]: {exc}") from exc


def period_ms(spec: JobSpec) -> int:
    """The schedule's period for the jitter bound: ``every``; for cron, the shortest gap between consecutive
    instants of its expressions together (over the next instants from a fixed day); one-offs: a day."""
    schedule = spec.schedule
    if isinstance(schedule, Every):
        return schedule.every_ms
    if isinstance(schedule, (At, After)):
        return MAX_ONE_OFF_JITTER_MS
    ref = 946_684_800_000  # 2000-01-01T00:00:00Z: validation looks from a fixed instant, the same on every node
    times = sorted({t for c in (schedule, *spec.extra_crons) for t in upcoming(c, ref, ref, _GAP_SAMPLE)})
    gaps = [b - a for a, b in zip(times, times[1:])]
    return min(gaps) if gaps else MAX_ONE_OFF_JITTER_MS


def _check_jitter(spec: JobSpec) -> None:
    if not spec.jitter_ms:
        return
    if spec.jitter_ms < 0:
        raise ValidationError(f"jitter is negative ({spec.jitter_ms} ms): give a positive span, or leave it unset")
    period = period_ms(spec)
    if spec.jitter_ms > period:
        raise ValidationError(
            f"jitter ({spec.jitter_ms} ms) is longer than the schedule's period ({period} ms): a run would become "
            "leasable after the next instant; give at most the period"
        )


def _check_skips(spec: JobSpec) -> None:
    if len(spec.skip_dates) > MAX_SKIP_DATES:
        raise ValidationError(f"skip_dates has {len(spec.skip_dates)} dates; the limit is {MAX_SKIP_DATES}")
    for i, day in enumerate(spec.skip_dates):
        try:
            if not _DATE_RE.match(day):
                raise ValueError(day)
            date.fromisoformat(day)
        except ValueError:
            raise ValidationError(f"skip_dates[{i}] {lim.shown(day)} is not a date: write YYYY-MM-DD (e.g. 2026-12-25)") from None
    if len(spec.skip_windows) > MAX_SKIP_WINDOWS:
        raise ValidationError(f"skip_windows has {len(spec.skip_windows)} windows; the limit is {MAX_SKIP_WINDOWS}")
    for i, w in enumerate(spec.skip_windows):
        for end, ms in (("start", w.start_ms), ("end", w.end_ms)):
            if ms < 0:
                raise ValidationError(f"skip_windows[{i}].{end} is before 1970")
            lim.check_instant_ms(f"skip_windows[{i}].{end}", ms)
        if w.end_ms <= w.start_ms:
            raise ValidationError(
                f"skip_windows[{i}] ends ({_iso(w.end_ms)}) before it starts ({_iso(w.start_ms)}): give an end after the start"
            )


def validate_labels(labels: tuple[tuple[str, str], ...]) -> None:
    if len(labels) > MAX_LABELS:
        raise ValidationError(f"labels has {len(labels)} labels; the limit is {MAX_LABELS}")
    for key, value in labels:
        if not LABEL_KEY_RE.match(key):
            raise ValidationError(
                f"label key {lim.shown(key)} is not valid: 1-63 characters of a-z 0-9 . _ / -, starting with a letter or digit"
            )
        if len(value) > MAX_LABEL_VALUE_CHARS:
            raise ValidationError(f"label {key}'s value is {len(value)} characters; the limit is {MAX_LABEL_VALUE_CHARS}")
        check_text(f"label {key}'s value", value)


# ------------------------------------------------------------ selectors


class Requirement(NamedTuple):
    """One term of a selector: ``op`` is "=", "!=", "exists" or "!exists"."""

    key: str
    op: str
    value: str = ""


def parse_selector(text: str) -> tuple[Requirement, ...]:
    """The terms of a label selector ("" selects everything); ``ValidationError`` naming a bad term."""
    lim.check_chars("label_selector", text, MAX_SELECTOR_CHARS)
    out: list[Requirement] = []
    for raw in text.split(","):
        term = raw.strip()
        if not term:
            if text.strip():
                raise ValidationError(f"label_selector {lim.shown(text)} has an empty term: separate terms with one comma")
            continue
        if "!=" in term:
            key, value = (p.strip() for p in term.split("!=", 1))
            req = Requirement(key, "!=", value)
        elif "=" in term:
            key, value = (p.strip() for p in term.replace("==", "=", 1).split("=", 1))
            req = Requirement(key, "=", value)
        elif term.startswith("!"):
            req = Requirement(term[1:].strip(), "!exists")
        else:
            req = Requirement(term, "exists")
        if not LABEL_KEY_RE.match(req.key) or "=" in req.value or "!" in req.value:
            raise ValidationError(
                f"label_selector term {lim.shown(term)} is not valid: use k=v, k!=v, k or !k with keys of a-z 0-9 . _ / -"
            )
        out.append(req)
    return tuple(out)


def matches(selector: tuple[Requirement, ...], labels: tuple[tuple[str, str], ...]) -> bool:
    """Whether ``labels`` satisfy every term."""
    if not selector:
        return True
    have = dict(labels)
    for req in selector:
        value = have.get(req.key)
        if req.op == "=":
            if value != req.value:
                return False
        elif req.op == "!=":
            if value == req.value:
                return False
        elif req.op == "exists":
            if value is None:
                return False
        elif value is not None:
            return False
    return True
