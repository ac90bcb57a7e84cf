"""Which finished runs retention keeps apart, and how long a deleted job waits (``raftsched.cluster.fsm.retention``)."""

from __future__ import annotations

from raftsched.cluster.domain.model import Run, RunStatus

#: how long a deleted job whose runs are still active waits before it is looked at again
RECHECK_MS = 60_000
#: the finished statuses ``failed_history_limit`` keeps apart
FAILURES = frozenset({RunStatus.FAILED, RunStatus.DEAD_LETTER})


def kept_apart(run: Run) -> bool:
    """Whether a finished run counts against ``failed_history_limit``: a failure that finished once the cluster
    recorded histories (command format 3; such a run has steps). Decided from the record alone, so a restore
    from a snapshot body rebuilds the same index."""
    return run.status in FAILURES and bool(run.steps_raw)
