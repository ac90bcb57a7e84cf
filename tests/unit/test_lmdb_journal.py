"""The LMDB Raft log behaves like pysyncobj's in-memory journal, and persists and checks itself."""

from __future__ import annotations

import json
import struct

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pysyncobj.journal import MemoryJournal

from raft.lmdb_journal import JournalError, LmdbJournal

pytestmark = pytest.mark.unit

ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 5)),
        st.tuples(st.just("from"), st.integers(0, 12)),
        st.tuples(st.just("to"), st.integers(0, 12)),
        st.tuples(st.just("clear"), st.just(0)),
    ),
    max_size=40,
)


def _apply(j, op, arg, state):  # type: ignore[no-untyped-def]
    if op == "add":
        for _ in range(arg):
            idx = j[-1][1] + 1 if len(j) else state["next"]
            j.add(f"cmd-{idx}".encode(), idx, state["term"])
    elif op == "from" and len(j):
        j.deleteEntriesFrom(min(arg, len(j)))
    elif op == "to" and len(j) > 1:
        j.deleteEntriesTo(min(arg, len(j) - 1))
    elif op == "clear":
        j.clear()
        state["next"] += 100


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
            assert list(lj[1 : len(mj)]) == list(mj[1:])
    lj._destroy()
    again = LmdbJournal(str(path))
    assert list(again[0:]) == list(mj[0:])


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


def test_keep_from_trims_to_the_snapshot(tmp_path) -> None:
    j = LmdbJournal(str(tmp_path / "j"))
    for i in range(1, 11):
        j.add(b"x", i, 1)
    j._destroy()
    k = LmdbJournal(str(tmp_path / "j"), keep_from_index=7)
    assert [e[1] for e in k[0:]] == [7, 8, 9, 10]


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
