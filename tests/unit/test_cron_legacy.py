"""The cron rules follow the cluster's command format, so a rolling upgrade and a replay stay deterministic
(raftsched.cluster.domain.schedule.legacy)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import Cron, Every, JobSpec
from raftsched.cluster.domain.results import Ok
from raftsched.cluster.domain.schedule import instants as schedule
from raftsched.cluster.domain.schedule.legacy import LegacyCron, check_legacy, under_rules
from raftsched.cluster.fsm.machine import JobStateMachine

pytestmark = pytest.mark.unit


def utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0) -> int:
    return int(datetime(y, mo, d, h, mi, tzinfo=timezone.utc).timestamp()) * 1000


# What the release before command format 2 answered (its cluster/domain/schedule.py, `upcoming(..., 4)`), for cases
# where the new rules answer otherwise: the format-1 rules must give exactly these.
OLD_RELEASE = [
    # a clock-following job went silent in the repeated hour of a fall back
    ("*/15 * * * *", "America/New_York", utc(2026, 11, 1, 5, 40), [1793511900000, 1793516400000, 1793517300000, 1793518200000]),
    # ... and fired the skipped 02:30 at the end of the gap
    ("30 * * * *", "America/New_York", utc(2026, 3, 8, 6, 45), [1772953200000, 1772955000000, 1772958600000, 1772962200000]),
    # n#k with a restricted day of month: croniter required both, which never happens here
    ("0 0 15 * 5#2", "Europe/Berlin", utc(2026, 1, 1), []),
]


@pytest.mark.parametrize("expression, zone, after, old", OLD_RELEASE)
def test_format_1_rules_are_the_previous_release(expression: str, zone: str, after: int, old: list[int]) -> None:
    assert schedule.upcoming(LegacyCron(expression, zone), after, after, 4) == old
    assert schedule.upcoming(Cron(expression, zone), after, after, 4) != old  # the new rules really differ here


def test_only_cron_schedules_change_with_the_format() -> None:
    assert under_rules(Cron("0 * * * *", "UTC"), 1) == LegacyCron("0 * * * *", "UTC")
    assert under_rules(Cron("0 * * * *", "UTC"), 2) == Cron("0 * * * *", "UTC")
    assert under_rules(Every(1000), 1) == Every(1000)


def test_what_only_the_new_rules_read_is_named() -> None:
    assert check_legacy("0 0 * * *") is None
    assert check_legacy("0 0 L * 5L") is not None


class Log:
    """A replica fed encoded entries in order; ``entries`` is its log."""

    def __init__(self) -> None:
        self.m = JobStateMachine()
        self.entries: list[bytes] = []

    def apply(self, cmd: c.Command) -> object:
        self.entries.append(c.encode(cmd))
        result = self.m.apply(self.entries[-1], len(self.entries))
        assert isinstance(result, Ok), result
        return result.value

    def fire_until(self, job_id: str, until_ms: int) -> None:
        while (due := self.m.jobs[job_id].next_fire_ms) is not None and due <= until_ms:
            self.apply(c.Fire(due, ((job_id, due),), 0, 5_000))


@pytest.mark.parametrize(
    "switch, second_pass_fires",
    [
        # switched before the repeated hour: the job's next instants follow the new rule (both passes)
        (utc(2026, 11, 1, 5, 20), True),
        # switched inside it: the next instant stored under the old rule (07:00 UTC) stands
        (utc(2026, 11, 1, 5, 50), False),
    ],
)
def test_every_replica_switches_rules_at_the_same_entry_and_a_replay_agrees(switch: int, second_pass_fires: bool) -> None:
    created, end = utc(2026, 11, 1, 4, 40), utc(2026, 11, 1, 9)
    live = Log()
    live.apply(c.CreateJob(created, "j", JobSpec("j", Cron("*/15 * * * *", "America/New_York"), type="noop")))
    live.fire_until("j", switch)
    live.apply(c.SetClusterFormat(switch, 2))
    live.fire_until("j", end)
    fired = [r.scheduled_ms for r in live.m.iter_job_runs("j")]
    # the fall back's second pass (01:00-02:00 EST = 06:00-07:00 UTC): silent under the old rule
    second_pass = [t for t in fired if utc(2026, 11, 1, 6) <= t < utc(2026, 11, 1, 7)]
    assert second_pass == ([utc(2026, 11, 1, 6, m) for m in (0, 15, 30, 45)] if second_pass_fires else [])
    assert len(fired) == len(set(fired)) and fired == sorted(fired)
    assert all(b - a == 15 * 60_000 for a, b in zip(fired, fired[1:]) if b > utc(2026, 11, 1, 7))
    # the same log applied again from the start (a replay, or another replica) gives the same state
    replay = JobStateMachine()
    for index, data in enumerate(live.entries, start=1):
        replay.apply(data, index)
    assert replay.snapshot() == live.m.snapshot()


def test_the_proposer_refuses_what_only_the_new_rules_read_until_the_switch() -> None:
    from typing import Any, Callable

    from raftsched.cluster.domain.errors import ValidationError
    from raftsched.cluster.domain.validation import Limits
    from raftsched.cluster.node.clock import FakeClock
    from raftsched.cluster.node.job_service import JobService
    from raftsched.storage import OutputReader

    class Store:
        def __init__(self) -> None:
            self.machine = JobStateMachine()
            self.on_applied: list[Any] = []
            self.proposed: list[c.Command] = []

        def read(self, fn: Callable[[JobStateMachine], Any], barrier: bool = True) -> Any:
            return fn(self.machine)

        def execute(self, cmd: c.Command, timeout: float | None = None) -> Any:
            self.proposed.append(cmd)
            result = self.machine.apply(c.encode(cmd), len(self.proposed) + 1)
            assert isinstance(result, Ok), result
            return result.value

    store = Store()
    store.machine.apply(c.encode(c.NodeInfo(0, "n9", "0.0.1", 1)), 1)  # a member of a version before format 2
    service = JobService(store, FakeClock(), Limits(), OutputReader())  # type: ignore[arg-type]
    last_friday = JobSpec("payroll", Cron("0 9 * * 5L", "Europe/Berlin"), type="noop")
    with pytest.raises(ValidationError, match="needs the cron rules of command format 2.*still uses format 1"):
        service.create_job(last_friday)
    assert store.proposed == []
    service.create_job(JobSpec("daily", Cron("0 9 * * *", "Europe/Berlin"), type="noop"))  # both rules read it
    store.execute(c.SetClusterFormat(0, 2))
    assert service.create_job(last_friday).next_fire_ms is not None
