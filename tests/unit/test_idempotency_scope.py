"""Idempotency keys belong to a queue (``raftsched.cluster.domain.idempotency_scope``): the proposer stores a key under its
spec's queue, so one queue's submitter cannot take another queue's key; keys stored before (plain) still find
their job in their own queue; the state machine and the log entries from before are untouched."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import RejectedError
from raftsched.cluster.domain.idempotency_scope import SEPARATOR, readable, scoped, user_key
from raftsched.cluster.domain.model import Every, JobSpec
from raftsched.cluster.domain.results import AlreadyExists, Ok, Rejected
from raftsched.cluster.domain.validation import Limits
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.clock import FakeClock
from raftsched.cluster.node.job_service import JobService
from raftsched.rpc import convert as cv
from raftsched.storage import OutputReader

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000


def spec(queue: str, every_ms: int = 60_000) -> JobSpec:
    return JobSpec(name="nightly", schedule=Every(every_ms), type="noop", queue=queue)


class Log:
    """The part of Replica the service uses: commands go through their log encoding into two replicas."""

    def __init__(self) -> None:
        self.replicas = [JobStateMachine(), JobStateMachine()]
        self.proposed: list[c.Command] = []

    def apply(self, cmd: c.Command) -> Any:
        self.proposed.append(cmd)
        results = [m.apply(c.encode(cmd), len(self.proposed)) for m in self.replicas]
        assert type(results[0]) is type(results[1])
        return results[0]

    def read(self, fn: Callable[[JobStateMachine], Any], barrier: bool = True) -> Any:
        return fn(self.replicas[0])

    def execute(self, cmd: c.Command, timeout: float | None = None) -> Any:
        result = self.apply(cmd)
        if isinstance(result, Rejected):
            raise RejectedError(result)
        assert isinstance(result, Ok)
        return result.value

    def execute_each(self, items: list[Any], build: Callable[[Any], c.Command]) -> list[Any]:
        out = []
        for item in items:
            try:
                out.append(self.execute(build(item)))
            except RejectedError as exc:
                out.append(exc)
        return out


@pytest.fixture()
def log() -> Log:
    return Log()


def service(log: Log) -> JobService:
    return JobService(log, FakeClock(T0), Limits(), OutputReader())  # type: ignore[arg-type]


def test_the_same_key_in_two_queues_makes_two_jobs(log: Log) -> None:
    svc = service(log)
    ours = svc.create_job(spec("team-a"), "nightly")
    theirs = svc.create_job(spec("team-b"), "nightly")
    assert ours.job_id != theirs.job_id
    assert svc.create_job(spec("team-a"), "nightly").job_id == ours.job_id  # a retry still finds its job
    assert svc.create_job(spec("team-b"), "nightly").job_id == theirs.job_id
    assert [cmd.idempotency_key for cmd in log.proposed[:2]] == [f"team-a{SEPARATOR}nightly", f"team-b{SEPARATOR}nightly"]
    assert cv.job_to_pb(ours).idempotency_key == "nightly"  # the API shows the key as the client sent it


def test_a_key_reused_with_another_spec_is_already_exists_naming_the_key_and_its_queue(log: Log) -> None:
    svc = service(log)
    svc.create_job(spec("team-a"), "nightly")
    with pytest.raises(RejectedError) as err:
        svc.create_job(spec("team-a", 120_000), "nightly")
    assert isinstance(err.value.rejected, AlreadyExists)
    assert "idempotency key 'nightly' (queue 'team-a') was already used" in str(err.value)
    assert SEPARATOR not in str(err.value)
    answers = svc.create_jobs([(spec("team-a", 120_000), "nightly", ""), (spec("team-c"), "nightly", "")])
    assert isinstance(answers[0], RejectedError) and "'nightly' (queue 'team-a')" in str(answers[0])
    assert not isinstance(answers[1], Exception) and answers[1].spec.queue == "team-c"


def test_a_key_stored_before_keys_had_queues_still_finds_its_job_in_its_queue_only(log: Log) -> None:
    old = log.apply(c.CreateJob(T0, "j-old", spec("team-a"), "nightly"))  # an entry from before: a plain key
    assert isinstance(old, Ok)
    svc = service(log)
    assert svc.create_job(spec("team-a"), "nightly").job_id == "j-old"
    assert log.proposed[-1].idempotency_key == "nightly"  # sent as it was stored: apply answers as it always did
    with pytest.raises(RejectedError, match="idempotency key 'nightly' was already used for job j-old"):
        svc.create_job(spec("team-a", 120_000), "nightly")
    # another queue's submitter cannot reach it: its create is a job of its own, under its queue's key
    squatter = svc.create_job(spec("team-b"), "nightly")
    assert squatter.job_id != "j-old" and log.proposed[-1].idempotency_key == f"team-b{SEPARATOR}nightly"
    batch = svc.create_jobs([(spec("team-a"), "nightly", ""), (spec("team-b"), "nightly", "")])
    assert [j.job_id for j in batch] == ["j-old", squatter.job_id]  # type: ignore[union-attr]


def test_the_state_machine_replays_old_entries_exactly_as_before() -> None:
    """Nothing in apply changed: an entry's key is stored as the entry carries it, plain or scoped."""
    m = JobStateMachine()
    m.apply(c.encode(c.CreateJob(T0, "j-1", spec("team-a"), "plain")), 1)
    m.apply(c.encode(c.CreateJob(T0, "j-2", spec("team-a"), scoped("team-a", "plain"))), 2)
    assert dict(m.idempotency.items()) == {
        "plain": ("j-1", m.idempotency["plain"][1]),
        f"team-a{SEPARATOR}plain": ("j-2", m.idempotency[f"team-a{SEPARATOR}plain"][1]),
    }


def test_scoped_keys_never_meet_a_key_a_client_can_send() -> None:
    assert scoped("q", "") == ""
    assert user_key(scoped("team-a", "a/b: c")) == "a/b: c" and user_key("legacy") == "legacy"
    assert scoped("a", "b:c") != scoped("a:b", "c")  # the separator is in neither a queue name nor a key
    message = f"idempotency key {scoped('q', 'k')!r} was already used"
    assert readable(message, scoped("q", "k")) == "idempotency key 'k' (queue 'q') was already used"
    assert readable("plain text", "plain") == "plain text"


def test_a_key_with_a_control_character_is_refused_before_any_lookup(log: Log) -> None:
    with pytest.raises(Exception, match="idempotency_key contains U\\+001F \\(US\\) at position 1"):
        service(log).create_job(spec("team-a"), f"a{SEPARATOR}b")
    assert log.proposed == []
