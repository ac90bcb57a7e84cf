"""The job state machine under group commit: several commands in one Raft entry.

A batched entry is applied command by command with the entry's index and the
command's position ``pos`` in it (as ``RaftNode._apply`` does after
``batching.unpack``). Manual run ids and fencing tokens must stay distinct
and deterministic although the commands share one index.
"""

from __future__ import annotations

from typing import Any

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.leases import MAX_RUNS_PER_GRANT, TOKENS_PER_ENTRY
from raftsched.cluster.domain.model import Every, JobSpec, RunStatus
from raftsched.cluster.domain.results import Ok, Result
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.raft.batching import pack, unpack

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000
QUEUES = ("default",)

Entry = list[c.Command]


def spec(name: str = "j") -> JobSpec:
    return JobSpec(name=name, schedule=Every(3_600_000), type="noop", lease_ttl_ms=30_000)


def apply_entry(m: JobStateMachine, index: int, cmds: Entry) -> list[Result]:
    """Apply ``cmds`` as ONE entry at ``index``, through the batch format, as the adapter does."""
    data = [c.encode(cmd) for cmd in cmds]
    if len(data) == 1:
        return [m.apply(data[0], index)]
    return [m.apply(cmd, index, pos) for pos, cmd in enumerate(unpack(pack(data)))]


def ok(result: Result) -> Any:
    assert isinstance(result, Ok), result
    return result.value


def tokens(result: Result) -> list[int]:
    return [grant.run.fencing_token for grant in ok(result)]


def machine_with_runs(count: int, index: int = 2) -> JobStateMachine:
    """Job ``job`` created at entry 1 and ``count`` manual runs triggered in ONE entry at ``index``."""
    m = JobStateMachine()
    ok(apply_entry(m, 1, [c.CreateJob(T0, "job", spec())])[0])
    results = apply_entry(m, index, [c.TriggerJob(T0, "job")] * count)
    assert len({ok(r).run_id for r in results}) == count
    return m


# ------------------------------------------------------------------ manual run ids


def test_two_triggers_in_one_entry_make_two_runs() -> None:
    m = JobStateMachine()
    ok(m.apply(c.encode(c.CreateJob(T0, "job", spec())), 1))
    trigger = c.encode(c.TriggerJob(T0, "job"))
    first = ok(m.apply(trigger, 7, 0))
    second = ok(m.apply(trigger, 7, 1))
    assert first.run_id == "job@manual-7"
    assert second.run_id == "job@manual-7.1"
    assert set(m.runs) == {"job@manual-7", "job@manual-7.1"}
    for run_id in ("job@manual-7", "job@manual-7.1"):
        run = m.runs[run_id]
        assert run.manual and run.job_id == "job" and run.status is RunStatus.PENDING
    assert {r.run_id for r in m.active_runs("job")} == {"job@manual-7", "job@manual-7.1"}
    assert len(m.pending["default"]) == 2
    assert m.applied_index == 7


def test_triggers_at_every_position_of_a_batched_entry() -> None:
    m = machine_with_runs(4, index=12)
    assert set(m.runs) == {"job@manual-12", "job@manual-12.1", "job@manual-12.2", "job@manual-12.3"}


def test_a_trigger_after_other_commands_in_the_entry_is_named_by_its_own_position() -> None:
    m = JobStateMachine()
    ok(m.apply(c.encode(c.CreateJob(T0, "job", spec())), 1))
    ok(m.apply(c.encode(c.CreateJob(T0, "other", spec("o"))), 1))
    results = apply_entry(m, 5, [c.Barrier(T0), c.TriggerJob(T0, "other"), c.PauseJob(T0, "job"), c.TriggerJob(T0, "job")])
    assert ok(results[1]).run_id == "other@manual-5.1"
    assert ok(results[3]).run_id == "job@manual-5.3"
    ok(m.apply(c.encode(c.TriggerJob(T0, "job")), 6))  # the next unbatched entry: position 0, no suffix
    assert "job@manual-6" in m.runs


# ------------------------------------------------------------------ fencing tokens


