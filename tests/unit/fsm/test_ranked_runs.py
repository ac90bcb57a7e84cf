"""Runs of jobs with a priority are kept in grant order (command format 6), every new run from format 7, and
what a job's priority or concurrency key does to the runs it already has is what a restarted replica rebuilds.

* From format 6 a new run of a job with a priority keeps its record in ``RANKED`` (by priority, then when it
  becomes leasable), and its row in ``RUNS`` points there, until the run is dropped. Every read of it (the
  machine's, a reader's, a listing, a restart, a retry after it ended) finds it, and the twin without a cache
  stores the same bytes.
* From format 7 so does every new run, of priority 0 too. Where a run is kept changes nothing else: the same
  commands grant, complete, retry and drop the same runs on formats 5, 6 and 7, and a cluster that switches
  from 6 to 7 with runs kept both ways grants as one that never switched.
* An update that changes a job's priority, concurrency key or limit, or pending TTL moves its active runs to
  the indexes of the new values, as a replica that restarts builds them: every replica grants the same runs.
"""

from __future__ import annotations

from typing import Any

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import MAX_PRIORITY, At, Every, JobSpec, RetryPolicy, RunStatus
from raftsched.cluster.domain.results import Ok
from raftsched.cluster.fsm import keys
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.reader import run_bytes
from raftsched.cluster.fsm.store import Table, iter_table, state_hash
from tests.unit.fsm.harness import SEC, T0, Harness, dump, lease, on_format, store_kind  # noqa: F401 - store_kind: on both stores

pytestmark = pytest.mark.unit


def _h(fmt: int = 6) -> Harness:
    return on_format(fmt)


def _ranked(m: JobStateMachine) -> dict[str, bytes]:
    """run_id -> RANKED key of every record kept there."""
    return {key[9:].decode(): key for key, _ in iter_table(m.store, Table.RANKED)}


def _granted(h: Harness, n: int, now: int | None = None) -> list[str]:
    return [g.run.run_id for g in h.ok(c.AcquireLeases(now or h.m.now_ms, "ex-1", ("default",), n))]


def test_a_run_of_a_job_with_a_priority_is_kept_in_grant_order_while_active() -> None:
    h = _h()
    h.create("hi", Every(SEC), priority=9)
    h.create("mid", Every(SEC), priority=4)
    h.create("plain", Every(SEC))
    h.fire(T0 + 2 * SEC)
    h.m.commit()
    live = _ranked(h.m)
    assert sorted(live) == sorted(f"{j}@{T0 + k * SEC}" for j in ("hi", "mid") for k in (1, 2))
    # by priority (highest first), then by when each becomes leasable: the order a grant takes them
    assert [key[0] for key in sorted(live.values())] == [MAX_PRIORITY - 9] * 2 + [MAX_PRIORITY - 4] * 2
    assert list(sorted(live, key=live.__getitem__)) == [
        f"hi@{T0 + SEC}", f"hi@{T0 + 2 * SEC}", f"mid@{T0 + SEC}", f"mid@{T0 + 2 * SEC}",
    ]  # fmt: skip
    for run_id, key in live.items():
        assert h.m.store.get(Table.RUNS, run_id.encode()) == keys.ranked_ref(key)  # its row points there
    assert h.m.store.get(Table.RUNS, f"plain@{T0 + SEC}".encode())[:1] != keys.RANKED_REF  # priority 0: as before
    # every way of reading a run finds the record
    run_id = f"hi@{T0 + SEC}"
    assert h.m.runs[run_id].status is RunStatus.PENDING and run_id in h.m.runs
    assert h.m.view.run(run_id).run_id == run_id
    assert sorted(r.run_id for r in h.m.iter_runs()) == sorted(h.m.runs)
    assert len(h.m.runs) == 6
    assert _granted(h, 3) == [f"hi@{T0 + SEC}", f"hi@{T0 + 2 * SEC}", f"mid@{T0 + SEC}"]
    h.m.commit()
    assert h.m.view.run(run_id).status is RunStatus.LEASED
    assert h.m.store.get(Table.RUNS, run_id.encode())[:1] == keys.RANKED_REF  # leased: still kept in LIVE


