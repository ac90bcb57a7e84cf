"""The reference's state hash (``state_reference``) catches a write every replica misses alike; comparing replicas
(``state_hash``) cannot."""

from __future__ import annotations

from typing import Any

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import Every, JobSpec
from raftsched.cluster.domain.results import Ok
from raftsched.cluster.domain.spec_codec import spec_fingerprint
from raftsched.cluster.fsm import jobs, retention
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.store import state_hash
from tests.unit.fsm.reference import differences, expected_tables, reference_hash, stored_hash, stored_tables

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000


def _run(*machines: JobStateMachine) -> dict[str, Any]:
    """A job fired twice and its first run leased and completed, on each machine; what the reference needs."""
    cmds: list[c.Command] = [
        c.SetClusterFormat(T0, 3),
        c.CreateJob(T0, "j1", JobSpec("n", Every(60_000), type="noop"), "key-1"),
        c.Fire(T0 + 60_000, (("j1", T0 + 60_000),)),
        c.Fire(T0 + 120_000, (("j1", T0 + 120_000),)),
        c.AcquireLeases(T0 + 120_000, "ex-1", ("default",), 1),
    ]
    for m in machines:
        for index, cmd in enumerate(cmds, start=1):
            assert isinstance(m.apply(c.encode(cmd), index), Ok)
            m.commit()
    leased = next(iter(machines[0].leases))
    run = machines[0].runs[machines[0].leases[leased]]
    done = c.CompleteRun(T0 + 121_000, leased, run.fencing_token, True, executor_id="ex-1")
    for m in machines:
        assert isinstance(m.apply(c.encode(done), len(cmds) + 1), Ok)
        m.commit()
    spec = machines[0].jobs["j1"].spec
    return {
        "created": {"j1"}, "applied": len(cmds) + 1, "now_ms": T0 + 121_000, "cluster_format": 3,
        "idempotency": {"key-1": ("j1", spec_fingerprint(spec))}, "requests": {},
    }  # fmt: skip


def _expected(m: JobStateMachine, applied: dict[str, Any]) -> dict[str, dict[bytes, bytes]]:
    return expected_tables(dict(m.jobs.items()), dict(m.runs.items()), **applied)


def test_a_machine_that_writes_every_row_matches_the_reference() -> None:
    m = JobStateMachine()
    applied = _run(m)
    assert differences(_expected(m, applied), stored_tables(m.store)) == []
    assert reference_hash(_expected(m, applied)) == stored_hash(m.store)


@pytest.mark.parametrize(
    ("module", "name", "delete"),
    [(jobs, "index_due", False), (retention, "retain", False), (retention, "schedule_purge", True)],
    ids=["due row", "retention rows", "purge row"],
)
def test_a_write_every_replica_misses_alike_is_caught_by_the_reference_only(
    module: Any, name: str, delete: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, name, lambda *args: None)
    m, twin = JobStateMachine(), JobStateMachine(cache_bytes=0)
    applied = _run(m, twin)
    if delete:
        for machine in (m, twin):
            assert isinstance(machine.apply(c.encode(c.DeleteJob(T0 + 122_000, "j1")), applied["applied"] + 1), Ok)
            machine.commit()
        applied.update(applied=applied["applied"] + 1, now_ms=T0 + 122_000)
    assert state_hash(m.store) == state_hash(twin.store)  # the replicas agree: they missed the same write
    assert differences(_expected(m, applied), stored_tables(m.store)) != []
    assert reference_hash(_expected(m, applied)) != stored_hash(m.store)