def test_two_grants_in_one_entry_count_tokens_on() -> None:
    m = machine_with_runs(5)
    i = 3
    first, second = apply_entry(m, i, [c.AcquireLeases(T0, "e1", QUEUES, 3), c.AcquireLeases(T0, "e2", QUEUES, 10)])
    assert tokens(first) == [i * TOKENS_PER_ENTRY + k for k in (1, 2, 3)]
    assert tokens(second) == [i * TOKENS_PER_ENTRY + k for k in (4, 5)]
    granted = [g.run for g in ok(first) + ok(second)]
    assert len({run.run_id for run in granted}) == 5  # no run leased twice
    assert [run.lease_id for run in granted] == [f"L{i * TOKENS_PER_ENTRY + k}" for k in range(1, 6)]
    assert [run.executor_id for run in granted] == ["e1"] * 3 + ["e2"] * 2
    assert set(m.leases) == {f"L{i * TOKENS_PER_ENTRY + k}" for k in range(1, 6)}
    assert all(run.status is RunStatus.LEASED and run.attempt == 1 for run in granted)


def test_an_empty_grant_does_not_use_tokens_and_other_commands_do_not_reset_the_count() -> None:
    m = machine_with_runs(4)
    i = 9
    results = apply_entry(
        m,
        i,
        [
            c.AcquireLeases(T0, "e1", ("nowhere",), 5),  # nothing to grant
            c.AcquireLeases(T0, "e1", QUEUES, 2),
            c.TriggerJob(T0, "job"),  # a new run between two grants of the entry
            c.AcquireLeases(T0, "e2", QUEUES, 10),
        ],
    )
    assert tokens(results[0]) == []
    assert tokens(results[1]) == [i * TOKENS_PER_ENTRY + 1, i * TOKENS_PER_ENTRY + 2]
    assert ok(results[2]).run_id == f"job@manual-{i}.2"
    assert tokens(results[3]) == [i * TOKENS_PER_ENTRY + k for k in (3, 4, 5)]  # the two left and the new one


def test_the_next_entry_starts_its_own_range() -> None:
    m = machine_with_runs(4)
    (a,) = apply_entry(m, 3, [c.AcquireLeases(T0, "e1", QUEUES, 2)])
    (b,) = apply_entry(m, 4, [c.AcquireLeases(T0, "e1", QUEUES, 2)])
    assert tokens(a) == [3001, 3002]
    assert tokens(b) == [4001, 4002]


def test_a_full_entry_grants_nothing_more_and_the_next_entry_grants_again() -> None:
    m = machine_with_runs(MAX_RUNS_PER_GRANT + 3)
    i = 3
    first, second = apply_entry(
        m, i, [c.AcquireLeases(T0, "e1", QUEUES, MAX_RUNS_PER_GRANT), c.AcquireLeases(T0, "e2", QUEUES, 10)]
    )
    assert tokens(first) == [i * TOKENS_PER_ENTRY + k for k in range(1, MAX_RUNS_PER_GRANT + 1)]
    assert max(tokens(first)) < (i + 1) * TOKENS_PER_ENTRY  # never into the next entry's range
    assert tokens(second) == []
    assert len(m.pending["default"]) == 3  # the runs it could not grant stay PENDING
    (third,) = apply_entry(m, i + 1, [c.AcquireLeases(T0, "e2", QUEUES, 10)])
    assert tokens(third) == [(i + 1) * TOKENS_PER_ENTRY + k for k in (1, 2, 3)]
    assert min(tokens(third)) > max(tokens(first))
    assert not m.pending.get("default")
    assert len(m.leases) == MAX_RUNS_PER_GRANT + 3


def test_a_later_grant_in_a_nearly_full_entry_gets_only_what_is_left() -> None:
    m = machine_with_runs(MAX_RUNS_PER_GRANT + 5)
    i = 3
    a, b, d = apply_entry(
        m,
        i,
        [c.AcquireLeases(T0, "e1", QUEUES, 600), c.AcquireLeases(T0, "e2", QUEUES, 600), c.AcquireLeases(T0, "e3", QUEUES, 1)],
    )
    assert tokens(a) == [i * TOKENS_PER_ENTRY + k for k in range(1, 601)]
    assert tokens(b) == [i * TOKENS_PER_ENTRY + k for k in range(601, MAX_RUNS_PER_GRANT + 1)]
    assert len(tokens(b)) == MAX_RUNS_PER_GRANT - 600
    assert tokens(d) == []
    assert len(m.pending["default"]) == 5