def test_an_ended_run_stays_where_it_is_kept_and_a_dropped_one_leaves_nothing() -> None:
    h = _h()
    h.create("hi", Every(SEC), priority=9, retry=RetryPolicy(max_attempts=1))
    h.fire(T0 + 3 * SEC)
    first, second, third = (f"hi@{T0 + k * SEC}" for k in (1, 2, 3))
    run = lease(h, first)
    h.ok(c.CompleteRun(h.m.now_ms, run.lease_id, run.fencing_token, True, b"ok", "", ""))
    h.ok(c.CancelRun(h.m.now_ms, second))
    run = lease(h, third)
    h.ok(c.CompleteRun(h.m.now_ms, run.lease_id, run.fencing_token, False, b"", "boom", ""))
    h.m.commit()
    assert sorted(_ranked(h.m)) == [first, second, third] and h.m.tx.mem.placed == {}  # none active: none known
    for run_id, status in ((first, RunStatus.SUCCEEDED), (second, RunStatus.CANCELLED), (third, RunStatus.DEAD_LETTER)):
        assert h.m.store.get(Table.RUNS, run_id.encode())[:1] == keys.RANKED_REF
        assert h.m.runs[run_id].status is status and h.m.view.run(run_id).status is status
    assert h.m.runs[first].result == b"ok"
    retried = h.ok(c.RetryRun(h.m.now_ms, third))  # an ended run read through its row, active again
    h.m.commit()
    assert retried.status is RunStatus.PENDING and h.m.tx.mem.placed == {third: _ranked(h.m)[third]}
    run = lease(h, third)
    h.ok(c.CompleteRun(h.m.now_ms, run.lease_id, run.fencing_token, True, b"again", "", ""))
    assert h.m.runs[third].result == b"again" and h.m.tx.mem.placed == {}
    h.ok(c.DeleteJob(h.m.now_ms, "hi"))
    h.ok(c.PruneHistory(h.m.now_ms + 400 * 24 * 3600 * SEC))
    h.m.commit()
    assert _ranked(h.m) == {} and h.m.tx.mem.placed == {}
    assert [key for key, raw in iter_table(h.m.store, Table.RUNS)] == []


def test_a_restart_finds_every_kept_record_and_grants_as_before() -> None:
    h = _h()
    h.create("hi", Every(SEC), priority=8)
    h.create("lo", Every(SEC), priority=2)
    h.fire(T0 + 3 * SEC)
    assert _granted(h, 2) == [f"hi@{T0 + SEC}", f"hi@{T0 + 2 * SEC}"]
    h.m.commit()
    before = dump(h.m)
    again = JobStateMachine(h.m.store)  # a restart reads what was stored
    assert dump(again) == before and again.tx.mem.placed == h.m.tx.mem.placed
    h.m = again
    assert _granted(h, 2) == [f"hi@{T0 + 3 * SEC}", f"lo@{T0 + SEC}"]
    run = h.m.runs[f"hi@{T0 + SEC}"]
    h.ok(c.CompleteRun(h.m.now_ms, run.lease_id, run.fencing_token, True, b"", "", ""))
    h.m.commit()
    assert f"hi@{T0 + SEC}" in _ranked(h.m) and h.m.runs[f"hi@{T0 + SEC}"].status is RunStatus.SUCCEEDED
    assert f"hi@{T0 + SEC}" not in h.m.tx.mem.placed


def test_before_format_6_every_run_stays_under_its_id() -> None:
    h = _h(5)
    h.create("hi", Every(SEC), priority=9)
    h.fire(T0 + 2 * SEC)
    h.m.commit()
    assert _ranked(h.m) == {} and h.m.tx.mem.placed == {}
    h.ok(c.SetClusterFormat(h.m.now_ms, 6))
    h.fire(T0 + 3 * SEC)
    h.m.commit()
    assert sorted(_ranked(h.m)) == [f"hi@{T0 + 3 * SEC}"]  # only what is made from then on
    assert _granted(h, 3) == [f"hi@{T0 + k * SEC}" for k in (1, 2, 3)]


