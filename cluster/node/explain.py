"""ExplainRun in domain terms: a run's recorded steps, in order, ready to show.

The steps are what the state machine recorded as it applied each command
(``raftsched.cluster.domain.run_history``): nothing here is inferred from the log or a
clock. What an attempt already records is not stored twice; it is shown
here, in its place:

* ``leased`` — each attempt's grant (executor, lease, token), after the
  steps recorded before it (``Attempt.steps_before``);
* ``succeeded`` — the attempt that succeeded, last.

And two marks:

* ``steps_dropped`` — where a long history was cut (the first steps and the
  latest are kept), one step says how many are missing between them;
* ``not_recorded`` — a run from before the cluster used command format 3
  has no steps: one step says so, with what its record still tells.
"""

from __future__ import annotations

from dataclasses import dataclass

from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.model import Attempt, AttemptOutcome, Run, Step
from raftsched.cluster.domain.run_history import steps as steps_of


@dataclass(frozen=True, slots=True)
class Explanation:
    run_id: str
    steps: list[Step]
    steps_dropped: int
    run: Run


def _numbered(run: Run) -> list[tuple[int, Step]]:
    """The stored steps with their number among all the run ever recorded (dropped ones counted)."""
    out = []
    for i, step in enumerate(steps_of(run)):
        out.append((i if i < lim.RUN_STEPS_HEAD else i + run.steps_dropped, step))
    return out


def _grant(a: Attempt) -> list[Step]:
    """An attempt's grant, and its latest heartbeat details when it sent some (before it ended)."""
    steps = [
        Step(
            a.leased_at_ms,
            "leased",
            f"attempt {a.attempt} leased to executor {a.executor_id!r} (lease {a.lease_id}, token {a.fencing_token})",
        )
    ]
    if a.heartbeat_details:
        text = " ".join(a.heartbeat_details.decode("utf-8", "replace").split())
        shown = text if len(text) <= HEARTBEAT_SHOWN else text[: HEARTBEAT_SHOWN - 3] + "..."
        steps.append(Step(a.heartbeat_at_ms, "heartbeat", f"attempt {a.attempt}'s latest heartbeat details: {shown}"))
    return steps


#: characters of an attempt's heartbeat details an explanation shows
HEARTBEAT_SHOWN = 200


def explain(run: Run) -> Explanation:
    stored = _numbered(run)
    steps: list[Step] = []
    grants = sorted(run.attempts, key=lambda a: a.steps_before)
    gap_at = lim.RUN_STEPS_HEAD if run.steps_dropped and len(stored) > lim.RUN_STEPS_HEAD else None
    for number, step in stored:
        while grants and grants[0].steps_before <= number:
            steps.extend(_grant(grants.pop(0)))
        if gap_at is not None and number == lim.RUN_STEPS_HEAD + run.steps_dropped:
            steps.append(
                Step(
                    step.at_ms,
                    "steps_dropped",
                    f"{run.steps_dropped} steps between these were not kept (a run keeps its first {lim.RUN_STEPS_HEAD} "
                    f"and its latest, {lim.MAX_RUN_STEPS} in all)",
                )  # fmt: skip
            )
        steps.append(step)
    for a in grants:
        steps.extend(_grant(a))
    last = run.attempts[-1] if run.attempts else None
    if last is not None and last.outcome == AttemptOutcome.SUCCEEDED.value:
        steps.append(Step(last.finished_at_ms, "succeeded", f"attempt {last.attempt} succeeded on executor {last.executor_id!r}"))
    if not steps:
        steps.append(
            Step(
                run.fired_ms,
                "not_recorded",
                f"this run was recorded before the cluster used command format 3, which keeps a run's steps: it is "
                f"{run.status.value} after attempt {run.attempt}" + (f" ({run.error})" if run.error else ""),
            )  # fmt: skip
        )
    return Explanation(run.run_id, steps, run.steps_dropped, run)
