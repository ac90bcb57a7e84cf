"""Which of a job's due instants fire and which are skipped: the misfire rules.

Pure functions of (schedule, instants, now). The state machine calls
``plan`` inside ``apply`` for each item of a ``Fire`` command.

Rules, for each due instant ``i`` (``i <= now + lookahead``), with
``late = now - i``:

* ``late <= misfire_threshold``: on time -> fire.
* ``late > catchup_window`` (and not on time: a window shorter than the
  threshold never skips an on-time instant): too old for any policy ->
  skipped, and every older instant with it in one record ("missed by more
  than the catchup window").
* otherwise the instant was *missed* (no leader, whole cluster down, paused
  leader) and the job's misfire policy decides:
  FIRE_ALL fires it; FIRE_ONCE fires only the latest missed instant and
  skips the others ("coalesced"); SKIP skips it.

Skipped instants are returned as ``Skip`` decisions so the state machine can
leave a record: no miss is silent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from raftsched.cluster.domain.model import Every, MisfirePolicy
from raftsched.cluster.domain.schedule.instants import AnySchedule, next_fire

#: how many decisions one item of one Fire command may produce; the rest
#: continue in the leader's next Fire command.
DECISION_BUDGET = 1000
#: how many instants a skip over a too-old range counts one by one (cron)
_COUNT_CAP = 5000


@dataclass(frozen=True, slots=True)
class FireAt:
    instant_ms: int


@dataclass(frozen=True, slots=True)
class Skip:
    instant_ms: int
    last_ms: int
    count: int
    reason: str


Decision = FireAt | Skip


class Window(NamedTuple):
    now_ms: int
    lookahead_ms: int
    misfire_threshold_ms: int
    catchup_window_ms: int
    policy: MisfirePolicy


def _too_old_ms(w: Window) -> int:
    """How late an instant must be to be too old: an on-time instant never is, whatever the window."""
    return max(w.catchup_window_ms, w.misfire_threshold_ms)


def skip_through(schedule: AnySchedule, anchor_ms: int, first_ms: int, until_ms: int, reason: str) -> tuple[Skip, int | None]:
    """One record for every instant from ``first_ms`` (an instant) through ``until_ms``, and the next instant.

    ``Every`` instants are counted arithmetically, however many; others one by
    one up to ``_COUNT_CAP`` (bounded work inside ``apply``), then jumped over.
    """
    if isinstance(schedule, Every):
        step = schedule.every_ms
        count = (until_ms - first_ms) // step + 1
        last = first_ms + (count - 1) * step
        return Skip(first_ms, last, count, reason), next_fire(schedule, last, anchor_ms)
    count, last = 1, first_ms
    nxt = next_fire(schedule, first_ms, anchor_ms)
    while nxt is not None and nxt <= until_ms and count < _COUNT_CAP:
        count, last = count + 1, nxt
        nxt = next_fire(schedule, nxt, anchor_ms)
    if nxt is not None and nxt <= until_ms:  # too many to count one by one: jump
        nxt = next_fire(schedule, until_ms, anchor_ms)
    return Skip(first_ms, last, count, reason), nxt


def _skip_too_old(schedule: AnySchedule, anchor_ms: int, first_ms: int, w: Window) -> tuple[Skip, int | None]:
    """Skip every instant older than the catchup window, in one record."""
    edge = w.now_ms - _too_old_ms(w)  # instants < edge are too old
    reason = f"missed by more than the catchup window ({w.catchup_window_ms} ms)"
    return skip_through(schedule, anchor_ms, first_ms, edge - 1, reason)


def _missed(schedule: AnySchedule, anchor_ms: int, i: int, w: Window) -> Decision:
    late = w.now_ms - i
    if w.policy is MisfirePolicy.FIRE_ALL:
        return FireAt(i)
    if w.policy is MisfirePolicy.FIRE_ONCE:
        nxt = next_fire(schedule, i, anchor_ms)
        if nxt is not None and w.now_ms - nxt > w.misfire_threshold_ms:
            return Skip(i, i, 1, "coalesced: misfire policy FIRE_ONCE fires only the latest missed instant")
        return FireAt(i)
    return Skip(i, i, 1, f"missed by {late} ms (more than the misfire threshold); misfire policy SKIP")


def plan(schedule: AnySchedule, anchor_ms: int, first_ms: int, w: Window) -> tuple[list[Decision], int | None]:
    """Decide the due instants from ``first_ms`` on; return them and the next undecided instant."""
    decisions: list[Decision] = []
    i: int | None = first_ms
    horizon = w.now_ms + w.lookahead_ms
    while i is not None and i <= horizon and len(decisions) < DECISION_BUDGET:
        late = w.now_ms - i
        if late > _too_old_ms(w):
            skip, i = _skip_too_old(schedule, anchor_ms, i, w)
            decisions.append(skip)
            continue
        decisions.append(FireAt(i) if late <= w.misfire_threshold_ms else _missed(schedule, anchor_ms, i, w))
        i = next_fire(schedule, i, anchor_ms)
    return decisions, i
