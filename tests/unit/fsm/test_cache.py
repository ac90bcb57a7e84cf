"""What apply keeps between commands to go faster never changes a result or a stored byte.

The transaction (``raftsched.cluster.fsm.tx``) keeps job specs with the stored fields they
came from and runs' stored bytes in one cache with one budget (``raftsched.cluster.fsm.cache``),
writes a fired run without reading what its id held, and the machine encodes its
membership only when it changed (``Memory._membership_raw``). Each shortcut is
checked here against the slow way; the hypothesis model test runs a twin that keeps
nothing (``tests/unit/fsm/test_model.py``).
"""

from __future__ import annotations

import gc
import marshal
import tracemalloc
from pathlib import Path

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import SCHEDULES_FORMAT, After, At, Every, JobSpec, RetryPolicy, Run, RunStatus
from raftsched.cluster.fsm import layout
from raftsched.cluster.fsm.cache import SPEC_ENTRY, Budget, Kept, KeptSpecs, spec_weight
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.store import Table, state_hash
from raftsched.storage.lmdb_state import LmdbTableStore

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000


def _apply(m: JobStateMachine, cmd: object, index: int) -> object:
    result = m.apply(c.encode(cmd), index)
    m.commit()
    return result


def test_a_kept_spec_is_reused_only_for_the_stored_fields_it_came_from() -> None:
    m = JobStateMachine()
    _apply(m, c.CreateJob(T0, "j1", JobSpec(name="first", schedule=Every(60_000), type="noop")), 1)
    kept = m.tx.spec("j1")
    assert kept is not None and kept.name == "first"
    # the stored job changes behind the unit of work's back (what no rule does: every write goes through
    # ``flush``): the kept spec no longer matches the stored fields and must not be used for the job
    stored = marshal.loads(m.store.get(Table.JOBS, b"j1") or b"")
    changed = stored[:9] + ("second",) + stored[10:]
    m.store.put(Table.JOBS, b"j1", marshal.dumps(changed, layout.MARSHAL_VERSION))
    m.store.commit()
    job = m.tx.job("j1")
    assert job is not None and job.spec.name == "second"
    m.tx.end_command()
    assert m.tx.spec("j1") is job.spec  # what it read is what it keeps now


def test_a_job_written_with_its_kept_spec_encodes_as_a_fresh_encoding_does() -> None:
    m = JobStateMachine()
    spec = JobSpec(name="n", schedule=Every(60_000), type="noop", payload=b"\x00\x01", failed_history_limit=3)
    _apply(m, c.CreateJob(T0, "j1", spec), 1)
    for k in range(1, 4):  # fires rewrite the job with the spec kept from its creation
        _apply(m, c.Fire(T0 + k * 60_000, (("j1", T0 + k * 60_000),), lookahead_ms=100), 1 + k)
    job = m.view.job("j1")
    assert job is not None and job.fire_count == 3
    assert m.store.get(Table.JOBS, b"j1") == layout.encode_job(job)
    assert marshal.loads(m.store.get(Table.JOBS, b"j1") or b"") == layout.job_to_tuple(job)


def test_updating_a_job_replaces_its_kept_spec() -> None:
    m = JobStateMachine()
    _apply(m, c.CreateJob(T0, "j1", JobSpec(name="n", schedule=Every(60_000), type="noop")), 1)
    _apply(m, c.UpdateJob(T0 + 1, "j1", JobSpec(name="n", schedule=Every(60_000), type="other")), 2)
    spec = m.tx.spec("j1")
    assert spec is not None and spec.type == "other"
    fresh = JobStateMachine(m.store, cache_bytes=0)  # reads every spec from the store
    assert fresh.tx.spec("j1") == spec


def test_a_run_added_without_reading_its_id_overwrites_and_drops_what_the_id_held() -> None:
    m = JobStateMachine()
    old = Run("r1", "j1", "default", T0, T0, RunStatus.SUCCEEDED)
    m.store.put(Table.RUNS, b"r1", layout.encode_run(old))
    m.store.commit()
    new = Run("r1", "j1", "default", T0 + 1, T0 + 1)
    m.tx.add_new_run(new)
    m.tx.end_command()
    assert m.store.get(Table.RUNS, b"r1") == layout.encode_run(new)
    m.tx.add_new_run(Run("r2", "j1", "default", T0, T0))
    m.tx.drop_run("r2")
    m.tx.add_new_run(new)
    m.tx.drop_run("r1")
    m.tx.end_command()
    assert m.store.get(Table.RUNS, b"r1") is None and m.store.get(Table.RUNS, b"r2") is None