@pytest.mark.parametrize(
    "change",
    [
        {"priority": 9},
        {"priority": 0},
        {"concurrency_key": "k2", "concurrency_limit": 1},
        {"concurrency_limit": 5},
        {"pending_ttl_ms": 60 * SEC},
    ],
)
def test_an_update_of_how_runs_are_granted_moves_the_runs_a_job_has(change: dict[str, Any]) -> None:
    """What a replica that restarts after the update rebuilds, one that did not holds too: both grant the same."""
    h = _h()
    base = JobSpec("a", Every(SEC), priority=3, concurrency_key="k", concurrency_limit=2)
    h.ok(c.CreateJob(T0, "a", base))
    h.ok(c.CreateJob(T0, "b", JobSpec("b", Every(SEC), priority=5)))
    h.fire(T0 + 3 * SEC)
    assert _granted(h, 1) == [f"b@{T0 + SEC}"]
    assert _granted(h, 2) == [f"b@{T0 + 2 * SEC}", f"b@{T0 + 3 * SEC}"]
    assert _granted(h, 1) == [f"a@{T0 + SEC}"]  # one of the key's two leased
    h.ok(c.UpdateJob(h.m.now_ms, "a", base._replace(**change)))
    h.m.commit()
    restarted = JobStateMachine(h.m.store)
    mem, again = h.m.tx.mem, restarted.tx.mem
    for index in ("pending", "prio_pending", "run_prio", "keyed_pending", "conc_leased", "lease_conc", "pending_ttl"):
        got, want = getattr(mem, index), getattr(again, index)
        assert {k: list(v) if hasattr(v, "irange") else v for k, v in got.items()} == {
            k: list(v) if hasattr(v, "irange") else v for k, v in want.items()
        }, index
    other = Harness()
    other.m, other.index = restarted, h.index
    assert _granted(h, 5) == _granted(other, 5)
    h.m.commit()
    other.m.commit()
    assert state_hash(h.m.store) == state_hash(other.m.store)


def test_the_twin_without_a_cache_stores_the_same() -> None:
    h, twin = _h(), Harness()
    twin.m = JobStateMachine(cache_bytes=0)
    twin.ok(c.SetClusterFormat(T0, 6))
    for one in (h, twin):
        one.ok(c.CreateJob(T0, "once", JobSpec("once", At(T0 + SEC), priority=6)))
        one.ok(c.CreateJob(T0, "every", JobSpec("every", Every(SEC), priority=1)))
        one.fire(T0 + 2 * SEC)
        run = lease(one, f"once@{T0 + SEC}")
        one.ok(c.CompleteRun(one.m.now_ms, run.lease_id, run.fencing_token, False, b"", "boom", ""))  # retried
        lease(one, f"every@{T0 + SEC}")
        one.m.commit()
    assert state_hash(twin.m.store) == state_hash(h.m.store)
    assert _ranked(twin.m) == _ranked(h.m) and len(_ranked(h.m)) == 3


def test_a_reader_outside_one_transaction_finds_no_run_dropped_between_its_reads() -> None:
    """The pointer read, then the run is dropped (retention) before the second read: the reader reads its row
    again and finds nothing, rather than a record that is no longer there."""
    h = _h()
    h.create("hi", Every(SEC), priority=9)
    h.fire(T0 + SEC)
    h.m.commit()
    run_id = f"hi@{T0 + SEC}"
    store = h.m.store
    pointer = store.get(Table.RUNS, run_id.encode())
    assert pointer is not None and pointer[:1] == keys.RANKED_REF
    h.ok(c.CancelRun(h.m.now_ms, run_id))
    h.m.commit()
    h.ok(c.DeleteJob(h.m.now_ms, "hi"))
    h.ok(c.PruneHistory(h.m.now_ms + 400 * 24 * 3600 * SEC))
    h.m.commit()
    assert run_bytes(store, run_id, pointer) is None  # as if the pointer had been read before the run was dropped
    assert h.m.view.run(run_id) is None and run_bytes(store, "hi@1") is None


def _story(h: Harness, switch_to: int = 0) -> list[list[str]]:
    """One story on any format: jobs of priority 0 and above, one-off and every second, some with a short history,
    fired, granted, completed, failed and retried, cancelled, dropped by their history limits (after
    ``SetClusterFormat(switch_to)`` half-way, if given). What each grant took, in order."""
    h.create("plain", Every(SEC), history_limit=2)
    h.create("other", Every(2 * SEC), history_limit=1, retry=RetryPolicy(max_attempts=2, initial_backoff_ms=SEC))
    h.create("hi", Every(SEC), priority=5, history_limit=3)
    h.create("once", At(T0 + 2 * SEC))
    grants: list[list[str]] = []
    for second in range(1, 9):
        now = T0 + second * SEC
        if second == 5 and switch_to:
            h.ok(c.SetClusterFormat(now, switch_to))
        h.fire(now)
        got = h.ok(c.AcquireLeases(now, "ex-1", ("default",), 3))
        grants.append([g.run.run_id for g in got])
        for k, g in enumerate(got):
            failed = g.run.job_id == "other" and g.run.attempt == 1
            done = c.CompleteRun(now, g.run.lease_id, g.run.fencing_token, not failed, b"r%d" % k, "boom" * failed, "")
            assert isinstance(h.apply(done), Ok)
        if second == 6:
            h.ok(c.CancelRun(now, f"plain@{now}"))
        h.m.commit()
    return grants


