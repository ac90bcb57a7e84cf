"""From command format 6 a LEASED run's record is kept apart (``Table.LEASED``) while it is leased, and ``RUNS`` keeps
the record it had before: a grant and a renewal leave the run table alone; everything observable stays as it was."""

from __future__ import annotations

import hashlib
import marshal
import struct

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import LEASED_APART_FORMAT, SCHEDULES_FORMAT, At, Run, RunStatus
from raftsched.cluster.domain.spec_codec import run_to_plain
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.store import Table, iter_table, state_hash
from tests.unit.fsm.harness import SEC, T0, Harness, store_kind

pytestmark = pytest.mark.unit
__all__ = ["store_kind"]  # the fixture that runs every test on both stores

QUEUE = "default"


def _fired(fmt: int, jobs: int = 3) -> Harness:
    """``jobs`` one-off jobs due at T0 + 1 s, fired, on command format ``fmt``."""
    h = Harness()
    h.ok(c.SetClusterFormat(T0, fmt))
    for k in range(jobs):
        h.create(f"j{k}", At(T0 + SEC))
    h.fire(T0 + SEC, [(f"j{k}", T0 + SEC) for k in range(jobs)])
    return h


def _grant(h: Harness, n: int = 1, executor: str = "ex-1") -> list[Run]:
    grants = h.ok(c.AcquireLeases(T0 + 2 * SEC, executor, (QUEUE,), n))
    return [h.m.runs[g.run.run_id] for g in grants]


def _raw(h: Harness, table: str, run_id: str) -> bytes | None:
    return h.m.store.get(table, run_id.encode())


def test_a_grant_leaves_the_run_table_alone_and_every_reader_sees_the_lease() -> None:
    h = _fired(LEASED_APART_FORMAT)
    before = {f"j{k}@{T0 + SEC}": _raw(h, Table.RUNS, f"j{k}@{T0 + SEC}") for k in range(3)}
    (run,) = _grant(h)
    assert run.status is RunStatus.LEASED and run.executor_id == "ex-1" and run.attempt == 1
    # the run table holds every run as it was before the grant; the leased record is apart
    assert {rid: _raw(h, Table.RUNS, rid) for rid in before} == before
    assert [k.decode() for k, _ in iter_table(h.m.store, Table.LEASED)] == [run.run_id]
    # every way of reading the run sees it leased: the apply path, the readers, the lease index, the blob
    assert h.m.view.run(run.run_id) is not None and h.m.view.run(run.run_id).status is RunStatus.LEASED  # type: ignore[union-attr]
    assert [r.status for r in h.m.view.iter_runs() if r.run_id == run.run_id] == [RunStatus.LEASED]
    assert h.m.leases[run.lease_id] == run.run_id
    assert h.m.tx.run(run.run_id).status is RunStatus.LEASED  # type: ignore[union-attr]
    assert len(h.m.runs) == 3 and h.m.run_counts[RunStatus.LEASED] == 1
    twin = JobStateMachine()
    twin.restore(h.m.snapshot())
    assert run_to_plain(twin.runs[run.run_id]) == run_to_plain(run)


def test_a_renewal_writes_the_leased_row_and_an_ending_puts_the_record_back() -> None:
    h = _fired(LEASED_APART_FORMAT)
    ok, retried = _grant(h, 2)
    pending, granted = _raw(h, Table.RUNS, ok.run_id), _raw(h, Table.LEASED, ok.run_id)
    renewed = h.ok(c.RenewLeases(T0 + 3 * SEC, "ex-1", ((ok.lease_id, ok.fencing_token),)))
    assert renewed[0].ok and h.m.runs[ok.run_id].lease_expires_ms == renewed[0].expires_ms
    assert _raw(h, Table.RUNS, ok.run_id) == pending  # still the record from before the grant
    assert _raw(h, Table.LEASED, ok.run_id) not in (None, granted)  # the renewal's deadline, apart
    # a completion ends the run in the run table and leaves nothing apart
    h.ok(c.CompleteRun(T0 + 4 * SEC, ok.lease_id, ok.fencing_token, True, executor_id="ex-1"))
    assert h.m.runs[ok.run_id].status is RunStatus.SUCCEEDED
    assert _raw(h, Table.LEASED, ok.run_id) is None and _raw(h, Table.RUNS, ok.run_id) != pending
    # a failed attempt goes back to PENDING for its retry, in the run table
    h.ok(c.CompleteRun(T0 + 4 * SEC, retried.lease_id, retried.fencing_token, False, error="boom", executor_id="ex-1"))
    again = h.m.runs[retried.run_id]
    assert again.status is RunStatus.PENDING and again.attempt == 1 and again.error == "boom"
    assert list(iter_table(h.m.store, Table.LEASED)) == []
    assert h.m.view.run(retried.run_id) is not None and h.m.view.run(retried.run_id).attempt == 1  # type: ignore[union-attr]


def test_a_lease_expired_or_a_job_deleted_leaves_nothing_apart() -> None:
    h = _fired(LEASED_APART_FORMAT, jobs=2)
    first, second = _grant(h, 2)
    h.ok(c.ExpireLeases(first.lease_expires_ms + 1, ((first.lease_id, first.fencing_token, 0.5),)))
    assert h.m.runs[first.run_id].status is RunStatus.PENDING and _raw(h, Table.LEASED, first.run_id) is None
    h.ok(c.DeleteJob(first.lease_expires_ms + 2, second.job_id))
    h.ok(c.CompleteRun(first.lease_expires_ms + 3, second.lease_id, second.fencing_token, True, executor_id="ex-1"))
    assert h.m.runs[second.run_id].status is not RunStatus.LEASED
    assert list(iter_table(h.m.store, Table.LEASED)) == []