def test_the_stored_membership_follows_changes_made_in_place() -> None:
    m = JobStateMachine()
    _apply(m, c.NodeInfo(T0, "n1", "1.0", 2), 1)
    _apply(m, c.CreateJob(T0, "j1", JobSpec(name="n", schedule=At(T0 + 1000), type="noop")), 2)
    _apply(m, c.NodeInfo(T0, "n1", "1.1", 3), 3)  # the same member, a new version: its dict changes in place
    expected = layout.encode_membership(m.members, m.member_rafts, m.roster, m.member_change, m.removed_members, m.cluster_format)
    assert m.store.get(Table.META, b"membership") == expected
    assert layout.decode_membership(expected)[0] == {"n1": ("1.1", 3)}
    again = JobStateMachine(m.store)  # a restart reads what was stored
    assert again.members == {"n1": ("1.1", 3)} and state_hash(again.store) == state_hash(m.store)


def test_kept_specs_and_runs_stay_within_their_budget_whatever_their_payloads_and_results_weigh() -> None:
    m = JobStateMachine(cache_bytes=6 << 20)
    twin = JobStateMachine(cache_bytes=0)  # keeps nothing: every record read from its store
    big = b"x" * (1 << 20)  # the largest payload and result the default limits accept
    index = 0

    def both(cmd: object) -> list[object]:
        nonlocal index
        index += 1
        return [_apply(machine, cmd, index) for machine in (m, twin)]

    for k in range(8):
        both(c.CreateJob(T0, f"j{k}", JobSpec(name=f"n{k}", schedule=At(T0 + 1000), type="noop", payload=big)))
        both(c.TriggerJob(T0, f"j{k}"))
    specs = m.tx.kept_specs
    assert 0 < m.tx.budget.total <= 6 << 20 and 0 < len(specs) < 8
    granted, twin_granted = both(c.AcquireLeases(T0, "e1", ("default",), 8))
    assert len(granted.value) == 8  # type: ignore[attr-defined]
    assert [(layout.run_to_tuple(g.run), g.spec) for g in granted.value] == [  # type: ignore[attr-defined]
        (layout.run_to_tuple(g.run), g.spec)
        for g in twin_granted.value  # type: ignore[attr-defined]
    ]
    for grant in granted.value:  # type: ignore[attr-defined]
        run = grant.run
        # a failed first attempt: the run waits for its retry (kept: it is live), holding its 1 MiB result
        done, twin_done = both(c.CompleteRun(T0 + 1, run.lease_id, run.fencing_token, False, result=big, executor_id="e1"))
        assert done.value.status is RunStatus.PENDING and len(done.value.result) == len(big)  # type: ignore[attr-defined]
        assert layout.run_to_tuple(done.value) == layout.run_to_tuple(twin_done.value)  # type: ignore[attr-defined]
    runs = m.tx.kept_runs
    assert 0 < m.tx.budget.total <= 6 << 20 and 0 < len(runs) < 8
    for k in range(8):  # what is still kept is what the store holds
        assert m.tx.spec(f"j{k}") == twin.tx.spec(f"j{k}")
    assert state_hash(m.store) == state_hash(twin.store)


