"""The LMDB Raft log behaves like pysyncobj's in-memory journal, and persists and checks itself."""

from __future__ import annotations

import json
import struct

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pysyncobj.journal import MemoryJournal

from raftsched.raft.lmdb_journal import JournalError, LmdbJournal

pytestmark = pytest.mark.unit

ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 5)),
        st.tuples(st.just("from"), st.integers(0, 12)),
        st.tuples(st.just("to"), st.integers(0, 12)),
        st.tuples(st.just("clear"), st.just(0)),
        st.tuples(st.just("term"), st.just(0)),
    ),
    max_size=40,
)


def _apply(j, op, arg, state):  # type: ignore[no-untyped-def]
    if op == "add":
        for _ in range(arg):
            idx = j[-1][1] + 1 if len(j) else state["next"]
            j.add(f"cmd-{idx}-{state['term']}".encode(), idx, state["term"])
    elif op == "from" and len(j):
        j.deleteEntriesFrom(min(arg, len(j)))
    elif op == "to" and len(j) > 1:
        j.deleteEntriesTo(min(arg, len(j) - 1))
    elif op == "clear":
        j.clear()
        state["next"] += 100
    elif op == "term":  # a new leader: entries written again at the same indexes differ from the ones they replace
        state["term"] += 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops)
def test_matches_the_memory_journal(tmp_path, seq) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / f"j{abs(hash(str(seq)))}"
    lj, mj = LmdbJournal(str(path)), MemoryJournal()
    s1, s2 = {"next": 1, "term": 3}, {"next": 1, "term": 3}
    for op, arg in seq:
        _apply(lj, op, arg, s1)
        _apply(mj, op, arg, s2)
        assert len(lj) == len(mj)
        assert list(lj[0:]) == list(mj[0:])
        if len(mj):
            assert lj[0] == mj[0] and lj[-1] == mj[-1]
            assert [lj[i] for i in range(len(mj))] == list(mj[0:])  # one by one: the entries kept at hand too
            assert list(lj[1 : len(mj)]) == list(mj[1:])
    lj._destroy()
    again = LmdbJournal(str(path))
    assert list(again[0:]) == list(mj[0:])
    again._destroy()


def test_meta_and_entries_survive_reopen(tmp_path) -> None:
    j = LmdbJournal(str(tmp_path / "j"))
    for i in range(1, 6):
        j.add(b"x%d" % i, i, 2)
    j.setCurrentTerm(7, "127.0.0.1:7001")
    j.setRaftCommitIndex(4)
    j.onOneSecondTimer()
    j._destroy()
    k = LmdbJournal(str(tmp_path / "j"))
    assert (k.getCurrentTerm(), k.getVotedForNodeId(), k.getRaftCommitIndex()) == (7, "127.0.0.1:7001", 4)
    assert [e[1] for e in k[0:]] == [1, 2, 3, 4, 5]
    k._destroy()


def test_keep_from_trims_to_the_snapshot(tmp_path) -> None:
    j = LmdbJournal(str(tmp_path / "j"))
    for i in range(1, 11):
        j.add(b"x", i, 1)
    j._destroy()
    k = LmdbJournal(str(tmp_path / "j"), keep_from_index=7)
    assert [e[1] for e in k[0:]] == [7, 8, 9, 10]
    k._destroy()


def test_a_gap_is_detected(tmp_path) -> None:
    j = LmdbJournal(str(tmp_path / "j"))
    for i in range(1, 6):
        j.add(b"x", i, 1)
    j._destroy()
    env = lmdb.open(str(tmp_path / "j"), max_dbs=4)
    with env.begin(write=True, db=env.open_db(b"log")) as txn:
        txn.delete(struct.pack(">Q", 3))
    env.close()
    with pytest.raises(JournalError, match="gap"):
        LmdbJournal(str(tmp_path / "j"))


def test_a_newer_format_is_refused(tmp_path) -> None:
    LmdbJournal(str(tmp_path / "j"))._destroy()
    env = lmdb.open(str(tmp_path / "j"), max_dbs=4)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        txn.put(b"meta", json.dumps({"format": 99}).encode())
    env.close()
    with pytest.raises(JournalError, match="newer"):
        LmdbJournal(str(tmp_path / "j"))


def test_a_foreign_file_is_refused(tmp_path) -> None:
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "data.mdb").write_bytes(b"this is not an lmdb file" * 100)
    with pytest.raises(JournalError, match="not an LMDB file.*move it away"):
        LmdbJournal(str(tmp_path / "j"))


# ------------------------------------------------------------------ durability, group commit, a full map


def test_fsync_is_on_by_default_and_writemap_never() -> None:  # type: ignore[no-untyped-def]
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for kwargs, synced in (({}, True), ({"sync": False}, False)):
            j = LmdbJournal(f"{d}/j{synced}", **kwargs)
            flags = j._env.flags()
            assert (flags["sync"], flags["metasync"], flags["writemap"]) == (synced, synced, False)
            j._destroy()


def test_private_directory_and_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    j = LmdbJournal(str(tmp_path / "node" / "raft.lmdb"))
    j.add(b"x", 1, 1)
    j._destroy()
    assert (tmp_path / "node").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "node" / "raft.lmdb").stat().st_mode & 0o777 == 0o700
    for f in (tmp_path / "node" / "raft.lmdb").iterdir():
        assert f.stat().st_mode & 0o777 == 0o600, f


