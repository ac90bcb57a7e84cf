"""scripts/apply_cost.py runs every phase it reports on both stores (importable: ``scripts/`` is on pytest's
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
    from cluster.app.node_main import GC_THRESHOLDS

    seen: list[tuple[int, ...]] = []
    monkeypatch.setattr(apply_cost, "_one_round", lambda *a: seen.append(gc.get_threshold()) or (1.0, 1.0, 1.0))
    apply_cost.main(["--jobs", "1", "--store", "memory"])
    apply_cost.main(["--jobs", "1", "--store", "memory", "--gc", "default"])
    assert seen[0] == GC_THRESHOLDS and seen[-1] == gc.get_threshold()


def test_the_floor_times_a_fires_lmdb_work_alone(capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_threshold()
    assert apply_cost.main(["--jobs", "300", "--floor"]) == 0
    assert gc.get_threshold() == before
    line = capsys.readouterr().out.strip()
    m = re.fullmatch(r"floor +300 runs: a fire's LMDB work alone ([\d.]+) us/run \(best of 3, node gc\)", line)
    assert m is not None, line
    assert float(m.group(1)) > 0


def test_the_floor_leaves_the_state_a_fire_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bare loop writes what the state machine's fire writes: the same job bytes, and rows in the same tables."""
    import marshal

    import lmdb

    from cluster.domain import commands as c
    from cluster.domain.model import At, JobSpec
    from cluster.domain.state import JobStateMachine
    from cluster.domain.state_store import MemoryStore, Table

    closed: list[dict[str, dict[bytes, bytes]]] = []
    real_open = lmdb.open

    def watched_open(*args: object, **kwargs: object) -> object:
        env = real_open(*args, **kwargs)
        real_close = env.close

        def close() -> None:
            tables = {}
            with env.begin() as txn:
                for t in (Table.JOBS, Table.RUNS, Table.JOB_RUNS, Table.ACTIVE, Table.DUE):
                    tables[t] = dict(txn.cursor(db=env.open_db(t.encode(), txn=txn)).iternext())
            closed.append(tables)
            real_close()

        return _EnvProxy(env, close)

    monkeypatch.setattr(lmdb, "open", watched_open)
    apply_cost._floor_round(3)
    floor = closed[0]

    store = MemoryStore()
    m = JobStateMachine(store)
    made = apply_cost.T0 - 60_000
    for i in range(3):
        m.apply(c.encode(c.CreateJob(made, f"j-{i:07d}", JobSpec(name=f"n{i}", schedule=At(apply_cost.T0), type="noop"))), i + 1)
        m.commit()
    m.apply(c.encode(c.Fire(apply_cost.T0, tuple((f"j-{i:07d}", apply_cost.T0) for i in range(3)))), 4)
    m.commit()
    for t in (Table.JOBS, Table.JOB_RUNS, Table.ACTIVE, Table.DUE):
        assert {k: v for k, v in store.scan(t)} == floor[t], t
    assert sorted(floor[Table.RUNS]) == sorted(k for k, _ in store.scan(Table.RUNS))
    for raw in floor[Table.RUNS].values():
        assert marshal.loads(raw)[0] == "PENDING"


class _EnvProxy:
    def __init__(self, env: object, close: object) -> None:
        self._env, self.close = env, close

    def __getattr__(self, name: str) -> object:
        return getattr(self._env, name)
