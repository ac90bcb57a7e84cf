"""scripts/bench/micro/apply_cost.py runs every phase it reports on both stores (importable: ``scripts/`` is on pytest's
``pythonpath``)."""

from __future__ import annotations

import gc
import re
from pathlib import Path

import pytest

import apply_cost
import store_calls

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


def test_the_steady_shape_reports_each_phase_and_the_cpu_per_run(capsys: pytest.CaptureFixture[str]) -> None:
    """Every measured second fires, grants and completes each job once (the round stops otherwise), on both stores."""
    before = gc.get_threshold()
    assert apply_cost.main(["--shape", "steady", "--jobs", "30", "--cycles", "2", "--store", "both", "--format", "7"]) == 0
    assert gc.get_threshold() == before
    lines = capsys.readouterr().out.splitlines()
    pattern = (
        r"steady (memory|lmdb) +30 every-1s jobs x 2 s, format 7: fire ([\d.]+) us/run, grant ([\d.]+) us/run, "
        r"complete ([\d.]+) us/run; CPU user ([\d.]+) \+ system ([\d.]+) us/run \(best of 3, node gc\)"
    )
    found = [re.fullmatch(pattern, line) for line in lines]
    assert [m.group(1) for m in found if m] == ["memory", "lmdb"], lines
    assert all(float(x) > 0 for m in found if m for x in m.groups()[1:5])


def test_the_steady_shape_stops_when_the_jobs_do_not_all_come_due(monkeypatch: pytest.MonkeyPatch) -> None:
    real = apply_cost.JobStateMachine.due_jobs
    monkeypatch.setattr(apply_cost.JobStateMachine, "due_jobs", lambda m, until, limit: real(m, until, limit)[:-1])
    with pytest.raises(SystemExit, match="second 0: 4 of 5 jobs due, 4 runs granted"):
        apply_cost._steady_round("memory", 5, 7, 1)


def test_the_steady_floor_times_each_phases_store_calls_alone(capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_threshold()
    assert apply_cost.main(["--shape", "steady", "--floor", "--jobs", "30", "--cycles", "2", "--format", "7"]) == 0
    assert gc.get_threshold() == before
    lines = capsys.readouterr().out.strip().splitlines()
    pattern = (
        r"steady floor 30 every-1s jobs x 2 s, format 7, the LMDB work alone: fire ([\d.]+) us/run, grant ([\d.]+) "
        r"us/run, complete ([\d.]+) us/run; ([\d.]+) store calls a run \(best of 3, node gc\)"
    )
    m = re.fullmatch(pattern, lines[0]) if len(lines) == 1 else None
    assert m is not None, lines
    assert all(float(x) > 0 for x in m.groups()[:3])
    # each run is written at least once in each phase (its record), its job read at its fire
    assert float(m.group(4)) >= 4


def test_the_steady_floor_makes_every_call_apply_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replayed from the recording, the bare loop leaves every table byte for byte as the machine left it: no write
    of apply's escapes the recording (one that did would be missing from the floor)."""
    import lmdb

    from raftsched.cluster.fsm.store import Table

    def tables(env: lmdb.Environment) -> dict[str, dict[bytes, bytes]]:
        with env.begin() as txn:
            return {t: dict(txn.cursor(db=env.open_db(t.encode(), txn=txn)).iternext()) for t in Table.ALL}

    left: list[dict[str, dict[bytes, bytes]]] = []
    real = apply_cost._machine

    def machine_kept_on_close(store: str, folder: str, ops: list[store_calls.StoreOp] | None = None) -> tuple[object, object]:
        machine, close = real(store, folder, ops)

        def close_after_reading() -> None:
            left.append(tables(machine.store.env))
            close()

        return machine, close_after_reading

    monkeypatch.setattr(apply_cost, "_machine", machine_kept_on_close)
    ops: list[store_calls.StoreOp] = []
    apply_cost._steady_round("lmdb", 12, 7, 2, ops)
    replayed: list[dict[str, dict[bytes, bytes]]] = []
    fire, grant, complete, calls = store_calls.replay(ops, lambda env: replayed.append(tables(env)))
    assert len(left) == len(replayed) == 1
    assert replayed[0] == left[0]
    assert sum(len(rows) for rows in left[0].values()) > 12 * 4  # jobs, runs and their index rows
    assert min(fire, grant, complete) > 0 and calls >= 12 * 2 * 4
    marks = [op[3] for op in ops if op[0] == "mark"]
    assert [m for m in marks if m] == ["fire", "grant", "complete"] * 2  # the two measured seconds, not the warm-up


def test_the_steady_shape_refuses_what_it_cannot_measure(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        apply_cost.main(["--shape", "steady", "--cycles", "0"])
    assert "--jobs and --cycles must be at least 1" in capsys.readouterr().err


def test_it_finds_a_version_under_its_import_root_or_without_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This version's modules under ``raftsched.``; a version from before the one import root has them as they are
    (standing in for one here: a module of the standard library); a module that is there but cannot import what it
    needs is not taken for a missing one."""
    assert apply_cost._module("cluster.fsm.machine", "cluster.domain.state").__name__ == "raftsched.cluster.fsm.machine"
    assert apply_cost._module("no_such_module_here", "json").__name__ == "json"
    with pytest.raises(ModuleNotFoundError, match="none of no_such_a, no_such_b found"):
        apply_cost._module("no_such_a", "no_such_b")
    (tmp_path / "apply_cost_broken_module.py").write_text("import a_dependency_nobody_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as raised:
        apply_cost._module("apply_cost_broken_module")
    assert raised.value.name == "a_dependency_nobody_installed"