def test_the_tick_threads_changes_are_one_transaction_per_commit(tmp_path) -> None:  # type: ignore[no-untyped-def]
    j = LmdbJournal(str(tmp_path / "j"))
    j.bind_thread()
    before = j._env.info()["last_txnid"]
    for i in range(1, 51):
        j.add(b"entry %d" % i, i, 3)
    j.setCurrentTerm(3, "127.0.0.1:7002")
    j.deleteEntriesFrom(45)
    assert j._env.info()["last_txnid"] == before  # nothing committed yet
    assert [e[1] for e in j[40:]] == [41, 42, 43, 44, 45]  # but the open transaction reads its own changes
    j.commit()
    assert j._env.info()["last_txnid"] == before + 1
    j._destroy()
    k = LmdbJournal(str(tmp_path / "j"))
    assert len(k) == 45 and (k.getCurrentTerm(), k.getVotedForNodeId()) == (3, "127.0.0.1:7002")
    k._destroy()


def test_every_commit_is_timed_for_the_metrics(tmp_path) -> None:  # type: ignore[no-untyped-def]
    j = LmdbJournal(str(tmp_path / "j"))
    took: list[float] = []
    j.on_commit = took.append
    j.bind_thread()
    j.add(b"entry 1", 1, 1)
    j.add(b"entry 2", 2, 1)
    assert took == []  # nothing committed yet
    j.commit()
    j.commit()  # nothing open: no commit, nothing timed
    assert len(took) == 1 and 0 < took[0] < 5
    j._destroy()


def test_other_threads_changes_commit_at_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    j = LmdbJournal(str(tmp_path / "j"))  # no bound thread: pysyncobj's constructor, before the first tick
    before = j._env.info()["last_txnid"]
    j.add(b"no-op", 1, 0)
    j.setCurrentTerm(1, None)
    assert j._env.info()["last_txnid"] == before + 2 and j._txn is None
    j._destroy()


def test_a_full_map_is_refused_before_lmdb_hits_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from raftsched.raft.lmdb_journal import LogFullError

    j = LmdbJournal(str(tmp_path / "j"), map_size=4 << 20)
    j.bind_thread()
    idx, refused = 0, None
    while refused is None and idx < 1000:
        if not j.has_room(64 * 1024):
            refused = "proposal"
            break
        idx += 1
        j.add(b"x" * 64 * 1024, idx, 1)
        j.commit()
    assert refused == "proposal" and idx > 10  # proposals stop first, with room left for what is queued
    with pytest.raises(LogFullError, match=r"4194304 bytes.*\[raft\] max_log_bytes"):
        for _ in range(1000):
            idx += 1
            j.add(b"x" * 64 * 1024, idx, 1)
            j.commit()
    assert len(j) == idx - 1  # the refused entry is not in the log, every other one is
    j._destroy()
    k = LmdbJournal(str(tmp_path / "j"), map_size=4 << 20)
    assert len(k) == idx - 1
    k._destroy()


def test_lmdb_map_full_keeps_what_was_written(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """If the estimate is wrong and LMDB itself reports MAP_FULL, its transaction is lost: the journal redoes
    the changes it held, so the entries pysyncobj already added stay, and refuses the one that did not fit."""
    from raftsched.raft.lmdb_journal import LogFullError

    j = LmdbJournal(str(tmp_path / "j"), map_size=2 << 20)
    j.bind_thread()
    monkeypatch.setattr(j, "_room", 1 << 40)  # pretend there is room
    idx = 0
    with pytest.raises(LogFullError, match="max_log_bytes"):
        while idx < 1000:
            j.add(b"y" * 100_000, idx + 1, 1)  # no commit: all in one transaction
            idx += 1
    assert 5 < idx < 1000 and len(j) == idx
    assert not j.has_room(1)  # proposals are refused from now on
    j.deleteEntriesTo(idx - 2)  # compaction frees room
    j.commit()
    j._destroy()
    k = LmdbJournal(str(tmp_path / "j"), map_size=2 << 20)
    assert [e[1] for e in k[0:]] == [idx - 1, idx]
    k._destroy()


def test_entries_written_again_are_read_as_written(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A new leader overwrites a follower's tail: the entries read back, one by one and last, are the new ones (the
    newest entries are kept at hand, not read from LMDB), before and after a commit, and after the head moves."""
    j = LmdbJournal(str(tmp_path / "log"))
    for idx in range(1, 6):
        j.add(f"old-{idx}".encode(), idx, 1)
    assert j[-1] == (b"old-5", 5, 1) and j[0] == (b"old-1", 1, 1)
    j.deleteEntriesFrom(2)  # keeps entries 1 and 2
    assert j[-1] == (b"old-2", 2, 1)
    for idx in range(3, 6):
        j.add(f"new-{idx}".encode(), idx, 2)
    expected = [(b"old-1", 1, 1), (b"old-2", 2, 1), (b"new-3", 3, 2), (b"new-4", 4, 2), (b"new-5", 5, 2)]
    assert [j[i] for i in range(len(j))] == expected and j[-1] == expected[-1]
    j.commit()
    assert [j[i] for i in range(len(j))] == expected and list(j[0:]) == expected
    j.deleteEntriesTo(2)  # compaction: the log starts at entry 3
    assert j[0] == (b"new-3", 3, 2) and j[-1] == (b"new-5", 5, 2)
    j.clear()
    j.add(b"again", 9, 3)
    assert j[0] == j[-1] == (b"again", 9, 3)
    j._destroy()
