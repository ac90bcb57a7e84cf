"""The event hub's positions, bounded history and resume points (what lets WatchRuns resume on any node)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftsched.cluster.domain.errors import OutOfRange, Unavailable
from raftsched.cluster.domain.model import Run, RunStatus
from raftsched.cluster.node.event_hub import EventHub

pytestmark = pytest.mark.unit


def run(n: int, job: str = "j1", queue: str = "q") -> Run:
    return Run(f"{job}@{n}", job, queue, n, n)


def everything(_run: Run) -> bool:
    return True


def test_changes_are_numbered_by_entry_and_position() -> None:
    hub = EventHub(lambda: 7, history=100)
    sub, replay = hub.subscribe(everything)
    assert replay == []
    r = run(1)
    hub.publish([("fired", r), ("leased", r)], index=5)
    got = [sub.get(0.1), sub.get(0.1)]
    assert [(c.kind, c.point, c.observed_ms) for c in got if c] == [("fired", (5, 0), 7), ("leased", (5, 1), 7)]
    assert got[0] is not None and got[0].run.status is RunStatus.PENDING and got[0].run.run_id == "j1@1"
    assert got[0].run is not r and got[0].run is not got[1].run  # each reader gets its own copy


@pytest.mark.parametrize("store", ["memory", "lmdb"])
def test_each_change_shows_the_run_as_its_entry_left_it_while_later_entries_change_it(store: str, tmp_path: Path) -> None:
    """The hub keeps the records the state machine handed over, which it never changes once their command ended:
    a run fired, leased and completed by three entries shows three states, on either store."""
    from raftsched.cluster.domain import commands as c
    from raftsched.cluster.domain.model import At, JobSpec
    from raftsched.cluster.fsm.machine import JobStateMachine

    close = lambda: None  # noqa: E731
    if store == "lmdb":
        from raftsched.storage.lmdb_state import LmdbTableStore

        lmdb_store = LmdbTableStore(str(tmp_path / "state.mdb"), 1 << 30)
        m, close = JobStateMachine(lmdb_store), lmdb_store.close
    else:
        m = JobStateMachine()
    hub = EventHub(lambda: 0, history=100)
    t0 = 1_800_000_000_000
    entries = [
        c.CreateJob(t0 - 1000, "j1", JobSpec(name="j1", schedule=At(t0), type="noop")),
        c.Fire(t0, (("j1", t0),), lookahead_ms=0),
        c.AcquireLeases(t0, "e1", ("default",), 1),
    ]
    for index, cmd in enumerate(entries, start=1):
        answer = m.apply(c.encode(cmd), index)
        m.commit()
        hub.publish(m.drain_events(), index)
    grant = answer.value[0]  # type: ignore[union-attr]
    m.apply(c.encode(c.CompleteRun(t0 + 5, grant.run.lease_id, grant.run.fencing_token, True, executor_id="e1")), 4)
    m.commit()
    hub.publish(m.drain_events(), 4)
    close()
    _, replay = hub.subscribe(everything, resume_after=(1, 0))  # entry 1 made the job: no run changed
    seen = [(ch.kind, ch.run.status, ch.run.attempt) for ch in replay]
    assert seen == [
        ("fired", RunStatus.PENDING, 0),
        ("leased", RunStatus.LEASED, 1),
        ("finished", RunStatus.SUCCEEDED, 1),
    ]


def test_a_resumed_subscription_gets_the_held_changes_after_its_point_then_live_ones() -> None:
    hub = EventHub(lambda: 0, history=100)
    for i in range(1, 6):
        hub.publish([("fired", run(i)), ("finished", run(i))], index=10 + i)
    sub, replay = hub.subscribe(everything, resume_after=(12, 0))
    assert [c.point for c in replay] == [(12, 1), (13, 0), (13, 1), (14, 0), (14, 1), (15, 0), (15, 1)]
    hub.publish([("fired", run(6))], index=16)
    live = sub.get(0.1)
    assert live is not None and live.point == (16, 0)
    assert sub.get(0.01) is None  # nothing twice: the replay and the queue do not overlap


def test_the_replay_keeps_to_the_filters() -> None:
    hub = EventHub(lambda: 0, history=100)
    hub.publish([("fired", run(1, "a")), ("fired", run(2, "b")), ("finished", run(1, "a"))], index=3)
    _, replay = hub.subscribe(lambda r: r.job_id == "a", frozenset({"finished"}), resume_after=(2, 0))
    assert [(c.kind, c.run.job_id) for c in replay] == [("finished", "a")]


def test_a_point_older_than_the_history_is_out_of_range() -> None:
    hub = EventHub(lambda: 0, history=4)
    for i in range(1, 6):
        hub.publish([("fired", run(i)), ("finished", run(i))], index=i)  # 10 changes, 4 kept: entries 4 and 5
    assert hub.covered_from == 4
    with pytest.raises(OutOfRange) as err:
        hub.subscribe(everything, resume_after=(3, 1))
    assert "3.1" in str(err.value) and "index 4" in str(err.value)
    _, replay = hub.subscribe(everything, resume_after=(4, 0))
    assert [c.point for c in replay] == [(4, 1), (5, 0), (5, 1)]


def test_entries_without_changes_count_and_a_bookmark_is_past_the_last_entry() -> None:
    hub = EventHub(lambda: 0, history=10)
    sub, _ = hub.subscribe(everything)
    hub.publish([("fired", run(1)), ("leased", run(1))], index=8)
    assert hub.bookmark(sub) is None  # changes still wait in the queue
    sub.get(0.1), sub.get(0.1)
    assert hub.bookmark(sub) == (8, 2)  # after both changes of entry 8
    hub.publish([], index=9)
    assert hub.bookmark(sub) == (9, 0)
    _, replay = hub.subscribe(everything, resume_after=(8, 2))
    assert replay == []


def test_a_restore_from_a_snapshot_ends_open_streams_and_moves_the_history_on() -> None:
    hub = EventHub(lambda: 0, history=10)
    sub, _ = hub.subscribe(everything)
    hub.publish([("fired", run(1))], index=3)
    hub.reset(applied_index=50)
    with pytest.raises(Unavailable):
        sub.check()
    with pytest.raises(OutOfRange):
        hub.subscribe(everything, resume_after=(3, 0))
    _, replay = hub.subscribe(everything, resume_after=(51, 0))
    assert replay == []


def test_a_subscriber_that_falls_behind_is_dropped_not_waited_for() -> None:
    hub = EventHub(lambda: 0, max_backlog=2, history=10)
    sub, _ = hub.subscribe(everything)
    hub.publish([("fired", run(i)) for i in range(3)], index=1)
    assert sub.overflowed and not hub.has_subscribers


def test_large_results_bound_the_history_by_bytes_too() -> None:
    hub = EventHub(lambda: 0, history=1000, history_bytes=3 * (1 << 20))
    for i in range(1, 6):
        r = run(i)
        r.result = b"x" * (1 << 20)  # 1 MiB each: only about two fit
        hub.publish([("finished", r)], index=i)
    assert hub.covered_from == 4
    _, replay = hub.subscribe(everything, resume_after=(4, 0))
    assert [c.point for c in replay] == [(5, 0)] and len(replay[0].run.result) == 1 << 20


def test_the_history_gives_the_collector_nothing_to_walk() -> None:
    """The history of 20,000 changes lives for seconds under load: kept as run objects (each with its steps and
    attempts) it filled the collector's youngest generation, and every young collection walked all of it. Kept
    encoded, it adds no tracked object per change; a resumed watch still gets every run whole."""
    import gc

    from raftsched.cluster.domain.run_history import add_step

    hub = EventHub(lambda: 0, history=20_000)
    hub.publish([("fired", run(0))], index=1)
    gc.collect()
    before = len(gc.get_objects())
    for i in range(1, 2_001):
        changed = [run(i * 10 + k) for k in range(10)]
        for r in changed:
            add_step(r, i, "fired", f"fired at {i}", "n1")
        hub.publish([("fired", r) for r in changed], index=1 + i)
        del changed, r
    gc.collect()
    assert len(gc.get_objects()) - before < 500  # 20,000 changes held (as run objects: over 40,000)
    _, replay = hub.subscribe(everything, resume_after=(2_000, 0))
    last = [(c.point, c.run.run_id, len(c.run.steps_raw)) for c in replay]
    assert len(last) == 9 + 10 and last[0] == ((2_000, 1), "j1@19991", 1) and last[-1] == ((2_001, 9), "j1@20009", 1)
