"""A follower keeps the entries it holds when a leader sends them again (``raftsched.raft.log_overlap``).

Two levels: ``trim`` with pysyncobj's follower as it reads a message (a model of
``syncobj.py``'s AppendEntries branch) against Raft's receiver rules, for any
pair of logs that agree up to some index; and a real pysyncobj ``SyncObj`` (not
ticking, no network) on an ``LmdbJournal``, fed the messages a leader sends when
it resends from an earlier index.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterator

import pysyncobj.pickle as pysyncobj_pickle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pysyncobj import SyncObj, SyncObjConf

from raftsched.raft import log_overlap, pysyncobj_patches
from raftsched.raft.lmdb_journal import LmdbJournal

pytestmark = pytest.mark.unit

NOOP = b"\x01"  # pysyncobj's no-op command: no membership change to parse


# ------------------------------------------------------------ the rules, on plain lists of terms


@dataclass
class Follower:
    """A follower's log as terms (``terms[0]`` is index ``first``), its commit index, and what it deleted."""

    terms: list[int]
    first: int = 1
    commit: int = 0
    deleted_from: list[int] = field(default_factory=list)

    def first_index(self) -> int:
        return self.first

    def last_index(self) -> int:
        return self.first + len(self.terms) - 1

    def term_at(self, index: int) -> int:
        return self.terms[index - self.first]


def pysyncobj_reads(f: Follower, message: dict[str, Any]) -> int | None:
    """pysyncobj 0.3.17's follower on an AppendEntries it accepts (``syncobj.py``, ``__onMessageReceived``):
    the index it acknowledges (its ``next_node_idx`` minus one), None when it refuses or answers nothing."""
    answered = None
    if "prevLogIdx" in message:
        prev = message["prevLogIdx"]
        if prev < f.first or prev > f.last_index() or f.term_at(prev) != message["prevLogTerm"]:
            return None
        if prev < f.last_index():  # ``len(prevEntries) > 1``: everything after prev goes
            f.deleted_from.append(prev + 1)
            del f.terms[prev + 1 - f.first :]
        for entry in message["entries"]:
            assert entry[1] == f.last_index() + 1
            f.terms.append(entry[2])
        answered = message["entries"][-1][1] if message["entries"] else prev
    f.commit = min(f.commit, f.last_index())
    if message["commit_index"] > f.commit:
        f.commit = min(message["commit_index"], f.last_index())
    return answered


def raft_receives(
    terms: list[int], first: int, commit: int, prev: int, entries: list[tuple[int, int]], leader_commit: int
) -> tuple[list[int], int, int]:
    """Raft's receiver rules 3-5 (the message passed rules 1-2): the log, the index acknowledged, the commit index."""
    out = list(terms)
    for index, term in entries:
        at = index - first
        if at < len(out) and out[at] != term:
            del out[at:]
        if at >= len(out):
            out.append(term)
    last_new = entries[-1][0] if entries else prev
    return out, last_new, max(commit, min(leader_commit, last_new))  # a commit index never goes back


@st.composite
def overlapping(draw: st.DrawFn) -> tuple[Follower, int, list[tuple[int, int]], int, int]:
    """A follower's log and a leader's message that agree up to some index (Raft's log matching), with the
    leader at a term no lower than any in either log."""
    common = draw(st.lists(st.integers(1, 3), min_size=1, max_size=12).map(sorted))
    top = common[-1]
    mine = draw(st.lists(st.integers(top, top + 2), max_size=8).map(sorted))
    theirs = draw(st.lists(st.integers(top, top + 2), max_size=8).map(sorted))
    if mine and theirs and mine[0] == theirs[0]:  # where they part, the terms differ
        theirs = [t + 3 for t in theirs]
    leader = common + theirs
    follower = Follower(terms=common + mine)
    prev = draw(st.integers(1, len(common)))  # the leader's nextIndex - 1 for this follower: within what matches
    count = draw(st.integers(0, len(leader) - prev))
    entries = [(i, leader[i - 1]) for i in range(prev + 1, prev + count + 1)]
    # a follower applies only what some leader vouched for: never past the common part
    follower.commit = draw(st.integers(0, len(common)))
    leader_commit = draw(st.integers(0, len(common)))
    return follower, prev, entries, leader_commit, max(leader + [1])