def test_a_single_grant_asking_for_more_than_an_entry_holds_is_capped() -> None:
    m = machine_with_runs(MAX_RUNS_PER_GRANT + 5)
    (a,) = apply_entry(m, 3, [c.AcquireLeases(T0, "e1", QUEUES, 5_000)])
    assert tokens(a) == [3 * TOKENS_PER_ENTRY + k for k in range(1, MAX_RUNS_PER_GRANT + 1)]


def test_tokens_stay_unique_and_growing_across_many_batched_entries() -> None:
    m = machine_with_runs(60)
    seen: list[int] = []
    for index in range(3, 13):
        for result in apply_entry(m, index, [c.AcquireLeases(T0, f"e{k}", QUEUES, 2) for k in range(3)]):
            seen += tokens(result)
    assert len(seen) == 60
    assert seen == sorted(seen) and len(set(seen)) == 60


# ------------------------------------------------------------------ determinism


def history() -> list[tuple[int, Entry]]:
    """A mixed history with batched entries: creates, triggers, grants, completions, expiry, renewals."""
    return [
        (1, [c.CreateJob(T0, "a", spec("a")), c.CreateJob(T0, "b", spec("b"))]),
        (2, [c.TriggerJob(T0 + 1, "a"), c.TriggerJob(T0 + 1, "a"), c.TriggerJob(T0 + 1, "b")]),
        (3, [c.AcquireLeases(T0 + 2, "e1", QUEUES, 2), c.AcquireLeases(T0 + 2, "e2", QUEUES, 2)]),
        (4, [c.TriggerJob(T0 + 3, "b")]),
        (
            5,
            [
                c.CompleteRun(T0 + 4, "L3001", 3001, True, b"out"),
                c.CompleteRun(T0 + 4, "L3003", 3003, False, error="x", draw=0.5),
            ],
        ),
        (
            6,
            [
                c.RenewLeases(T0 + 5, "e1", (("L3002", 3002),)),
                c.TriggerJob(T0 + 5, "a"),
                c.AcquireLeases(T0 + 5, "e3", QUEUES, 5),
            ],
        ),
        (7, [c.ExpireLeases(T0 + 60_000, (("L3002", 3002, 0.25),)), c.AcquireLeases(T0 + 120_000, "e4", QUEUES, 10)]),
        (8, [c.PauseJob(T0 + 120_001, "b"), c.TriggerJob(T0 + 120_001, "b"), c.DeleteJob(T0 + 120_001, "a")]),
    ]


def replay(entries: list[tuple[int, Entry]]) -> tuple[JobStateMachine, list[list[str]]]:
    m = JobStateMachine()
    outcomes = [[repr(r) for r in apply_entry(m, index, cmds)] for index, cmds in entries]
    return m, outcomes


def test_replaying_the_same_batched_entries_gives_identical_state() -> None:
    m1, out1 = replay(history())
    m2, out2 = replay(history())
    assert m1.snapshot() == m2.snapshot()
    assert out1 == out2
    # the history did what it says (so the comparison is not between two empty machines)
    assert {"a@manual-2", "a@manual-2.1", "b@manual-2.2", "b@manual-4", "a@manual-6.1", "b@manual-8.1"} <= set(m1.runs)
    assert m1.runs["a@manual-2"].status is RunStatus.SUCCEEDED
    assert any(run.fencing_token > 7 * TOKENS_PER_ENTRY for run in m1.runs.values())
    assert m1.applied_index == 8
    restored = JobStateMachine()
    restored.restore(m1.snapshot())
    assert restored.snapshot() == m1.snapshot()


def test_replay_after_a_restore_continues_identically() -> None:
    entries = history()
    whole, _ = replay(entries)
    first, _ = replay(entries[:4])
    resumed = JobStateMachine()
    resumed.restore(first.snapshot())
    for index, cmds in entries[4:]:
        apply_entry(resumed, index, cmds)
    assert resumed.snapshot() == whole.snapshot()
