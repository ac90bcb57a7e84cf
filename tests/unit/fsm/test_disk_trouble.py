"""The state environment and the job state machine under a disk that refuses a write (an I/O error at commit, a
full map mid-entry; a full disk is in tests/integration/test_full_disk_stores.py): readers keep the last commit,
a refused commit keeps its writes and commits them later, a batch LMDB lost is dropped and the machine rolled back
to what its store holds, and the entry applied again ends in exactly the state a node that never failed has."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import lmdb
import pytest

from raftsched.cluster.app.durable_machine import DurableMachine
from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import Every, JobSpec, JobStatus
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.store import MemoryStore, StoreFailure, Table, state_hash
from raftsched.storage.lmdb_state import LmdbTableStore
from tests.unit.test_journal_disk_trouble import EIO, FailingEnv

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000
MAP = 64 << 20


def _store(tmp_path: Path, map_size: int = MAP) -> LmdbTableStore:
    return LmdbTableStore(str(tmp_path / "state.mdb"), map_size)


def _fail_commits(store: LmdbTableStore, times: int) -> FailingEnv:
    env = FailingEnv(store.env, times, EIO)
    store.env = env
    return env


def _read_elsewhere(store: LmdbTableStore, key: bytes) -> bytes | None:
    """What a reader on another thread sees."""
    seen: list[bytes | None] = []
    thread = threading.Thread(target=lambda: seen.append(store.get(Table.JOBS, key)))
    thread.start()
    thread.join()
    return seen[0]


def test_a_refused_commit_keeps_its_writes_and_commits_them_later(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.put(Table.JOBS, b"old", b"1")
    store.put(Table.JOBS, b"gone", b"2")
    store.commit()
    env = _fail_commits(store, 2)
    store.put(Table.JOBS, b"new", b"3")
    store.delete(Table.JOBS, b"gone")
    for _ in range(2):
        with pytest.raises(StoreFailure) as err:
            store.commit()
        assert err.value.kept
        assert err.value.storage_problem.startswith(f"disk failing: {store.path}: mdb_txn_commit: Input/output error")
        assert _read_elsewhere(store, b"new") is None and _read_elsewhere(store, b"gone") == b"2"  # the last commit
    store.commit()  # the disk takes it now: the same writes, in a fresh transaction
    assert env.commits == 1 and _read_elsewhere(store, b"new") == b"3" and _read_elsewhere(store, b"gone") is None
    store.close()
    again = _store(tmp_path)
    assert again.scan(Table.JOBS) == [(b"new", b"3"), (b"old", b"1")]
    again.close()


def test_a_full_map_mid_entry_loses_the_batch_and_abort_leaves_the_last_commit(tmp_path: Path) -> None:
    store = _store(tmp_path, map_size=1 << 20)
    store.put(Table.JOBS, b"kept", b"yes")
    store.commit()
    with pytest.raises(StoreFailure) as err:
        for i in range(10_000):
            store.put(Table.RUNS, b"r%06d" % i, b"x" * 400)
    assert not err.value.kept and err.value.storage_problem.startswith(f"disk full: {store.path} (its LMDB map")
    store.abort()
    assert store.get(Table.JOBS, b"kept") == b"yes" and store.count(Table.RUNS) == 0
    store.close()


def _create(index: int) -> bytes:
    return c.encode(c.CreateJob(T0 + index, f"j{index}", JobSpec(name=f"n{index}", schedule=Every(60_000), type="noop")))


def _twin(entries: int) -> str:
    """The state hash of a machine that applied ``entries`` creates without a failure."""
    twin = JobStateMachine(MemoryStore())
    for index in range(1, entries + 1):
        twin.apply(_create(index), index)
        twin.commit()
    return state_hash(twin.store)


def _replica(tmp_path: Path) -> tuple[DurableMachine, LmdbTableStore]:
    store = _store(tmp_path)
    machine = JobStateMachine(store)
    return DurableMachine(machine, store, lambda: None), store


def test_an_entry_whose_commit_is_refused_is_committed_as_it_was_applied(tmp_path: Path) -> None:
    replica, store = _replica(tmp_path)
    replica.apply(_create(1), 1, 0)
    replica.commit()
    _fail_commits(store, 1)
    replica.apply(_create(2), 2, 0)
    with pytest.raises(StoreFailure) as err:
        replica.commit()
    assert err.value.kept and replica.committed_index == 1
    replica.commit()  # what the Raft adapter does when the held entry's retry is due
    assert replica.committed_index == 2 and state_hash(store) == _twin(2)
    store.close()


def test_an_entry_the_store_lost_is_rolled_back_and_applied_again(tmp_path: Path) -> None:
    replica, store = _replica(tmp_path)
    replica.apply(_create(1), 1, 0)
    replica.commit()
    _fail_commits(store, 1)
    store.load_sorted(Table.PURGE, iter(()))  # a batch that cannot be redone: its commit failure drops it
    replica.apply(_create(2), 2, 0)
    with pytest.raises(StoreFailure) as err:
        replica.commit()
    assert not err.value.kept
    replica.rollback()  # the machine is again what the store holds
    machine = replica.machine
    assert machine.committed_index == machine.applied_index == 1 and machine.job_counts[JobStatus.ACTIVE] == 1
    assert replica.apply(_create(2), 2, 0) is not None  # applied again, not skipped
    replica.commit()
    assert state_hash(store) == _twin(2)
    store.close()


def test_a_write_lmdb_refuses_mid_entry_is_rolled_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    replica, store = _replica(tmp_path)
    replica.apply(_create(1), 1, 0)
    replica.commit()
    real_put = store.put
    calls = {"n": 0}

    def put(table: str, key: bytes, value: bytes) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # the second write of the entry: LMDB's transaction is lost with it
            store._txn.abort()
            store._txn = None
            raise store._failure(lmdb.MapFullError("mdb_put: MDB_MAP_FULL"), "write to")
        real_put(table, key, value)

    monkeypatch.setattr(store, "put", put)
    with pytest.raises(StoreFailure) as err:
        replica.apply(_create(2), 2, 0)
        replica.commit()
    assert not err.value.kept
    monkeypatch.setattr(store, "put", real_put)
    replica.rollback()
    replica.apply(_create(2), 2, 0)
    replica.commit()
    assert state_hash(store) == _twin(2)
    store.close()


def test_failed_installs_leave_the_environment_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import io
    import os

    store = _store(tmp_path)
    store.put(Table.JOBS, b"kept", b"yes")
    store.commit()
    real_write = os.write

    def full_write(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_write)
    with pytest.raises(StoreFailure) as err:
        store.install(io.BytesIO(b"x" * 4096), 4096)
    monkeypatch.setattr(os, "write", real_write)
    assert err.value.storage_problem.startswith(f"disk full: {store.path}.new")
    assert not os.path.exists(store.path + ".new") and store.get(Table.JOBS, b"kept") == b"yes"
    store.close()
