"""ExplainRun in domain terms: a run's recorded steps, in order, ready to show.

The steps are what the state machine recorded as it applied each command
(``cluster.domain.run_history``): nothing here is inferred from the log or a
clock. Two additions, both marked by their kind:

* ``steps_dropped`` — where a long history was cut (the first steps and the
  latest are kept), one step says how many are missing between them;
* ``not_recorded`` — a run from before the cluster used command format 3
  has no steps: one step says so, with what its record still tells.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster.domain import limits as lim
from cluster.domain.model import Run, Step


@dataclass(frozen=True, slots=True)
class Explanation:
    run_id: str
    steps: list[Step]
    steps_dropped: int
    run: Run


def explain(run: Run) -> Explanation:
    steps = list(run.steps)
    if run.steps_dropped and len(steps) > lim.RUN_STEPS_HEAD:
        at = steps[lim.RUN_STEPS_HEAD].at_ms
        gap = Step(
            at, "steps_dropped",
            f"{run.steps_dropped} steps between these were not kept (a run keeps its first {lim.RUN_STEPS_HEAD} "
            f"and its latest, {lim.MAX_RUN_STEPS} in all)",
        )  # fmt: skip
        steps.insert(lim.RUN_STEPS_HEAD, gap)
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
