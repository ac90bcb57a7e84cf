"""What a request needs of the cluster's command format, and the wait while a brand-new cluster switches to it.

A field or a request that only a newer command format carries is refused
before it is proposed while the cluster still uses an older one (an older
node would apply the command without it): ``FormatGate.check_spec`` (a cron
only the current rules read, a ``failed_history_limit``, a spec's format 5
fields) and ``FormatGate.check`` (a format 5 request: a pause note, a trigger
payload, a backfill).

A cluster starts on command format 1 and its leader switches it up once every
member has reported (``NodeInfo``) that it understands a newer one
(``raftsched.cluster.node.membership.keeper``): a second or two after a brand-new
cluster elects its first leader. A request in that window would be refused
although nothing is being upgraded. So while no member has reported an older
format (the switch is coming: members are still reporting, or the leader is
about to switch) and the cluster is young (fewer than ``YOUNG_ENTRIES``
entries applied) such a request waits up to ``FORMAT_WAIT_S`` for it
(``reached``). A member that did report an older format (a rolling upgrade in
progress) means the switch is not coming: the request is refused at once; so
is it on a cluster that has run for a while (a member that never reports, of
a release from before members reported, is being upgraded).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Protocol

from raftsched.cluster.domain.errors import RejectedError, ValidationError
from raftsched.cluster.domain.model import DEFAULT_FAILED_HISTORY_LIMIT, SCHEDULES_FORMAT, Cron, JobSpec
from raftsched.cluster.domain.results import FailedPrecondition
from raftsched.cluster.domain.run_history import HISTORY_FORMAT
from raftsched.cluster.domain.schedule.legacy import NEW_RULES_FORMAT, check_legacy
from raftsched.cluster.domain.spec_codec import extras_named, has_extras

#: the longest a request waits for a format switch that is coming (a brand-new cluster's takes a second or two)
FORMAT_WAIT_S = 10.0
#: how often the applied format is looked at meanwhile
FORMAT_POLL_S = 0.05
#: a cluster with fewer entries applied than this is young: its first switch may still be coming
YOUNG_ENTRIES = 10_000


class _Reads(Protocol):
    def read(self, fn: Callable[[Any], Any], barrier: bool = True) -> Any: ...


def _coming(m: Any, needed: int) -> tuple[bool, bool]:
    """Whether the cluster uses ``needed`` now; whether the switch to it may still be coming."""
    young = m.applied_index < YOUNG_ENTRIES
    return m.cluster_format >= needed, young and all(fmt >= needed for _, fmt in m.members.values())


class FormatGate:
    """The command format checks of the requests a node proposes, on its applied state (no barrier)."""

    def __init__(self, replica: _Reads, wait_s: float = FORMAT_WAIT_S, poll_s: float = FORMAT_POLL_S) -> None:
        self._replica = replica
        self._wait_s = wait_s
        self._poll_s = poll_s

    def now(self) -> int:
        """The cluster's command format as this node applied it."""
        fmt: int = self._replica.read(lambda m: m.cluster_format, barrier=False)
        return fmt

    def reached(self, needed: int) -> bool:
        """Whether the cluster uses command format ``needed`` or newer, after waiting up to ``wait_s`` while the
        switch to it may be coming (a young cluster, no member reported an older format)."""
        pause = threading.Event()  # waits in real time, whatever clock the node runs on
        polls = max(0, round(self._wait_s / self._poll_s))
        for k in range(polls + 1):
            now, coming = self._replica.read(lambda m: _coming(m, needed), barrier=False)
            if now:
                return True
            if not coming or k == polls:
                return False  # a member runs a version without it, or the cluster is not new: no switch is coming
            pause.wait(self._poll_s)
        return False

    def check(self, what: str) -> None:
        """``what`` needs command format 5: FAILED_PRECONDITION until the cluster uses it."""
        if not self.reached(SCHEDULES_FORMAT):
            raise RejectedError(
                FailedPrecondition(
                    f"{what} needs command format {SCHEDULES_FORMAT}, and the cluster still uses an older one (a rolling "
                    "upgrade is not finished): retry once every node runs this version (raftsched cluster status shows "
                    "the command format)"
                )
            )

    def check_spec(self, spec: JobSpec) -> None:
        """What of a spec needs a newer command format than the cluster's: its cron rules, its
        failed_history_limit, its format 5 fields."""
        self._check_rules(spec)
        self._check_history(spec)
        if has_extras(spec):
            self.check(f"a spec that sets {', '.join(extras_named(spec))}")

    def _check_rules(self, spec: JobSpec) -> None:
        """While the cluster is on command format 1 (a rolling upgrade from the release before command format 2
        is not finished), every node applies the old cron rules: refuse what only the new ones can read."""
        schedule = spec.schedule
        if not isinstance(schedule, Cron) or self.now() >= NEW_RULES_FORMAT:
            return
        why = check_legacy(schedule.expression)
        if why is not None and not self.reached(NEW_RULES_FORMAT):
            raise ValidationError(
                f"cron expression {schedule.expression!r} needs the cron rules of command format {NEW_RULES_FORMAT} "
                f"({why}), and the cluster still uses format 1 (a rolling upgrade is not finished): retry once every "
                "node runs this version (raftsched cluster status shows the command format)"
            )

    def _check_history(self, spec: JobSpec) -> None:
        """A failed_history_limit only nodes of command format 3 keep apart: refused until the cluster uses it
        (an older node would apply the spec without it, and prune differently)."""
        if spec.failed_history_limit != DEFAULT_FAILED_HISTORY_LIMIT and not self.reached(HISTORY_FORMAT):
            raise ValidationError(
                f"failed_history_limit needs command format {HISTORY_FORMAT}, and the cluster still uses an older one (a "
                "rolling upgrade is not finished): leave it unset, or retry once every node runs this version"
            )
