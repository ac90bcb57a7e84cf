"""A run's history: its attempts and the steps that explain it, recorded as the state machine applies commands.

Pure functions on a ``Run`` record (inside ``apply``, on the unit of work's copy).
Bounded so that a run never grows without limit:

* ``Run.attempts`` keeps at most ``MAX_RUN_ATTEMPTS_KEPT`` attempts; beyond
  that the oldest is dropped and counted in ``attempts_dropped``.
* ``Run.steps_raw`` keeps at most ``MAX_RUN_STEPS``: the first ``RUN_STEPS_HEAD``
  (how the run came to be) and the latest ones; a step dropped from between
  them is counted in ``steps_dropped`` (``ExplainRun`` shows the gap).
* Texts are cut (``MAX_STEP_DETAIL_CHARS``, ``MAX_ATTEMPT_ERROR_CHARS``).
* The step every run gets ("fired") is stored as plain values (term, entry;
  threshold and policy when missed) and put into words when read
  (``steps``): formatting it in apply cost every fire a few microseconds on
  every node, for the few runs anyone explains.
* What an attempt already says is not stored again as a step: its grant
  (executor, token, when) and its success; ``raftsched.cluster.node.explain`` shows
  them in their place (``Attempt.steps_before``). That keeps the common run
  (fired, leased, succeeded) at one step and one attempt.

Plain values only, deterministic: every node records the same bytes. The
state machine records a history only once the cluster uses command format 3
(``HISTORY_FORMAT``): before, every node (old and new) holds what old nodes
hold.
"""

from __future__ import annotations

from typing import Any

from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.commands import Fire
from raftsched.cluster.domain.model import Attempt, AttemptOutcome, JobSpec, Run, Step
from raftsched.cluster.domain.schedule.firing import Skip
from raftsched.cluster.domain.words import iso, schedule_words, span

#: the cluster command format from which runs record their attempts and steps
HISTORY_FORMAT = 3


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def add_step(run: Run, at_ms: int, kind: str, detail: str | tuple[Any, ...], node_id: str = "") -> None:
    """Append a step (its detail: text, or plain values worded on read: ``steps``); beyond the cap the oldest
    step after the head goes (counted)."""
    if isinstance(detail, str):
        detail = _cut(detail, lim.MAX_STEP_DETAIL_CHARS)
    kept = run.steps_raw + ((at_ms, kind, detail, node_id),)
    if len(kept) > lim.MAX_RUN_STEPS:
        kept = kept[: lim.RUN_STEPS_HEAD] + kept[lim.RUN_STEPS_HEAD + 1 :]
        run.steps_dropped += 1
    run.steps_raw = kept


def begin_attempt(run: Run, at_ms: int) -> None:
    """The run was just leased (its ``attempt``, executor, lease and token set): a new attempt, running."""
    before = len(run.steps_raw) + run.steps_dropped
    attempts = run.attempts_raw + ((run.attempt, run.executor_id, run.lease_id, run.fencing_token, at_ms, 0, "", "", "", before),)
    if len(attempts) > lim.MAX_RUN_ATTEMPTS_KEPT:
        attempts = attempts[1:]
        run.attempts_dropped += 1
    run.attempts_raw = attempts


def end_attempt(run: Run, at_ms: int, outcome: AttemptOutcome, error: str = "", log_uri: str = "") -> None:
    """The latest attempt ended (if it is still running: nothing ends twice)."""
    if not run.attempts_raw:
        return
    last = run.attempts_raw[-1]  # the fields of ``Attempt``, in order
    if last[6] or last[3] != run.fencing_token:
        return
    ended = last[:5] + (at_ms, outcome.value, _cut(error, lim.MAX_ATTEMPT_ERROR_CHARS), log_uri) + last[9:]
    run.attempts_raw = run.attempts_raw[:-1] + (ended,)


def heartbeat(run: Run, at_ms: int, details: bytes) -> None:
    """The executor sent heartbeat details for the running attempt: kept on it (the latest wins). Only the latest
    ``MAX_ATTEMPTS_WITH_HEARTBEAT`` attempts keep theirs (when they came stays), so a run's details stay bounded."""
    if not run.attempts_raw:
        return
    last = run.attempts_raw[-1]
    if last[6] or last[3] != run.fencing_token:
        return
    keep = len(run.attempts_raw) - lim.MAX_ATTEMPTS_WITH_HEARTBEAT
    earlier = tuple(
        a[:10] + (b"", a[11]) if i < keep and len(a) > 10 and a[10] else a for i, a in enumerate(run.attempts_raw[:-1])
    )
    run.attempts_raw = earlier + (last[:10] + (details, at_ms),)


def last_heartbeat(run: Run) -> tuple[bytes, int]:
    """The latest heartbeat details any attempt of the run kept, and when they came ((b"", 0): none)."""
    for a in reversed(run.attempts_raw):
        if len(a) > 10 and a[10]:
            return a[10], a[11]
    return b"", 0


def attempt_of(run: Run, number: int) -> Attempt | None:
    """Attempt ``number`` (1-based) if the run keeps it."""
    for a in run.attempts_raw:
        if a[0] == number:
            return Attempt(*a)
    return None


def fired_detail(spec: JobSpec, instant_ms: int, now_ms: int, cmd: Fire, index: int, jitter: int = 0) -> tuple[Any, ...]:
    """A "fired" step's detail as stored: plain values (the leader's term, the entry; the misfire threshold and
    policy when the instant was missed; the jitter offset when there is one), put into words only when read
    (``steps``): every run is fired, few are explained."""
    missed = now_ms - instant_ms > cmd.misfire_threshold_ms
    if jitter:
        return (cmd.term, index, cmd.misfire_threshold_ms if missed else 0, spec.misfire.value if missed else "", jitter)
    if missed:
        return (cmd.term, index, cmd.misfire_threshold_ms, spec.misfire.value)
    return (cmd.term, index)


def _fired_words(run: Run, at_ms: int, detail: tuple[Any, ...], node_id: str) -> str:
    term, index = detail[0], detail[1]
    by = f"leader {node_id}" if node_id else "the leader"
    late = at_ms - run.scheduled_ms
    when = f"{span(late)} after its instant" if late >= 0 else f"{span(-late)} before its instant (lookahead)"
    text = f"instant {iso(run.scheduled_ms)} fired by {by} ({f'term {term}, ' if term else ''}entry {index}), {when}"
    if len(detail) > 3 and detail[3]:
        text += f"; missed (later than the misfire threshold of {span(detail[2])}) and fired under misfire policy {detail[3]}"
    if len(detail) > 4 and detail[4]:
        text += f"; leasable {span(detail[4])} after its instant, from the job's jitter"
    return text


def steps(run: Run) -> tuple[Step, ...]:
    """The run's stored steps, in words (a step stored as plain values is worded here, on read)."""
    out = []
    for at_ms, kind, detail, node_id in run.steps_raw:
        if not isinstance(detail, str):
            detail = _fired_words(run, at_ms, detail, node_id) if kind == "fired" else repr(detail)
        out.append(Step(at_ms, kind, detail, node_id))
    return tuple(out)


def skipped_detail(spec: JobSpec, skip: Skip) -> str:
    """Why instants were skipped (the policy is in the reason) and which."""
    if skip.count == 1:
        which = f"instant {iso(skip.instant_ms)}"
    else:
        which = f"{skip.count} instants from {iso(skip.instant_ms)} to {iso(skip.last_ms)}"
    return f"{which} of {schedule_words(spec.schedule)} skipped: {skip.reason}"
