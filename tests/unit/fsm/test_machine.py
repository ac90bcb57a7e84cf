"""The machine (``raftsched.cluster.fsm.machine``): time, the applied index, malformed entries, events, the blob."""

from __future__ import annotations

import json
import marshal
from typing import Any

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import (
    After,
    At,
    ConcurrencyPolicy,
    Cron,
    Every,
    JobStatus,
    MisfirePolicy,
    RunStatus,
)
from raftsched.cluster.domain.results import (
    Internal,
    InvalidArgument,
    Result,
)
from raftsched.cluster.fsm.machine import HANDLERS
from raftsched.cluster.fsm.tx import Tx
from tests.unit.fsm.harness import (
    SEC,
    T0,
    Harness,
    complete,
    dump,
    lease,
    new_machine,
    spec,
    store_kind,  # noqa: F401 - every test here runs on both stores: in memory and on LMDB
)

pytestmark = pytest.mark.unit


# ------------------------------------------------------------------ time


def test_a_lagging_command_clock_never_moves_time_backwards() -> None:
    h = Harness()
    h.create("j1", Every(SEC), now=T0 + 10 * SEC)
    assert h.m.now_ms == T0 + 10 * SEC
    h.ok(c.Barrier(T0))
    assert h.m.now_ms == T0 + 10 * SEC
    # a job created by a lagging proposer is anchored at the machine's time
    job = h.create("j2", Every(SEC), now=T0)
    assert job.anchor_ms == job.created_ms == T0 + 10 * SEC
    # a fire from a lagging leader decides with the machine's time
    h.create("j3", Every(SEC), now=T0 + 20 * SEC)
    report = h.fire(T0, [("j2", T0 + 11 * SEC)])
    assert report.created == [f"j2@{T0 + k * SEC}" for k in range(11, 21)]
    assert h.m.runs[f"j2@{T0 + 20 * SEC}"].fired_ms == T0 + 20 * SEC
    # a pause from the past is stamped with the machine's time
    assert h.ok(c.PauseJob(T0, "j3")).updated_ms == T0 + 20 * SEC


def test_applied_index_and_barrier() -> None:
    h = Harness()
    assert h.ok(c.Barrier(T0)) == 1
    assert h.m.applied_index == 1
    h.create("j1", Every(SEC))
    assert h.m.applied_index == 2


# ------------------------------------------------------------------ malformed entries


def _raw(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff\xfe\x00garbage",
        b"not json",
        b"[]",
        b"null",
        b"42",
        b"{}",
        b"[" * 100_000,
        _raw(op="barrier", now=T0),
        _raw(v=0, op="barrier", now=T0),
        _raw(v="1", op="barrier", now=T0),
        _raw(v=True, op="barrier", now=T0),
        _raw(v=1, now=T0),
        _raw(v=1, op="member_remove", now=T0, node="n1"),
        _raw(v=1, op="barrier"),
        _raw(v=1, op="barrier", now="soon"),
        _raw(v=1, op="barrier", now=None),
        b'{"v":1,"op":"barrier","now":1e999}',
        b'{"v":1,"op":"barrier","now":NaN}',
        _raw(v=1, op="pause_job", now=T0),
        _raw(v=1, op="cancel_run", now=T0),
        _raw(v=1, op="create_job", now=T0, job_id="x"),
        _raw(v=1, op="create_job", now=T0, job_id="x", spec="a spec"),
        _raw(v=1, op="create_job", now=T0, job_id="x", spec={"name": "n"}),
        _raw(v=1, op="update_job", now=T0, job_id="x", spec=[1, 2]),
        _raw(v=1, op="fire", now=T0, items=[["j", "soon"]], look=0, mis=0),
        _raw(v=1, op="fire", now=T0, items=[["j"]], look=0, mis=0),
        _raw(v=1, op="fire", now=T0, items=[1], look=0, mis=0),
        _raw(v=1, op="fire", now=T0, items=5, look=0, mis=0),
        _raw(v=1, op="fire", now=T0, items=[], mis=0),
        b'{"v":1,"op":"fire","now":1,"items":[["j",1e999]],"look":0,"mis":0}',
    ],
)
def test_malformed_entries_are_rejected_and_change_nothing(data: bytes) -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    before = dump(h.m)
    result = h.m.apply(data, 2)
    assert isinstance(result, InvalidArgument), result
    assert "entry 2" in result.message
    assert dump(h.m) == before


