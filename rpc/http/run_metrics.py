"""Feeds the event-driven metrics from what the node applies and sees.

``RunEventMetrics.on_applied`` is a ``Replica.on_applied`` hook: it
runs on the Raft tick thread after each apply with the run events of that
entry, so it does no I/O and only a few counter and histogram updates per
event, with one clock read per entry. It counts only on the leader, so that
each event is counted once in the cluster (a sum over the nodes is the
cluster's total, and a follower replaying its log after a restart counts
nothing twice); leadership is pysyncobj's hint, so a deposed leader that
still believes it leads may count a few events twice for a moment.

* ``fired`` (not a manual trigger): ``raftsched_fire_delay_seconds``, from the
  run's scheduled instant to now (the fire's commit: the moment it became
  leasable; 0 for a run fired ahead of its instant);
* ``leased``: ``raftsched_leases_granted_total`` and
  ``raftsched_due_to_leased_seconds``, from when the run became due (its
  instant, or the end of a retry's backoff) to now (the grant's commit);
* ``finished`` and ``skipped``: ``raftsched_runs_finished_total{status}``;
* ``lease_expired``: ``raftsched_leases_expired_total``.

``LeaderChanges.on_health`` (a ``HealthMonitor`` listener) counts
``raftsched_leader_changes_total``: each time this node sees a leader other
than the last one it saw (another node, or the same one in a new term).
"""

from __future__ import annotations

from typing import Callable

from raftsched.cluster.domain.model import RunStatus
from raftsched.cluster.fsm.tx import RunEvent
from raftsched.cluster.node.health import Health
from raftsched.rpc.http.metrics import NodeMetrics


class RunEventMetrics:
    def __init__(self, metrics: NodeMetrics, is_leader: Callable[[], bool], now_ms: Callable[[], int]) -> None:
        self._m = metrics
        self._is_leader = is_leader
        self._now_ms = now_ms

    def on_applied(self, events: list[RunEvent]) -> None:
        if not events or not self._is_leader():
            return
        m = self._m
        now = self._now_ms()
        leased = expired = 0
        ended: dict[RunStatus, int] = {}  # counted here, added once per entry: a counter's inc takes its lock
        for kind, run in events:
            if kind == "fired":
                if not run.manual:
                    m.fire_delay.observe(max(0, now - run.scheduled_ms) / 1000.0)
            elif kind == "leased":
                leased += 1
                m.due_to_leased.observe(max(0, now - run.not_before_ms) / 1000.0)
            elif kind == "finished":
                ended[run.status] = ended.get(run.status, 0) + 1
            elif kind == "skipped":
                ended[RunStatus.SKIPPED] = ended.get(RunStatus.SKIPPED, 0) + 1
            elif kind == "lease_expired":
                expired += 1
        if leased:
            m.leases_granted.inc(leased)
        if expired:
            m.leases_expired.inc(expired)
        for status, n in ended.items():
            child = m.finished.get(status)
            if child is not None:
                child.inc(n)


class LeaderChanges:
    def __init__(self, metrics: NodeMetrics) -> None:
        self._m = metrics
        self._last: tuple[str, int] | None = None

    def on_health(self, before: Health | None, now: Health) -> None:
        if now.leader is None:
            return
        seen = (now.leader, now.term)
        if self._last is not None and seen != self._last:
            self._m.leader_changes.inc()
        self._last = seen
