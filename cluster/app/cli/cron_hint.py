"""A 6-field cron read the other way round: raftsched (as croniter) puts the seconds LAST, while Quartz,
Spring and many schedulers put them first.

``'*/15 * * * * *'`` meant "every 15 seconds" seconds-first; here it is
"every second of minutes 0, 15, 30 and 45": 60 runs in a row, four times an
hour. ``six_field_warning`` says so for any 6-field expression whose seconds
field (the last) matches every second while another field restricts it, and
gives the expression with its first field moved to the end (the likely
intent), and the 5-field form when that first field is ``0``. An expression
with seconds named (``0 12 * * * 30``) reads as written: no warning.

Pure; it uses the domain's cron parser, so what it reads is what the
cluster reads.
"""

from __future__ import annotations

from raftsched.cluster.domain.schedule.cron_fields import ScheduleError, parse_cron


def _reads(expression: str) -> bool:
    try:
        parse_cron(expression)
    except ScheduleError:
        return False
    return True


def six_field_warning(expression: str) -> str | None:
    """Why a 6-field ``expression`` likely does not say what was meant, and what to write (None: it reads as meant)."""
    fields = expression.split()
    if len(fields) != 6:
        return None
    try:
        parsed = parse_cron(expression)
    except ScheduleError:
        return None  # the cluster refuses it, saying why
    restricted = (
        len(parsed.minutes) < 60
        or len(parsed.hours) < 24
        or len(parsed.months) < 12
        or parsed.dom_restricted
        or parsed.dow_restricted
    )
    if len(parsed.seconds) < 60 or not restricted:
        return None
    text = (
        f"cron '{expression}' has 6 fields: raftsched reads them as minute hour day-of-month month day-of-week "
        f"SECOND (the seconds last), so its last field '{fields[5]}' fires every second of each minute the other "
        "fields give: 60 runs in a row"
    )
    rotated = " ".join(fields[1:] + fields[:1])
    if _reads(rotated):
        text += f". If the first field was meant as the seconds (as Quartz and Spring write them), write '{rotated}'"
        if fields[0] == "0" and _reads(" ".join(fields[1:])):
            text += f" (or with 5 fields: '{' '.join(fields[1:])}')"
    return text