@pytest.mark.parametrize(
    "data, needle",
    [
        (_raw(v=c.FORMAT_VERSION + 1, op="barrier", now=T0), f"command format version {c.FORMAT_VERSION + 1}"),
        (_raw(v=1, op="explode", now=T0), "unknown command 'explode'"),
        (_raw(v=2, op="cluster_format", now=T0, fmt=c.FORMAT_VERSION + 1), f"command format {c.FORMAT_VERSION + 1}"),
    ],
)
def test_an_entry_this_node_does_not_understand_stops_it_and_changes_nothing(data: bytes, needle: str) -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    before = dump(h.m)
    with pytest.raises(c.UnsupportedCommand) as err:
        h.m.apply(data, 2)
    message = str(err.value)
    assert "entry 2" in message and needle in message and f"up to {c.FORMAT_VERSION}" in message
    assert err.value.stops_replica
    assert dump(h.m) == before


def test_malformed_spec_inside_create_is_rejected() -> None:
    h = Harness()
    good = json.loads(c.encode(c.CreateJob(T0, "x", spec(Every(SEC)))))
    for key, bad in [("conc", "SOMETIMES"), ("misfire", None), ("payload", "***"), ("sched", {"k": "weekly"})]:
        broken = json.loads(json.dumps(good))
        broken["spec"][key] = bad
        result = h.m.apply(json.dumps(broken).encode(), 1)
        assert isinstance(result, InvalidArgument), (key, result)
    assert h.m.jobs == {}


def test_a_handler_bug_is_reported_as_internal_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(tx: Tx, cmd: c.Barrier) -> Result:
        raise RuntimeError("bug")

    monkeypatch.setitem(HANDLERS, c.Barrier, boom)
    result = new_machine().apply(c.encode(c.Barrier(T0)), 7)
    assert isinstance(result, Internal) and "entry 7" in result.message


# ------------------------------------------------------------------ events


def test_events_describe_what_changed() -> None:
    h = Harness()
    h.create("j1", Every(SEC), concurrency=ConcurrencyPolicy.FORBID)
    h.fire(T0 + SEC)
    h.fire(T0 + 2 * SEC)
    h.ok(c.CancelRun(T0 + 2 * SEC, f"j1@{T0 + SEC}"))
    kinds = [(kind, run.run_id) for kind, run in h.m.drain_events()]
    assert kinds == [
        ("fired", f"j1@{T0 + SEC}"),
        ("skipped", f"j1@{T0 + 2 * SEC}"),
        ("finished", f"j1@{T0 + SEC}"),
    ]
    assert h.m.drain_events() == []


# ------------------------------------------------------------------ snapshots


def _rich_history() -> Harness:
    """A machine with every kind of job and run."""
    h = Harness()
    h.create("every", Every(SEC), key="k-every", queue="q1")
    h.create("forbid", Every(SEC), concurrency=ConcurrencyPolicy.FORBID, payload=b"\x00\xffbin")
    h.create("replace", Every(2 * SEC), concurrency=ConcurrencyPolicy.REPLACE)
    h.create("once", Every(SEC), misfire=MisfirePolicy.FIRE_ONCE, catchup_window_ms=4 * SEC)
    h.create("at", At(T0 + 3 * SEC))
    h.create("after", After(60 * SEC))
    h.create("cron", Cron("*/1 * * * *", "Europe/Berlin"), key="k-cron")
    h.create("paused", Every(SEC))
    h.create("deleted", Every(SEC))
    h.ok(c.NodeInfo(T0, "n1", "0.1.0", 1))
    h.ok(c.NodeInfo(T0, "n2", "0.2.0", 2))
    h.fire(T0 + 2 * SEC)
    lease(h, f"every@{T0 + SEC}")
    h.ok(c.PauseJob(T0 + 2 * SEC, "paused"))
    h.fire(T0 + 10 * SEC, threshold=500)
    h.ok(c.TriggerJob(T0 + 10 * SEC, "every"))
    h.ok(c.CancelRun(T0 + 10 * SEC, f"every@{T0 + 2 * SEC}"))
    h.ok(c.CancelRun(T0 + 10 * SEC, f"every@{T0 + SEC}"))  # leased: cancel requested
    h.ok(c.DeleteJob(T0 + 10 * SEC, "deleted"))
    h.ok(c.UpdateJob(T0 + 11 * SEC, "replace", spec(Every(3 * SEC), concurrency=ConcurrencyPolicy.REPLACE)))
    done = lease(h, f"every@{T0 + 3 * SEC}", "ex-2")
    complete(h, done, succeeded=True)
    retried = lease(h, f"every@{T0 + 4 * SEC}", "ex-3")
    h.ok(c.CompleteRun(h.m.now_ms, retried.lease_id, retried.fencing_token, False, b"", "exit 1", "", 0.25))
    retried = h.m.runs[retried.run_id]
    assert retried.status is RunStatus.PENDING and retried.not_before_ms > h.m.now_ms  # a retry, after backoff
    return h


