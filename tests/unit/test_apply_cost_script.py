"""scripts/bench/micro/apply_cost.py runs every phase it reports on both stores (importable: ``scripts/`` is on pytest's
``pythonpath``)."""

from __future__ import annotations

import gc
import re

import pytest

import apply_cost

pytestmark = pytest.mark.unit


def test_it_reports_fire_grant_and_complete_for_both_stores(capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_threshold()
    assert apply_cost.main(["--jobs", "40", "--store", "both", "--format", "3"]) == 0
    assert gc.get_threshold() == before  # a node's thresholds only while it measures
    lines = capsys.readouterr().out.splitlines()
    pattern = r"(memory|lmdb) +40 runs, format 3: fire ([\d.]+) us/run, grant ([\d.]+) us/run, complete ([\d.]+) us/run"
    found = [re.fullmatch(pattern + r" \(best of 3, node gc\)", line) for line in lines]
    assert [m.group(1) for m in found if m] == ["memory", "lmdb"], lines
    assert all(float(x) > 0 for m in found if m for x in m.groups()[1:])


def test_it_measures_with_a_nodes_collector_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    from raftsched.cluster.app.node_main import GC_THRESHOLDS

    seen: list[tuple[int, ...]] = []
    monkeypatch.setattr(apply_cost, "_one_round", lambda *a: seen.append(gc.get_threshold()) or (1.0, 1.0, 1.0))
    apply_cost.main(["--jobs", "1", "--store", "memory"])
    apply_cost.main(["--jobs", "1", "--store", "memory", "--gc", "default"])
    assert seen[0] == GC_THRESHOLDS and seen[-1] == gc.get_threshold()


def test_the_floor_times_each_phases_lmdb_work_alone(capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_threshold()
    assert apply_cost.main(["--jobs", "300", "--floor"]) == 0
    assert gc.get_threshold() == before
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2, lines
    pattern = r"floor +300 runs, the LMDB work alone: fire ([\d.]+) us/run, grant ([\d.]+) us/run, complete ([\d.]+) us/run"
    m = re.fullmatch(pattern + r" \(best of 3, node gc\)", lines[0])
    assert m is not None, lines
    assert all(float(x) > 0 for x in m.groups())
    pattern = r"in dicts 300 runs, the same indexes in Python containers: fire ([\d.]+) us/run, grant 0 us/run, "
    m = re.fullmatch(pattern + r"complete ([\d.]+) us/run \(best of 3, node gc\)", lines[1])
    assert m is not None, lines
    assert all(float(x) > 0 for x in m.groups())


def test_the_floor_writes_what_the_state_machine_writes() -> None:
    """The bare loop leaves the rows a fire, a grant and a completion leave: the same jobs, counts and index rows
    byte for byte, and the same runs field for field but their lease ids and tokens (made from the entry's index);
    the machine runs at command format 1, which records no run history, as the floor's runs carry none."""
    import marshal

    import lmdb

    from raftsched.cluster.domain import commands as c
    from raftsched.cluster.domain.model import At, JobSpec
    from raftsched.cluster.fsm.machine import JobStateMachine
    from raftsched.cluster.fsm.store import MemoryStore, Table

    tables = (Table.JOBS, Table.RUNS, Table.JOB_RUNS, Table.ACTIVE, Table.DUE, Table.EXPIRY, Table.FINISHED, Table.FAILED)
    closed: list[dict[str, dict[bytes, bytes]]] = []

    def read(env: lmdb.Environment) -> None:
        with env.begin() as txn:
            closed.append({t: dict(txn.cursor(db=env.open_db(t.encode(), txn=txn)).iternext()) for t in tables})

    apply_cost._floor_round(3, read)
    floor = closed[0]

    store = MemoryStore()
    m = JobStateMachine(store)
    t0, index = apply_cost.T0, 0

    def apply(*cmds: c.Command) -> list[object]:
        nonlocal index
        index += 1
        results = [m.apply(c.encode(cmd), index, pos) for pos, cmd in enumerate(cmds)]
        m.commit()
        return results

    for i in range(3):
        apply(c.CreateJob(t0 - 60_000, f"j-{i:07d}", JobSpec(name=f"n{i}", schedule=At(t0), type="noop")))
    apply(c.Fire(t0, tuple((f"j-{i:07d}", t0) for i in range(3))))
    grants = apply(c.AcquireLeases(t0, "bench", ("default",), 3))[0].value  # type: ignore[attr-defined]
    assert len(grants) == 3
    apply(*(c.CompleteRun(t0 + 5, g.run.lease_id, g.run.fencing_token, True, executor_id="bench") for g in grants))
    machine = {t: dict(store.scan(t)) for t in tables}
    for t in tables:
        if t != Table.RUNS:
            assert machine[t] == floor[t], t
    assert machine[Table.JOBS] and machine[Table.JOB_RUNS] and machine[Table.EXPIRY] and machine[Table.FINISHED]
    assert sorted(machine[Table.RUNS]) == sorted(floor[Table.RUNS])
    for key, raw in floor[Table.RUNS].items():
        ours, theirs = marshal.loads(raw), marshal.loads(machine[Table.RUNS][key])
        same = [k for k in range(21) if k not in (8, 9)]  # the lease id and token come from the entry's index
        assert [ours[k] for k in same] == [theirs[k] for k in same], key
        assert len(ours) == len(theirs) == 21  # no history: a machine at format 1 records none either