def _message(prev: int, prev_term: int, entries: list[tuple[int, int]], commit: int, term: int) -> dict[str, Any]:
    return {"type": "append_entries", "term": term, "commit_index": commit, "prevLogIdx": prev, "prevLogTerm": prev_term,
            "entries": [(NOOP, i, t) for i, t in entries]}  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(overlapping())
def test_trimmed_messages_leave_the_log_raft_would(case: tuple[Follower, int, list[tuple[int, int]], int, int]) -> None:
    f, prev, entries, leader_commit, term = case
    expected_log, expected_ack, expected_commit = raft_receives(f.terms, f.first, f.commit, prev, entries, leader_commit)
    before = list(f.terms)
    message = _message(prev, f.term_at(prev), entries, leader_commit, term)
    vouched = log_overlap.trim(message, f)
    answered = pysyncobj_reads(f, message)
    ack = vouched if vouched is not None else answered
    assert f.terms == expected_log
    assert ack == expected_ack
    assert f.commit == expected_commit
    for start in f.deleted_from:  # deleted only from a conflict: the leader's entry there has another term
        assert start <= len(before) and dict(entries)[start] != before[start - 1]
    assert vouched is None or answered is None  # one answer, never two


def test_pysyncobj_alone_deletes_what_matches() -> None:
    """What the trim is for: the same resend, read by pysyncobj without it, shortens the log."""
    f = Follower(terms=[1] * 10)
    pysyncobj_reads(f, _message(5, 1, [(6, 1), (7, 1)], 10, 1))
    assert f.last_index() == 7 and f.deleted_from == [6]


def test_a_message_pysyncobj_refuses_is_left_as_it_is() -> None:
    f = Follower(terms=[1, 1, 2, 2])
    for message in (_message(3, 1, [(4, 3)], 2, 3),  # a term that does not match at prevLogIdx
                    _message(9, 3, [], 2, 3),  # past the log's end
                    {**_message(2, 1, [(3, 2)], 2, 3), "transmission": "finish"}):  # fmt: skip
        before = dict(message)
        assert log_overlap.trim(message, f) is None
        assert message == before
    late = Follower(terms=[2, 2], first=5)  # prevLogIdx before the log's first entry (compacted into a snapshot)
    message = _message(3, 1, [(4, 1), (5, 2)], 2, 3)
    assert log_overlap.trim(message, late) is None and message["prevLogIdx"] == 3


# ------------------------------------------------------------ a real pysyncobj follower


@pytest.fixture(params=["lmdb", "pysyncobj-memory"])
def follower(tmp_path: Any, request: pytest.FixtureRequest) -> Iterator[tuple[SyncObj, Any, list[dict[str, Any]]]]:
    """A follower on our LMDB log (read through its own bounds) or on pysyncobj's in-memory one (read as
    pysyncobj reads it: ``log_overlap.SyncObjLog``)."""
    pysyncobj_patches.install()
    journal = LmdbJournal(os.path.join(tmp_path, "raft-log"), sync=False) if request.param == "lmdb" else None
    obj = SyncObj("127.0.0.1:1", ["127.0.0.1:2"], SyncObjConf(autoTick=False, journalFile=journal, dynamicMembershipChange=True))
    transport = obj._SyncObj__transport
    sent: list[dict[str, Any]] = []
    transport.send = lambda node, message: sent.append(message) or True  # what it answers, kept
    (leader,) = obj._SyncObj__otherNodes
    try:
        yield obj, lambda message: transport._onMessageReceived(leader, message), sent
    finally:
        obj.destroy()
        if journal is not None:
            journal._destroy()


def _log(obj: SyncObj) -> list[tuple[int, int]]:
    return [(e[1], e[2]) for e in obj._SyncObj__raftLog[0:]]