def _freed_by_forgetting(kept: Kept) -> int:  # type: ignore[type-arg]
    """The bytes of memory clearing ``kept`` gives back (tracemalloc is on)."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    kept.clear()
    gc.collect()
    return before - tracemalloc.get_traced_memory()[0]


@pytest.mark.parametrize("phase", ["fired", "leased", "retrying"])
def test_kept_specs_and_runs_are_counted_near_the_memory_they_take(phase: str, tmp_path: Path) -> None:
    """The budgets bound memory only if a kept record is counted for what it takes (a spec was once counted
    at half of it): forgetting them must give back within a third of what they were counted for. On an LMDB
    store, as a node keeps them (a ``MemoryStore`` holds the very bytes a kept run holds)."""
    n = 2000
    store = LmdbTableStore(str(tmp_path / "state.mdb"), 1 << 30)
    tracemalloc.start()
    try:
        m = JobStateMachine(store)
        index = 1
        _apply(m, c.SetClusterFormat(T0 - 60_000, 3), index)
        for i in range(n):
            index += 1
            _apply(m, c.CreateJob(T0 - 60_000, f"j-{i:07d}", JobSpec(name=f"n{i}", schedule=At(T0), type="noop")), index)
        for k in range(0, n, 250):
            index += 1
            _apply(m, c.Fire(T0, tuple((f"j-{i:07d}", T0) for i in range(k, k + 250)), lookahead_ms=100), index)
        if phase != "fired":
            grants: list = []  # type: ignore[type-arg]
            while len(grants) < n:
                index += 1
                granted = _apply(m, c.AcquireLeases(T0, "e1", ("default",), 500), index).value  # type: ignore[attr-defined]
                assert granted
                grants.extend(granted)
            if phase == "retrying":  # a failed attempt with its error: PENDING again, with the longest history kept
                for g in grants:
                    index += 1
                    cmd = c.CompleteRun(
                        T0 + 5, g.run.lease_id, g.run.fencing_token, False, error="exit status 1", executor_id="e1"
                    )
                    assert _apply(m, cmd, index).value.status is RunStatus.PENDING  # type: ignore[attr-defined]
            del grants, granted
        m.drain_events()
        runs, specs = m.tx.kept_runs, m.tx.kept_specs
        assert len(runs) == n and len(specs) == n
        for kept in (runs, specs):
            counted = kept.total
            freed = _freed_by_forgetting(kept)
            assert 0.67 * freed <= counted <= 1.5 * freed, (phase, counted / n, freed / n)
    finally:
        tracemalloc.stop()
        store.close()


def test_jobs_of_one_form_read_back_are_counted_once_for_the_form_and_near_what_each_adds() -> None:
    """Jobs that share a spec (one name, one shape) and are read back from the store share one interned spec and
    its stored fields: each kept entry is counted at ``SPEC_ENTRY`` and the form once, and forgetting the entries
    gives back within a third of what they were counted for."""
    n = 2000
    m = JobStateMachine()
    index = 1
    _apply(m, c.SetClusterFormat(T0 - 60_000, 3), index)
    spec = JobSpec(name="nightly-report", schedule=At(T0), type="noop")
    for i in range(n):
        index += 1
        _apply(m, c.CreateJob(T0 - 60_000, f"j-{i:07d}", spec), index)
    specs = m.tx.kept_specs
    specs.clear()
    tracemalloc.start()
    try:
        read = [m.tx.spec(f"j-{i:07d}") for i in range(n)]
        assert all(r is read[0] for r in read) and read[0] == spec  # one interned spec for every job
        assert len(specs) == n
        pair = specs["j-0000000"]  # and one (stored fields, spec) pair: no object per job for the collector to walk
        assert pair[1] is read[0] and all(specs[f"j-{i:07d}"] is pair for i in range(n))
        form = spec_weight(spec) - SPEC_ENTRY
        assert specs.total == n * SPEC_ENTRY + form == m.tx.budget.total - m.tx.kept_runs.total
        del read
        counted = specs.total - form  # the form stays interned in the decoder: forgetting frees the entries
        freed = _freed_by_forgetting(specs)
        assert 0.67 * freed <= counted <= 1.5 * freed, (counted / n, freed / n)
    finally:
        tracemalloc.stop()
    assert specs.total == 0 and m.tx.budget.total == m.tx.kept_runs.total


def test_jobs_created_alike_are_kept_as_one_form_from_the_second_and_read_back_as_it() -> None:
    """A command that writes a job of a form already written (a template's jobs, created one by one or in a batch)
    keeps it as that form's entry, as a job read back is: counted at ``SPEC_ENTRY``, one spec for all of them. The
    first job of a form is kept as a spec of its own (a spec written once, as most are, is not kept alive by the
    decoder once the cache forgets it: ``test_kept_specs_and_runs_are_counted_near_the_memory_they_take``)."""
    n = 500
    m = JobStateMachine()
    index = 1
    _apply(m, c.SetClusterFormat(T0 - 60_000, SCHEDULES_FORMAT), index)
    for i in range(n):
        index += 1
        spec = JobSpec(name="nightly-report", schedule=At(T0), type="noop", labels=(("team", "billing"),))
        _apply(m, c.CreateJob(T0 - 60_000, f"j-{i:07d}", spec), index)  # an equal spec, a new object each time
    index += 1
    other = JobSpec(name="one-of-a-kind", schedule=At(T0), type="noop")
    _apply(m, c.CreateJob(T0 - 60_000, "j-other", other), index)
    specs = m.tx.kept_specs
    assert len(specs) == n + 1
    first, second = specs["j-0000000"], specs["j-0000001"]
    assert specs.weight("j-0000000") == spec_weight(first[1])  # the first of its form: a spec of its own
    assert specs.weight("j-other") == spec_weight(other)
    assert all(specs[f"j-{i:07d}"] is second for i in range(2, n))  # the rest: the form's one pair
    assert all(specs.weight(f"j-{i:07d}") == SPEC_ENTRY for i in range(1, n))
    assert second[1] == first[1] == spec and second[1] is not first[1]
    form = spec_weight(spec) - SPEC_ENTRY
    assert specs.total == (n - 1) * SPEC_ENTRY + form + spec_weight(first[1]) + spec_weight(other)
    _invariant(specs, m.tx.budget, m.tx.kept_runs)
    # read back from the store (the cache forgotten): the same interned pair as the written ones
    specs.clear()
    read = [m.tx.spec(f"j-{i:07d}") for i in range(n)]
    assert all(r is second[1] for r in read)
    assert m.tx.spec("j-other") == other
    # and the stored bytes are those of each job's own spec: interning changes only what is kept in memory
    index += 1
    jobs = _apply(m, c.Fire(T0, tuple((f"j-{i:07d}", T0) for i in range(n)), lookahead_ms=100), index)
    assert len(jobs.value.created) == n  # type: ignore[attr-defined]
    for i in (0, 1, n - 1):
        raw = m.tx.store.get(Table.JOBS, f"j-{i:07d}".encode())
        assert raw is not None and layout.Decoder().spec(marshal.loads(raw)) == spec


def _invariant(specs: KeptSpecs, budget: Budget, runs: Kept) -> None:  # type: ignore[type-arg]
    """What ``specs`` is counted for is its entries' weights and each form its shared entries hold, once."""
    shared = {id(v[1]): v[1] for k, v in specs.items() if specs.weight(k) == SPEC_ENTRY}
    forms = sum(max(0, spec_weight(s) - SPEC_ENTRY) for s in shared.values())
    assert specs.total == sum(specs.weight(k) for k in specs) + forms
    assert budget.total == specs.total + runs.total


def test_a_forms_weight_is_counted_once_and_goes_with_the_last_entry_that_holds_it() -> None:
    budget = Budget(1 << 20)
    specs, runs = KeptSpecs(budget), Kept(budget)  # type: ignore[var-annotated]
    a = JobSpec(name="a", schedule=At(T0), type="noop")
    b = JobSpec(name="b" * 500, schedule=At(T0), type="noop")
    part_a, part_b = layout.spec_part(a), layout.spec_part(b)
    specs.put_shared("j1", part_a, a)
    specs.put_shared("j2", part_a, a)
    specs.put_shared("j3", part_b, b)
    specs.put("j4", (part_a, a), spec_weight(a))  # a spec kept on its own terms: counted in full, no form
    runs.put("r1", ("run",), 700)
    _invariant(specs, budget, runs)
    assert specs.total == 3 * SPEC_ENTRY + (spec_weight(a) - SPEC_ENTRY) + (spec_weight(b) - SPEC_ENTRY) + spec_weight(a)
    specs.forget("j1")
    _invariant(specs, budget, runs)
    specs.put_shared("j2", part_b, b)  # j2 now holds b: a's last shared holder is gone, and a's form with it
    _invariant(specs, budget, runs)
    assert specs.total == 2 * SPEC_ENTRY + (spec_weight(b) - SPEC_ENTRY) + spec_weight(a)
    specs.forget("j4")
    specs.forget("j2")
    specs.forget("j3")
    _invariant(specs, budget, runs)
    assert specs.total == 0 and budget.total == 700


def test_shedding_frees_the_forms_of_the_entries_it_forgets_and_stays_within_the_budget() -> None:
    budget = Budget(400_000)
    specs, runs = KeptSpecs(budget), Kept(budget)  # type: ignore[var-annotated]
    forms = [JobSpec(name=f"form-{k}", schedule=At(T0), type="noop", payload=b"p" * (k * 97)) for k in range(40)]
    for i in range(3000):
        spec = forms[(i * 7) % len(forms)]
        specs.put_shared(f"j{i}", layout.spec_part(spec), spec)
        if i % 3 == 0:
            runs.put(f"r{i}", ("run", i), 900)
        assert budget.total <= budget.limit
        if i % 250 == 0:
            _invariant(specs, budget, runs)
    _invariant(specs, budget, runs)
    assert 0 < len(specs) < 3000 and len(runs) > 0
    specs.clear()
    assert specs.total == 0 and budget.total == runs.total


class _Both:
    """Applies each command to a machine and to its twin that keeps nothing, and checks they answer alike."""

    def __init__(self, m: JobStateMachine, twin: JobStateMachine) -> None:
        self.machines, self.index = (m, twin), 0

    def __call__(self, cmd: object) -> object:
        self.index += 1
        one, other = (_apply(machine, cmd, self.index) for machine in self.machines)
        assert repr(one) == repr(other)
        return one


def _twins() -> tuple[JobStateMachine, JobStateMachine, _Both]:
    """A machine with the default cache, a twin without one, both on command format 5, and ``_Both`` of them."""
    m, twin = JobStateMachine(), JobStateMachine(cache_bytes=0)
    both = _Both(m, twin)
    both(c.SetClusterFormat(T0 - 60_000, SCHEDULES_FORMAT))
    return m, twin, both


def _kept_status(raw: bytes | None) -> str:
    """The status value of a kept run (kept as the bytes it is stored as)."""
    assert raw is not None
    return str(marshal.loads(raw)[0])


def test_an_ended_run_is_not_kept_and_a_live_one_is() -> None:
    """A run is kept while it is live (PENDING, LEASED: the next command on it reads it); once it ends it makes
    room (under a backlog larger than the budget, ended runs pushed out the live runs about to be leased), and
    reading it again reads the store: what each command answers and stores is the same either way."""
    m, twin, both = _twins()
    for k in range(6):
        both(c.CreateJob(T0, f"j{k}", JobSpec(name=f"n{k}", schedule=At(T0), type="noop", retry=RetryPolicy(max_attempts=1))))
    both(c.Fire(T0, tuple((f"j{k}", T0) for k in range(6)), lookahead_ms=100))
    runs = m.tx.kept_runs
    fired = set(runs)
    assert len(fired) == 6 and all(_kept_status(runs[r]) == RunStatus.PENDING.value for r in fired)
    grants = both(c.AcquireLeases(T0, "e1", ("default",), 6)).value  # type: ignore[attr-defined]
    assert {g.run.run_id for g in grants} == fired and all(_kept_status(runs[r]) == RunStatus.LEASED.value for r in fired)
    ended = [  # succeeded, failed for good (one attempt: dead letter), cancelled
        both(c.CompleteRun(T0 + 1, grants[0].run.lease_id, grants[0].run.fencing_token, True, executor_id="e1")),
        both(c.CompleteRun(T0 + 1, grants[1].run.lease_id, grants[1].run.fencing_token, False, executor_id="e1")),
        both(c.CancelRun(T0 + 1, grants[2].run.run_id)),
    ]
    both(c.CompleteRun(T0 + 2, grants[2].run.lease_id, grants[2].run.fencing_token, True, executor_id="e1"))
    gone = {g.run.run_id for g in grants[:3]}
    assert set(runs) == fired - gone, ended
    assert all(_kept_status(runs[r]) == RunStatus.LEASED.value for r in fired - gone)
    statuses = {r.run_id: r.status for r in m.iter_runs()}
    assert statuses == {r.run_id: r.status for r in twin.iter_runs()}
    assert {statuses[r] for r in gone} == {RunStatus.SUCCEEDED, RunStatus.DEAD_LETTER, RunStatus.CANCELLED}
    retried = both(c.RetryRun(T0 + 3, grants[1].run.run_id))  # live again: read from the store, kept
    assert retried.value.status is RunStatus.PENDING, retried  # type: ignore[attr-defined]
    assert grants[1].run.run_id in runs and _kept_status(runs[grants[1].run.run_id]) == RunStatus.PENDING.value
    assert state_hash(m.store) == state_hash(twin.store)


def test_a_one_off_jobs_spec_goes_once_its_run_ended_and_an_interval_jobs_stays() -> None:
    """A one-off job (At, After) has nothing left to fire once its run ended: its kept spec makes room; an interval
    job's stays (its next fire reads it). Reads afterwards answer the same from the store."""
    m, twin, both = _twins()
    both(c.CreateJob(T0 - 1000, "at", JobSpec(name="at", schedule=At(T0), type="noop")))
    both(c.CreateJob(T0 - 1000, "after", JobSpec(name="after", schedule=After(1000), type="noop")))
    both(c.CreateJob(T0 - 1000, "every", JobSpec(name="every", schedule=Every(1000), type="noop")))
    both(c.Fire(T0, (("at", T0), ("after", T0), ("every", T0)), lookahead_ms=100))
    specs = m.tx.kept_specs
    assert set(specs) == {"at", "after", "every"}
    grants = both(c.AcquireLeases(T0, "e1", ("default",), 3)).value  # type: ignore[attr-defined]
    assert len(grants) == 3 and set(specs) == {"at", "after", "every"}
    for g in grants:
        both(c.CompleteRun(T0 + 1, g.run.lease_id, g.run.fencing_token, True, executor_id="e1"))
    assert set(specs) == {"every"}
    both(c.TriggerJob(T0 + 2, "at"))  # a user acts on the one-off again: its spec is read from the store
    assert {r.status for r in m.active_runs("at")} == {RunStatus.PENDING}
    assert [(j.job_id, j.status, j.spec) for j in m.iter_jobs()] == [(j.job_id, j.status, j.spec) for j in twin.iter_jobs()]
    assert state_hash(m.store) == state_hash(twin.store)


def test_a_run_retention_drops_takes_no_room_in_the_cache() -> None:
    """A job at its history limit drops its oldest finished run as each run ends: the dropped run is read to be
    dropped, and neither its bytes nor its absence is kept (it is seldom asked for again, and under a backlog it
    would push out live runs). A failure kept apart is still passed over, and everything each command answers and
    stores is what a machine that keeps nothing answers and stores."""
    m, twin, both = _twins()
    spec = JobSpec(name="n", schedule=Every(1000), type="noop", history_limit=2, retry=RetryPolicy(max_attempts=1))
    both(c.CreateJob(T0 - 1000, "j", spec))
    runs = m.tx.kept_runs
    finished: list[str] = []
    for k in range(6):
        now = T0 + k * 1000
        both(c.Fire(now, (("j", now),), lookahead_ms=100))
        grant = both(c.AcquireLeases(now, "e1", ("default",), 1)).value[0]  # type: ignore[attr-defined]
        ok = k != 1  # the second run fails for good: kept apart, never pruned by the successes after it
        both(c.CompleteRun(now + 1, grant.run.lease_id, grant.run.fencing_token, ok, executor_id="e1"))
        finished.append(grant.run.run_id)
        assert not set(finished) & set(runs), k
    kept = {r.run_id: r.status for r in m.iter_runs()}
    assert kept == {finished[1]: RunStatus.DEAD_LETTER, finished[4]: RunStatus.SUCCEEDED, finished[5]: RunStatus.SUCCEEDED}
    assert kept == {r.run_id: r.status for r in twin.iter_runs()}
    assert m.tx.run(finished[0]) is None and m.tx.run(finished[5]) is not None  # read from the store: the same answer
    m.tx.end_command()
    assert state_hash(m.store) == state_hash(twin.store)