def test_snapshot_restore_round_trips_exactly() -> None:
    h = _rich_history()
    statuses = {r.status for r in h.m.runs.values()}
    assert statuses >= {
        RunStatus.PENDING,
        RunStatus.LEASED,
        RunStatus.CANCELLED,
        RunStatus.SKIPPED,
        RunStatus.SUCCEEDED,
    }
    assert {j.status for j in h.m.jobs.values()} == set(JobStatus)
    data = h.m.snapshot()
    fresh = new_machine()
    fresh.restore(data)
    assert dump(fresh) == dump(h.m)
    assert fresh.snapshot() == data


def test_restored_machine_behaves_like_the_original() -> None:
    h = _rich_history()
    twin = Harness()
    twin.m.restore(h.m.snapshot())
    twin.index = h.index
    later = [
        c.Fire(T0 + 20 * SEC, tuple(h.m.due_jobs(T0 + 20 * SEC, 100)), 0, 500),
        c.CreateJob(T0 + 21 * SEC, "again", spec(Every(SEC)), "k-every"),  # idempotency survived
        c.ResumeJob(T0 + 22 * SEC, "paused"),
        c.TriggerJob(T0 + 22 * SEC, "once"),
        c.CancelRun(T0 + 22 * SEC, f"every@{T0 + 4 * SEC}"),
    ]
    for cmd in later:
        assert repr(h.apply(cmd)) == repr(twin.apply(cmd))
    assert dump(twin.m) == dump(h.m)
    assert twin.m.snapshot() == h.m.snapshot()


def test_members_versions_are_kept_and_a_format_2_snapshot_still_loads() -> None:
    h = _rich_history()
    assert h.m.members == {"n1": ("0.1.0", 1), "n2": ("0.2.0", 2)}
    body = marshal.loads(h.m.snapshot())
    assert body[0] == 4 and body[6] == [("n1", "0.1.0", 1), ("n2", "0.2.0", 2)]
    older = marshal.dumps((2, *body[1:6]), 2)  # what a node before members' versions wrote
    fresh = new_machine()
    fresh.restore(older)
    assert fresh.members == {}
    no_membership = ({}, None, {}, 1, {})
    assert dump(fresh) == {**dump(h.m), "members": {}, "membership": no_membership}
    format_3 = marshal.dumps((3, *body[1:7]), 2)  # what a node before the membership wrote
    fresh.restore(format_3)
    assert dump(fresh) == {**dump(h.m), "membership": no_membership}


def test_restore_discards_the_old_state() -> None:
    h = Harness()
    h.create("j1", Every(SEC))
    h.fire(T0 + SEC)
    empty = new_machine().snapshot()
    h.m.restore(empty)
    assert dump(h.m) == dump(new_machine())


@pytest.mark.parametrize(
    "data,needle",
    [
        (marshal.dumps((99, 0, 0, [], [], []), 2), "format 99"),
        (marshal.dumps({"jobs": []}, 2), "format"),
        (b'{"format": 1}', "not readable"),
    ],
    ids=["newer-format", "foreign-body", "garbage"],
)
def test_restore_refuses_an_unknown_format(data: bytes, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        new_machine().restore(data)