def test_a_resend_from_an_earlier_index_deletes_nothing(follower: tuple[SyncObj, Any, list[dict[str, Any]]]) -> None:
    obj, receive, sent = follower
    receive(_message(1, 0, [(i, 1) for i in range(2, 11)], 3, 1))
    assert sent[-1] == {"type": "next_node_idx", "next_node_idx": 11, "reset": False, "success": True}
    full = _log(obj)
    assert full[-1] == (10, 1) and obj._SyncObj__raftCommitIndex == 3

    receive(_message(5, 1, [(6, 1), (7, 1)], 10, 1))  # resent from 6 (pysyncobj alone: the log ends at 7)
    assert _log(obj) == full
    assert sent[-1] == {"type": "next_node_idx", "next_node_idx": 8, "reset": False, "success": True}
    assert obj._SyncObj__raftCommitIndex == 7  # the leader vouched for 7, not for what follows
    assert obj._SyncObj__getCurrentLogIndex() == 10  # what this node's votes compare

    receive(_message(4, 1, [], 10, 1))  # a heartbeat from further back
    assert _log(obj) == full and obj._SyncObj__raftCommitIndex == 7
    assert sent[-1]["next_node_idx"] == 5 and sent[-1]["success"]

    receive(_message(7, 1, [(8, 1), (9, 1), (10, 1)], 10, 1))  # up to the log's end: nothing new, nothing lost
    assert _log(obj) == full and obj._SyncObj__raftCommitIndex == 10
    assert sent[-1]["next_node_idx"] == 11 and sent[-1]["success"]


def test_a_conflict_still_deletes_from_where_it_is(follower: tuple[SyncObj, Any, list[dict[str, Any]]]) -> None:
    obj, receive, sent = follower
    receive(_message(1, 0, [(i, 1) for i in range(2, 11)], 3, 1))
    receive(_message(6, 1, [(7, 1), (8, 2), (9, 2)], 3, 2))  # a new leader at term 2 that never had 8-10 of term 1
    assert _log(obj)[-4:] == [(6, 1), (7, 1), (8, 2), (9, 2)]
    assert sent[-1]["next_node_idx"] == 10 and sent[-1]["success"]
    assert obj._SyncObj__raftCurrentTerm == 2

    n = len(sent)
    receive(_message(2, 1, [(3, 1)], 9, 1))  # the old leader, late: refused whole, by term
    assert _log(obj)[-1] == (9, 2) and len(sent) == n


def _pieces(prev: int, prev_term: int, entry: tuple[bytes, int, int], commit: int, term: int) -> list[dict[str, Any]]:
    """A large entry as a leader sends it: pickled, cut in three, each piece an AppendEntries of its own."""
    data = pysyncobj_pickle.dumps(entry)
    cut = len(data) // 3
    parts = [("start", data[:cut]), ("process", data[cut : 2 * cut]), ("finish", data[2 * cut :])]
    return [{"type": "append_entries", "transmission": kind, "data": part, "term": term, "commit_index": commit,
             "prevLogIdx": prev, "prevLogTerm": prev_term} for kind, part in parts]  # fmt: skip


def test_a_large_entry_sent_again_in_pieces_deletes_nothing(follower: tuple[SyncObj, Any, list[dict[str, Any]]]) -> None:
    obj, receive, sent = follower
    big = b"\x00" + b"x" * 300_000  # no membership change, larger than any one message
    receive(_message(1, 0, [(2, 1), (3, 1)], 1, 1))
    for piece in _pieces(3, 1, (big, 4, 1), 1, 1):
        receive(piece)
    receive(_message(4, 1, [(5, 1), (6, 1)], 1, 1))
    full = _log(obj)
    assert full[-3:] == [(4, 1), (5, 1), (6, 1)] and sent[-1]["next_node_idx"] == 7
    assert obj._SyncObj__raftLog[3][0] == big

    for piece in _pieces(3, 1, (big, 4, 1), 6, 1):  # sent again (pysyncobj alone: the log ends at 4)
        receive(piece)
    assert _log(obj) == full
    assert sent[-1] == {"type": "next_node_idx", "next_node_idx": 5, "reset": False, "success": True}
    assert obj._SyncObj__raftCommitIndex == 4


def test_a_large_entry_that_conflicts_still_deletes_from_where_it_is(
    follower: tuple[SyncObj, Any, list[dict[str, Any]]],
) -> None:
    obj, receive, sent = follower
    receive(_message(1, 0, [(i, 1) for i in range(2, 7)], 3, 1))
    big = b"\x00" + b"y" * 300_000
    for piece in _pieces(3, 1, (big, 4, 2), 3, 2):  # a leader of term 2 that never had 4-6 of term 1
        receive(piece)
    assert _log(obj)[-2:] == [(3, 1), (4, 2)] and obj._SyncObj__raftLog[3][0] == big
    assert sent[-1] == {"type": "next_node_idx", "next_node_idx": 5, "reset": False, "success": True}