def test_from_format_7_every_new_run_is_kept_in_grant_order() -> None:
    h = _h(7)
    h.create("plain", Every(SEC))
    h.create("hi", Every(SEC), priority=9)
    h.fire(T0 + 2 * SEC)
    h.m.commit()
    kept = _ranked(h.m)
    made = [f"{j}@{T0 + k * SEC}" for j in ("hi", "plain") for k in (1, 2)]
    assert sorted(kept, key=kept.__getitem__) == made  # by priority (9, then 0), then by when each became leasable
    assert [kept[r][0] for r in made] == [MAX_PRIORITY - 9] * 2 + [MAX_PRIORITY] * 2
    assert h.m.tx.mem.placed == kept  # every one active: every place known
    for run_id, key in kept.items():
        assert h.m.store.get(Table.RUNS, run_id.encode()) == keys.ranked_ref(key)
        assert h.m.runs[run_id].status is RunStatus.PENDING and h.m.view.run(run_id).run_id == run_id
    assert sorted(r.run_id for r in h.m.iter_runs()) == sorted(made)
    assert _granted(h, 3) == [f"hi@{T0 + SEC}", f"hi@{T0 + 2 * SEC}", f"plain@{T0 + SEC}"]
    run = h.m.runs[f"plain@{T0 + SEC}"]
    h.ok(c.CompleteRun(h.m.now_ms, run.lease_id, run.fencing_token, True, b"done", "", ""))
    h.m.commit()
    assert h.m.view.run(run.run_id).result == b"done" and run.run_id not in h.m.tx.mem.placed
    assert h.m.store.get(Table.RUNS, run.run_id.encode()) == keys.ranked_ref(kept[run.run_id])  # still kept there


@pytest.mark.parametrize("fmt", [5, 6, 7])
def test_where_a_run_is_kept_changes_nothing_a_user_sees(fmt: int) -> None:
    """The story on format ``fmt`` grants, keeps and drops what it does on format 5 (every run under its id); a
    restart and a restore from a snapshot find the same."""
    base, h = _h(5), _h(fmt)
    want = _story(base)
    assert _story(h) == want and sum(map(len, want)) > 12
    seen = dump(h.m)
    assert seen["runs"] == dump(base.m)["runs"] and seen["jobs"] == dump(base.m)["jobs"]
    ended = [r.split("@")[0] for r, run in seen["runs"].items() if run["status"] not in ("PENDING", "LEASED")]
    assert sorted(ended) == ["hi"] * 3 + ["once"] + ["other"] + ["plain"] * 2  # what the history limits keep
    kept = _ranked(h.m)
    if fmt == 7:
        assert sorted(kept) == sorted(seen["runs"])  # every run made on format 7
    elif fmt == 6:
        assert sorted(kept) == sorted(r for r in seen["runs"] if r.startswith("hi@"))
    else:
        assert kept == {}
    pointers = {k.decode() for k, raw in iter_table(h.m.store, Table.RUNS) if raw[:1] == keys.RANKED_REF}
    assert pointers == set(kept)  # a dropped run left neither its record nor its pointer
    assert dump(JobStateMachine(h.m.store)) == seen  # a restart
    restored = JobStateMachine()
    restored.restore(h.m.snapshot())
    assert state_hash(restored.store) == state_hash(h.m.store) and restored.tx.mem.placed == h.m.tx.mem.placed


def test_a_switch_from_format_6_to_7_keeps_runs_both_ways_and_grants_as_before() -> None:
    six, switched = _h(6), _h(6)
    assert _story(switched, switch_to=7) == _story(six, switch_to=6)  # (an entry at the same place in both)
    assert dump(switched.m)["runs"] == dump(six.m)["runs"]
    kept = _ranked(switched.m)
    made_after = {r for r in dump(switched.m)["runs"] if int(r.split("@")[1]) >= T0 + 5 * SEC}
    assert made_after and made_after <= set(kept)  # made on format 7: kept in grant order, of priority 0 too
    assert any(r.startswith("plain@") for r in made_after)
    before = {r for r in dump(switched.m)["runs"] if r not in made_after and not r.startswith("hi@")}
    for run_id in before:  # made on format 6 with priority 0: under its id, where it stays
        assert switched.m.store.get(Table.RUNS, run_id.encode())[:1] != keys.RANKED_REF
