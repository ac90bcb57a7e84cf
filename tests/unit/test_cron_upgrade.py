"""Existing jobs across the change of DST rule (command format 2): no instant fires twice across the upgrade.

Before the upgrade every cron job had the once-rule; now a job whose hour field is ``*`` or ``*/n``
follows the clock. A job keeps the next instant it computed before the upgrade (``next_fire_ms``, in the
snapshot); the instants after it follow the new rule, and the job's cursor with the ``Fire`` command's
expected next instant keep any instant from firing twice.

Before the switch the state machine itself applies the old rules (a cluster on command format 1:
``raftsched.cluster.domain.schedule.legacy``); the old rule is also reproduced by making the parsed fields say "specific
hours" for every job, which is what the old evaluator did. State crosses the upgrade the way a node
carries it: a snapshot restored into a new machine, then the committed switch to command format 2.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import Cron, JobSpec
from raftsched.cluster.domain.results import FireReport, Ok
from raftsched.cluster.domain.schedule import instants as schedule
from raftsched.cluster.domain.schedule.cron_fields import CronFields
from raftsched.cluster.fsm.machine import JobStateMachine

pytestmark = pytest.mark.unit

NY = "America/New_York"


def utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0) -> int:
    return int(datetime(y, mo, d, h, mi, tzinfo=timezone.utc).timestamp()) * 1000


class Node:
    """A state machine fed through encode/apply, firing like the leader at each due instant."""

    def __init__(self, m: JobStateMachine | None = None, index: int = 0) -> None:
        self.m = m or JobStateMachine()
        self.index = index
        self.fires: list[c.Fire] = []

    def apply(self, cmd: c.Command) -> object:
        self.index += 1
        result = self.m.apply(c.encode(cmd), self.index)
        assert isinstance(result, Ok), result
        return result.value

    def fire_until(self, job_id: str, until_ms: int) -> None:
        while (due := self.m.jobs[job_id].next_fire_ms) is not None and due <= until_ms:
            fire = c.Fire(due, ((job_id, due),), 0, 5_000)
            self.fires.append(fire)
            self.apply(fire)

    def instants(self, job_id: str) -> list[int]:
        return [r.scheduled_ms for r in self.m.iter_job_runs(job_id)]

    def upgraded(self) -> Node:
        """A node of the new version, restored from this one's snapshot, in a cluster that has switched to
        command format 2 (whose cron rules are the new ones: ``raftsched.cluster.domain.schedule.legacy``)."""
        m = JobStateMachine()
        m.restore(self.m.snapshot())
        node = Node(m, self.index)
        assert m.cluster_format == 1
        node.apply(c.SetClusterFormat(m.now_ms, 2))
        return node


@pytest.fixture
def old_rule(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = schedule._fields

    def once_rule_for_every_job(expression: str) -> CronFields:
        return dataclasses.replace(real(expression), follows_clock=False)

    monkeypatch.setattr(schedule, "_fields", once_rule_for_every_job)
    yield
    monkeypatch.undo()


def create(node: Node, job_id: str, expression: str, now: int) -> None:
    node.apply(c.CreateJob(now, job_id, JobSpec(name=job_id, schedule=Cron(expression, NY), type="noop")))


@pytest.mark.parametrize(
    "expression, created, upgrade, end",
    [
        # fall back: the old rule went silent in the second pass (05:45 -> 07:00 UTC)
        ("*/15 * * * *", utc(2026, 11, 1, 4, 40), utc(2026, 11, 1, 5, 50), utc(2026, 11, 1, 8)),
        ("*/15 * * * *", utc(2026, 11, 1, 4, 40), utc(2026, 11, 1, 6, 20), utc(2026, 11, 1, 8)),
        ("0 * * * *", utc(2026, 10, 31, 23), utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 9)),
        # spring forward: the old rule fired 07:00 UTC for the skipped 02:30
        ("30 * * * *", utc(2026, 3, 8, 4), utc(2026, 3, 8, 6, 45), utc(2026, 3, 8, 10)),
        ("30 * * * *", utc(2026, 3, 8, 4), utc(2026, 3, 8, 7, 10), utc(2026, 3, 8, 10)),
    ],
)
def test_no_instant_fires_twice_across_the_upgrade(
    expression: str, created: int, upgrade: int, end: int, old_rule: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = Node()
    create(before, "j", expression, created)
    before.fire_until("j", upgrade)
    fired_before = before.instants("j")
    stored_next = before.m.jobs["j"].next_fire_ms
    assert stored_next is not None and fired_before and max(fired_before) <= upgrade < stored_next

    monkeypatch.undo()  # the new version: clock-following jobs follow the clock
    after = before.upgraded()
    # a pre-upgrade Fire proposed again (a retry, a deposed leader) changes nothing
    report = after.apply(before.fires[-1])
    assert isinstance(report, FireReport) and report.created == [] and report.stale == 1
    after.fire_until("j", end)

    instants = after.instants("j")
    assert len(instants) == len(set(instants)), "an instant fired twice"
    assert instants == sorted(instants)
    assert instants[: len(fired_before)] == fired_before
    # after the upgrade: the instant stored before it, then the new rule's instants
    new_rule = [stored_next] + schedule.upcoming(Cron(expression, NY), stored_next, created, 100)
    assert instants[len(fired_before) :] == [t for t in new_rule if t <= end]


def test_the_rules_really_differ_in_these_cases(old_rule: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guard for the test above: under the old rule the fall-back hour was silent, under the new it is not."""
    s = Cron("*/15 * * * *", NY)
    old = schedule.upcoming(s, utc(2026, 11, 1, 5, 40), 0, 2)
    monkeypatch.undo()
    new = schedule.upcoming(s, utc(2026, 11, 1, 5, 40), 0, 2)
    assert old == [utc(2026, 11, 1, 5, 45), utc(2026, 11, 1, 7)]
    assert new == [utc(2026, 11, 1, 5, 45), utc(2026, 11, 1, 6)]