def test_a_machine_loaded_again_finds_its_leases_apart_and_completes_them() -> None:
    h = _fired(LEASED_APART_FORMAT)
    runs = _grant(h, 3)
    h.m.commit()
    again = JobStateMachine(h.m.store)  # a restart: the small state and the live indexes from the store
    assert again.tx.apart == {r.run_id for r in runs}
    assert {lease: again.runs[rid].status for lease, rid in again.leases.items()} == dict.fromkeys(
        (r.lease_id for r in runs), RunStatus.LEASED
    )
    assert state_hash(again.store) == state_hash(h.m.store)
    for k, run in enumerate(runs, start=1):
        done = again.apply(
            c.encode(c.CompleteRun(T0 + 5 * SEC, run.lease_id, run.fencing_token, True, executor_id="ex-1")), h.index + k
        )
        assert done.value.status is RunStatus.SUCCEEDED  # type: ignore[union-attr]
    assert again.tx.apart == set() and list(iter_table(again.store, Table.LEASED)) == []


def test_a_lease_taken_before_the_switch_moves_apart_on_its_next_change_and_back_at_its_end() -> None:
    h = _fired(SCHEDULES_FORMAT)
    (run,) = _grant(h)
    leased = _raw(h, Table.RUNS, run.run_id)
    assert marshal_status(leased) == RunStatus.LEASED.value and _raw(h, Table.LEASED, run.run_id) is None
    h.ok(c.SetClusterFormat(T0 + 2 * SEC, LEASED_APART_FORMAT))
    h.ok(c.RenewLeases(T0 + 3 * SEC, "ex-1", ((run.lease_id, run.fencing_token),)))
    assert _raw(h, Table.RUNS, run.run_id) == leased and _raw(h, Table.LEASED, run.run_id) is not None
    assert h.m.view.run(run.run_id).lease_expires_ms > run.lease_expires_ms  # type: ignore[union-attr]
    h.ok(c.CompleteRun(T0 + 4 * SEC, run.lease_id, run.fencing_token, True, executor_id="ex-1"))
    assert h.m.runs[run.run_id].status is RunStatus.SUCCEEDED and _raw(h, Table.LEASED, run.run_id) is None


def marshal_status(raw: bytes | None) -> str:
    """The status a stored run record holds."""
    assert raw is not None
    return str(marshal.loads(raw)[0])


def test_both_formats_answer_alike_and_an_older_state_hashes_as_it_always_did() -> None:
    """The same commands on format 5 and on format 6: the same answers and runs. A format-5 state's hash is what
    it was before the leased table existed (the tables it always had, in their order)."""
    machines = {fmt: _fired(fmt) for fmt in (SCHEDULES_FORMAT, LEASED_APART_FORMAT)}
    answers: dict[int, list[str]] = {fmt: [] for fmt in machines}
    for fmt, h in machines.items():
        a, b, d = _grant(h, 3)
        cmds: list[c.Command] = [
            c.RenewLeases(T0 + 3 * SEC, "ex-1", ((a.lease_id, a.fencing_token), (b.lease_id, b.fencing_token))),
            c.CancelRun(T0 + 3 * SEC, b.run_id),
            c.CompleteRun(T0 + 4 * SEC, a.lease_id, a.fencing_token, True, executor_id="ex-1"),
            c.CompleteRun(T0 + 4 * SEC, b.lease_id, b.fencing_token, True, executor_id="ex-1"),
            c.RenewLeases(T0 + 5 * SEC, "ex-2", ((d.lease_id, d.fencing_token),)),  # not its holder: refused
        ]
        answers[fmt] = [repr(h.apply(cmd)) for cmd in cmds]
    assert answers[SCHEDULES_FORMAT] == answers[LEASED_APART_FORMAT]
    runs = {fmt: [run_to_plain(r) for r in h.m.view.iter_runs()] for fmt, h in machines.items()}
    assert runs[SCHEDULES_FORMAT] == runs[LEASED_APART_FORMAT]
    older = machines[SCHEDULES_FORMAT].m.store
    digest = hashlib.sha256()
    for table in Table.ALL[: Table.ALL.index(Table.JOB_INFO) + 1]:
        digest.update(table.encode() + b"\x00")
        for key, value in iter_table(older, table):
            digest.update(struct.pack(">I", len(key)) + key + struct.pack(">I", len(value)) + value)
    assert state_hash(older) == digest.hexdigest()
    assert list(iter_table(machines[LEASED_APART_FORMAT].m.store, Table.LEASED))  # the live lease is apart


def test_a_state_restored_from_its_blob_hashes_as_the_one_it_came_from() -> None:
    """A blob puts a leased run's record in the run table; the state (and its hash) is the same, and the lease goes
    on (renewed apart, completed back)."""
    h = _fired(LEASED_APART_FORMAT)
    (run,) = _grant(h)
    h.m.commit()
    twin = JobStateMachine()
    twin.restore(h.m.snapshot())
    assert twin.tx.apart == set() and state_hash(twin.store) == state_hash(h.m.store)
    index = h.index
    for k, cmd in enumerate(
        [
            c.RenewLeases(T0 + 3 * SEC, "ex-1", ((run.lease_id, run.fencing_token),)),
            c.CompleteRun(T0 + 4 * SEC, run.lease_id, run.fencing_token, True, executor_id="ex-1"),
        ],
        start=1,
    ):
        answers = []
        for m in (h.m, twin):
            answers.append(repr(m.apply(c.encode(cmd), index + k)))
            m.commit()
        assert answers[0] == answers[1] and "Ok(" in answers[0]
        assert state_hash(twin.store) == state_hash(h.m.store)
    assert twin.runs[run.run_id].status is RunStatus.SUCCEEDED
