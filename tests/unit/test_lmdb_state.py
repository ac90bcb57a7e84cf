"""The state environment (``raftsched.storage.lmdb_state``): read transactions, trust after a crash, full maps,
installs, and the refusal of files that are not a raftsched state (each message names the file)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched.cluster.fsm.store import MemoryStore, StoreFailure, Table
from raftsched.storage import state_trust
from raftsched.storage.disk import paced_io
from raftsched.storage.disk.durable_files import OLD_MARK, removals_done
from raftsched.storage.lmdb_state import MARKER_KEY, LmdbTableStore, StateFileError

pytestmark = pytest.mark.unit

MAP = 64 << 20


def _store(tmp_path: Path, name: str = "state.mdb", map_size: int = MAP) -> LmdbTableStore:
    return LmdbTableStore(str(tmp_path / name), map_size)


def test_other_threads_see_whole_commits_only(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.put(Table.JOBS, b"j1", b"one")
    seen: list[object] = []
    reader = threading.Thread(target=lambda: seen.append(store.get(Table.JOBS, b"j1")))
    reader.start()
    reader.join()
    assert seen == [None] and store.get(Table.JOBS, b"j1") == b"one"  # the writer sees its own batch
    store.commit()
    with store.reading():
        first = store.get(Table.JOBS, b"j1")

        def write_more() -> None:
            store.put(Table.JOBS, b"j2", b"two")
            store.commit()

        writer = threading.Thread(target=write_more)
        writer.start()
        writer.join()
        assert (first, store.get(Table.JOBS, b"j2")) == (b"one", None)  # one committed state per read transaction
    assert store.get(Table.JOBS, b"j2") == b"two"
    assert store.scan(Table.JOBS) == [(b"j1", b"one"), (b"j2", b"two")] and store.count(Table.JOBS) == 2
    assert store.get(Table.JOBS, b"x" * 600) is None  # a key LMDB cannot hold was never written
    store.close()


def _crash(store: LmdbTableStore) -> None:
    """What SIGKILL leaves: the environment closed without the clean close (its .open marker stays)."""
    store._close_env()


def test_after_a_process_crash_the_state_is_trusted(tmp_path: Path) -> None:
    if not state_trust.boot_id():
        pytest.skip("no boot id on this system: the state is written with sync on and always trusted")
    store = _store(tmp_path)
    store.put(Table.JOBS, b"j1", b"one")
    store.commit()
    _crash(store)
    again = _store(tmp_path)
    assert again.set_aside == "" and again.get(Table.JOBS, b"j1") == b"one"
    again.close()
    assert not os.path.exists(str(tmp_path / "state.mdb") + state_trust.OPEN_SUFFIX)  # a clean close


def test_a_state_written_when_the_machine_stopped_is_set_aside(tmp_path: Path) -> None:
    if not state_trust.boot_id():
        pytest.skip("no boot id on this system: the state is written with sync on and always trusted")
    store = _store(tmp_path)
    store.put(Table.JOBS, b"j1", b"one")
    store.commit()
    _crash(store)
    (tmp_path / ("state.mdb" + state_trust.OPEN_SUFFIX)).write_text("a-boot-before-the-power-cut")
    again = _store(tmp_path)
    assert "not trusted" in again.set_aside and str(tmp_path / "state.mdb") in again.set_aside
    assert again.get(Table.JOBS, b"j1") is None  # empty: rebuilt from the snapshot and the log
    assert (tmp_path / "state.mdb.untrusted").exists() and "machine stopped" in (tmp_path / "state.mdb.untrusted.why").read_text()
    again.close()


def test_a_full_map_refuses_proposals_first_then_stops_the_writer(tmp_path: Path) -> None:
    store = _store(tmp_path, map_size=1 << 20)
    refused_at = None
    with pytest.raises(StoreFailure, match=r"\[state\] max_bytes") as err:
        for i in range(10_000):
            if refused_at is None and not store.has_room():
                refused_at = i  # from here on the node refuses proposals (the writer went on to show the end)
            store.put(Table.RUNS, b"r%06d" % i, os.urandom(400))
            if i % 50 == 0:
                store.commit()
    assert refused_at is not None and refused_at > 100
    assert str(tmp_path / "state.mdb") in str(err.value)
    assert "[state] max_bytes" in store.full_message()
    store.close()  # the failed entry's transaction is aborted


def _foreign_lmdb(path: Path) -> None:
    env = lmdb.open(str(path), subdir=False, map_size=1 << 20)
    with env.begin(write=True) as txn:
        txn.put(b"some-app", b"its data")
    env.close()


def _newer(path: Path) -> None:
    store = LmdbTableStore(str(path), MAP)
    store.close()
    env = lmdb.open(str(path), subdir=False, max_dbs=16)
    with env.begin(write=True) as txn:
        txn.put(MARKER_KEY, b"state 99")
    env.close()


def _truncated(path: Path) -> None:
    store = LmdbTableStore(str(path), MAP)
    for i in range(3000):
        store.put(Table.JOBS, b"j%05d" % i, b"x" * 300)
    store.commit()
    store.close()
    os.truncate(path, 16384)


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda p: p.write_bytes(b"\x00not a database at all" * 500), "is not a raftsched state file"),
        (_foreign_lmdb, "no raftsched marker"),
        (_newer, "newer than this version"),
        (_truncated, "truncated"),
    ],
    ids=["garbage", "foreign-lmdb", "newer", "truncated"],
)
def test_a_damaged_or_foreign_state_file_is_refused_naming_it(tmp_path: Path, make, needle: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "state.mdb"
    make(path)
    before = path.read_bytes()
    with pytest.raises(StateFileError, match=needle) as err:
        LmdbTableStore(str(path), MAP)
    assert str(path) in str(err.value)
    assert path.read_bytes() == before  # never rewritten


def test_an_install_waits_for_running_reads_and_replaces_the_state(tmp_path: Path) -> None:
    source = _store(tmp_path, "source.mdb")
    for i in range(100):
        source.put(Table.JOBS, b"j%03d" % i, b"job %d" % i)
    source.commit()
    copy_path = tmp_path / "copy"
    fd = os.open(copy_path, os.O_WRONLY | os.O_CREAT, 0o600)
    copy = source.open_copy()
    source.put(Table.JOBS, b"later", b"not in the copy")  # after the pin
    source.commit()
    copy.write_to(fd)
    copy.close()
    os.close(fd)
    target = _store(tmp_path, "target.mdb")
    target.put(Table.JOBS, b"old", b"gone after the install")
    target.commit()
    reading = threading.Event()
    ended: list[float] = []

    def long_read() -> None:
        with target.reading():
            reading.set()
            time.sleep(0.3)
            ended.append(time.monotonic())

    reader = threading.Thread(target=long_read)
    reader.start()
    assert reading.wait(5)
    with open(copy_path, "rb") as f:
        target.install(f, os.path.getsize(copy_path))
    installed = time.monotonic()
    reader.join()
    assert ended and ended[0] <= installed  # the read in flight ended first
    assert target.get(Table.JOBS, b"old") is None and target.get(Table.JOBS, b"later") is None
    assert target.count(Table.JOBS) == 100 and target.get(Table.JOBS, b"j042") == b"job 42"
    source.close()
    target.close()
    assert removals_done(10)  # the old environment was freed in the background, and nothing is left of it
    assert not [n for n in os.listdir(tmp_path) if n.startswith("target.mdb" + OLD_MARK) or n == "target.mdb.new"]


def test_a_short_copy_replaces_nothing(tmp_path: Path) -> None:
    target = _store(tmp_path)
    target.put(Table.JOBS, b"kept", b"yes")
    target.commit()
    with pytest.raises(StateFileError, match="ended"):
        copy = tmp_path / "short"
        copy.write_bytes(b"x" * 100)
        with open(copy, "rb") as f:
            target.install(f, 1 << 20)
    assert target.get(Table.JOBS, b"kept") == b"yes"
    target.close()


def test_a_restart_replays_only_the_log_after_the_stored_index(tmp_path: Path) -> None:
    """Each entry commits with its index; reopened, the machine skips every entry the store already holds."""
    from raftsched.cluster.domain import commands as c
    from raftsched.cluster.domain.model import Every, JobSpec
    from raftsched.cluster.fsm.machine import JobStateMachine
    from raftsched.cluster.fsm.store import state_hash

    t0 = 1_767_225_600_000
    log = [c.encode(c.CreateJob(t0, f"j{i}", JobSpec(f"n{i}", Every(1000), type="noop"))) for i in range(1, 4)]
    log.append(c.encode(c.Fire(t0 + 1000, (("j1", t0 + 1000), ("j2", t0 + 1000)), 0, 5000)))
    m = JobStateMachine(_store(tmp_path))
    for index, data in enumerate(log[:3], start=1):
        assert m.apply(data, index) is not None
        m.commit()
    before = state_hash(m.store)
    _crash(m.store)  # SIGKILL after entry 3
    again = JobStateMachine(_store(tmp_path))
    assert again.committed_index == again.applied_index == 3 and len(again.jobs) == 3
    for index, data in enumerate(log[:3], start=1):  # pysyncobj replays from its snapshot on
        assert again.apply(data, index) is None
        again.commit()
    assert state_hash(again.store) == before
    fired = again.apply(log[3], 4)  # the first entry the store does not hold is applied
    again.commit()
    assert fired is not None and len(fired.value.created) == 2 and again.committed_index == 4
    again.store.close()


_KEYS = st.binary(min_size=0, max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keys=st.sets(st.binary(min_size=1, max_size=3), max_size=30),
    start=_KEYS,
    stop=st.none() | _KEYS,
    limit=st.integers(min_value=0, max_value=8),
)
def test_both_stores_scan_either_way_as_a_sorted_list_does(
    tmp_path_factory: pytest.TempPathFactory, keys: set[bytes], start: bytes, stop: bytes | None, limit: int
) -> None:
    """``scan`` and ``scan_back`` of the LMDB store and of the in-memory store answer what a sorted list
    of the keys does: the keys in [start, stop), from the low end or from the high end, at most ``limit``."""
    lmdb_store = _store(tmp_path_factory.mktemp("scan"))
    memory = MemoryStore()
    for store in (lmdb_store, memory):
        store.begin()
        for key in keys:
            store.put(Table.JOBS, key, key[::-1])
        store.commit()
    inside = [k for k in sorted(keys) if k >= start and (stop is None or k < stop)]
    ahead = [(k, k[::-1]) for k in inside][:limit]
    back = [(k, k[::-1]) for k in reversed(inside)][:limit]
    for store in (lmdb_store, memory):
        assert store.scan(Table.JOBS, start, stop, limit) == ahead
        assert store.scan_back(Table.JOBS, start, stop, limit) == back
    lmdb_store.close()


def test_an_install_writes_the_copy_in_synced_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst of gigabytes would stall every other fsync on the disk (``raftsched.storage.disk.paced_io``)."""
    source = _store(tmp_path, "source.mdb")
    for i in range(5000):
        source.put(Table.JOBS, b"j%05d" % i, os.urandom(4000))
    source.commit()
    copy_path = tmp_path / "copy"
    fd = os.open(copy_path, os.O_WRONLY | os.O_CREAT, 0o600)
    copy = source.open_copy()
    copy.write_to(fd)
    copy.close()
    os.close(fd)
    source.close()
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(paced_io.os, "fdatasync", lambda fd: (synced.append(os.fstat(fd).st_size), real(fd)))
    target = _store(tmp_path, "target.mdb")
    with open(copy_path, "rb") as f:
        target.install(f, os.path.getsize(copy_path))
    assert target.count(Table.JOBS) == 5000
    target.close()
    assert os.path.getsize(copy_path) > 16 << 20 and len(synced) >= 2
    assert all(b - a <= 8 << 20 for a, b in zip([0, *synced], synced))  # never more than one chunk unsynced
