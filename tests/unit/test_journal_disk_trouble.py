"""The LMDB Raft log under a disk that refuses a commit (an I/O error, a full map; a full disk is in
tests/integration/test_full_disk_stores.py): nothing it committed is lost, nothing it did not commit counts as
durable, it never retries in place, it tries again from the changes it recorded after ``RETRY_EVERY_S``, and the
file reopens holding exactly what was committed. The pysyncobj patches then send nothing that depends on the log."""

from __future__ import annotations

import errno
import time
from types import SimpleNamespace
from typing import Any

import lmdb
import pytest

from raftsched.raft import disk_trouble, pysyncobj_patches
from raftsched.raft.lmdb_journal import LmdbJournal

pytestmark = pytest.mark.unit

EIO = lmdb.Error("mdb_txn_commit: Input/output error")


class FailingTxn:
    """A write transaction whose commit fails (LMDB aborts a commit it cannot write; so does this)."""

    def __init__(self, txn: Any, env: "FailingEnv") -> None:
        self._txn, self._env = txn, env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._txn, name)

    def commit(self) -> None:
        if self._env.failures:
            self._env.failures -= 1
            self._txn.abort()
            raise self._env.error
        self._env.commits += 1
        self._txn.commit()


class FailingEnv:
    """An LMDB environment whose next ``failures`` write commits fail with ``error``."""

    def __init__(self, env: Any, failures: int, error: Exception) -> None:
        self._env, self.failures, self.error, self.commits = env, failures, error, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def begin(self, write: bool = False, **kw: Any) -> Any:
        txn = self._env.begin(write=write, **kw)
        return FailingTxn(txn, self) if write else txn


def _failing(journal: LmdbJournal, failures: int, error: Exception, monkeypatch: pytest.MonkeyPatch) -> list[FailingEnv]:
    """Make ``journal``'s commits fail ``failures`` times, also in every environment it opens again."""
    shared = {"failures": failures}
    envs: list[FailingEnv] = []
    real_open = journal._open_env

    def wrap(env: Any) -> FailingEnv:
        wrapped = FailingEnv(env, shared["failures"], error)
        envs.append(wrapped)
        return wrapped

    def open_again() -> Any:
        shared["failures"] = envs[-1].failures if envs else failures
        return wrap(real_open())

    journal._env = wrap(journal._env)
    monkeypatch.setattr(journal, "_open_env", open_again)
    return envs


def _entries(journal: LmdbJournal) -> list[tuple[bytes, int, int]]:
    return list(journal[0:])


def _journal(tmp_path: Any) -> tuple[LmdbJournal, list[str | None]]:
    journal = LmdbJournal(str(tmp_path / "raft.lmdb"))
    journal.bind_thread()  # as pysyncobj's tick thread: changes wait for commit
    heard: list[str | None] = []
    journal.on_trouble = heard.append
    return journal, heard


def _fast_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(disk_trouble, "RETRY_EVERY_S", 0.2)


def test_an_io_error_keeps_the_changes_reopens_checks_and_retries_later(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _fast_retry(monkeypatch)
    journal, heard = _journal(tmp_path)
    for i in range(1, 4):
        journal.add(b"acked-%d" % i, i, 1)
    journal.commit()  # entries 1-3 are on disk: they may be acknowledged
    envs = _failing(journal, 2, EIO, monkeypatch)
    journal.add(b"not yet", 4, 1)
    journal.setCurrentTerm(2, "n2")
    journal.commit()
    assert not journal.durable and len(heard) == 1
    assert heard[0] is not None and heard[0].startswith(f"disk failing: {tmp_path / 'raft.lmdb'}: ")
    assert "Input/output error" in heard[0] and "resumes by itself" in heard[0]
    assert len(envs) == 2, "the environment is opened again after a failed commit"
    assert _entries(journal)[-1] == (b"not yet", 4, 1) and journal.getCurrentTerm() == 2  # pysyncobj reads on
    journal.add(b"later", 5, 2)  # and writes on, into the redone transaction
    journal.commit()  # too soon: not tried
    assert envs[-1].failures == 1 and not journal.durable
    time.sleep(0.25)
    journal.commit()  # tried: fails again, same words, no second report
    assert not journal.durable and len(heard) == 1
    time.sleep(0.25)
    journal.commit()
    assert journal.durable and heard[-1] is None and envs[-1].commits == 1
    journal._destroy()
    again = LmdbJournal(str(tmp_path / "raft.lmdb"))
    assert [e[1] for e in _entries(again)] == [1, 2, 3, 4, 5]
    assert again.getCurrentTerm() == 2 and again.getVotedForNodeId() == "n2"
    again._destroy()


def test_what_a_failed_commit_held_is_not_on_disk_after_a_crash(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    journal, _ = _journal(tmp_path)
    journal.add(b"acked", 1, 1)
    journal.commit()
    _failing(journal, 100, EIO, monkeypatch)
    journal.add(b"never committed", 2, 1)
    journal.commit()
    assert not journal.durable
    journal._destroy()  # the process ends before the disk takes it
    again = LmdbJournal(str(tmp_path / "raft.lmdb"))
    assert _entries(again) == [(b"acked", 1, 1)]
    again._destroy()


def test_a_full_map_at_commit_refuses_proposals_until_compaction_frees_room(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _fast_retry(monkeypatch)
    journal, heard = _journal(tmp_path)
    for i in range(1, 6):
        journal.add(b"x" * 100, i, 1)
    journal.commit()
    envs = _failing(journal, 1, lmdb.MapFullError("mdb_txn_commit: MDB_MAP_FULL"), monkeypatch)
    journal.add(b"y", 6, 1)
    journal.commit()
    assert not journal.durable and not journal.has_room(1) and len(envs) == 1  # not opened again for a full map
    assert heard[0] is not None and heard[0].startswith(f"disk full: {tmp_path / 'raft.lmdb'} (its LMDB map")
    assert "[raft] max_log_bytes" in heard[0]
    journal.deleteEntriesTo(4)  # a snapshot compacts the log
    time.sleep(0.25)
    journal.commit()
    assert journal.durable and journal.has_room(1) and heard[-1] is None
    journal._destroy()
    again = LmdbJournal(str(tmp_path / "raft.lmdb"))
    assert [e[1] for e in _entries(again)] == [5, 6]
    again._destroy()


def test_a_log_that_is_not_the_one_committed_after_a_failed_write_is_refused(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from raftsched.raft.lmdb_journal import JournalError

    journal, _ = _journal(tmp_path)
    journal.add(b"a", 1, 1)
    journal.commit()
    _failing(journal, 1, EIO, monkeypatch)
    journal._committed = (1, 3)  # as if entry 2 had been committed and the file lost it
    journal.add(b"b", 2, 1)
    with pytest.raises(JournalError, match="damaged"):
        journal.commit()
    journal._destroy()


def test_a_failed_commit_while_the_log_is_opened_refuses_to_start(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from raftsched.raft.lmdb_journal import JournalError

    real = lmdb.open

    def failing_open(*args: Any, **kw: Any) -> Any:
        return FailingEnv(real(*args, **kw), 1, EIO)

    monkeypatch.setattr(lmdb, "open", failing_open)
    with pytest.raises(JournalError, match=r"cannot write the Raft log .*disk failing"):
        LmdbJournal(str(tmp_path / "raft.lmdb"))  # a new log writes its metadata at once
    monkeypatch.setattr(lmdb, "open", real)
    journal = LmdbJournal(str(tmp_path / "raft.lmdb"))  # nothing was left open or half written
    assert len(journal) == 0
    journal._destroy()


def test_words_full_or_failing_by_the_space_left(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "state.mdb")
    assert disk_trouble.describe(path, OSError(errno.ENOSPC, "No space left on device")).startswith(f"disk full: {path} (")
    monkeypatch.setattr(disk_trouble, "free_bytes", lambda _p: 1 << 40)
    failing = disk_trouble.describe(path, EIO)
    assert failing.startswith(f"disk failing: {path}: mdb_txn_commit: Input/output error: check the disk")
    monkeypatch.setattr(disk_trouble, "free_bytes", lambda _p: 1 << 20)
    assert disk_trouble.describe(path, EIO).startswith(f"disk full: {path} (1.0 MiB free): free space on its disk or grow it")


# ---------------------------------------------------------------- what leaves the node meanwhile


class Transport:
    def __init__(self, journal: LmdbJournal) -> None:
        self._syncObj = SimpleNamespace(conf=SimpleNamespace(journalFile=journal))
        self._raftsched_probes = None
        self._connections: dict[Any, Any] = {}


def test_nothing_that_depends_on_the_log_leaves_while_it_is_not_durable(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sent: list[str] = []
    received: list[str] = []
    monkeypatch.setattr(pysyncobj_patches, "_ORIGINAL_SEND", lambda _t, _n, m: sent.append(m["type"]) or True)
    monkeypatch.setattr(pysyncobj_patches, "_ORIGINAL_ON_MESSAGE", lambda _t, _n, m: received.append(m["type"]))
    journal, _ = _journal(tmp_path)
    transport = Transport(journal)
    _failing(journal, 100, EIO, monkeypatch)
    journal.setCurrentTerm(3, "n1")  # a vote to be sent
    kinds = ["response_vote", "request_vote", "append_entries", "next_node_idx", "timeout_now"]
    answers = [pysyncobj_patches._send(transport, "n2", {"type": kind}) for kind in kinds]
    assert answers == [False] * len(kinds) and sent == []
    for kind in ("apply_command", "apply_command_response"):  # promise nothing about this node's log
        assert pysyncobj_patches._send(transport, "n2", {"type": kind})
    pysyncobj_patches._on_message(transport, "n2", {"type": "append_entries", "entries": [(b"x", 9, 3)]})
    pysyncobj_patches._on_message(transport, "n2", {"type": "request_vote"})
    assert sent == ["apply_command", "apply_command_response"]
    assert received == ["append_entries", "request_vote"]  # taken, in memory: only answers wait for the disk
    journal.add(b"x" * 100, 1, 3)
    monkeypatch.setattr(pysyncobj_patches, "UNWRITTEN_MAX", 50)  # past it, the leader's entries are not taken
    pysyncobj_patches._on_message(transport, "n2", {"type": "append_entries", "entries": [(b"y", 2, 3)]})
    assert received == ["append_entries", "request_vote"]
    journal._destroy()


def test_a_map_too_full_for_the_leaders_entries_is_a_problem_until_compaction(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from raftsched.raft.lmdb_journal import LogFullError

    journal = LmdbJournal(str(tmp_path / "raft.lmdb"), map_size=2 << 20)
    journal.bind_thread()
    heard: list[str | None] = []
    journal.on_trouble = heard.append
    index = 0
    try:
        with pytest.raises(LogFullError):
            for index in range(1, 1000):  # a follower appends what its leader sends (no has_room check)
                journal.add(b"z" * 50_000, index, 1)
                journal.commit()
    except BaseException:
        journal._destroy()
        raise
    assert (
        journal.durable and len(heard) == 1 and (heard[0] or "").startswith(f"disk full: {tmp_path / 'raft.lmdb'} (its LMDB map")
    )
    journal.deleteEntriesTo(index - 2)  # a snapshot compacts the log
    journal.commit()
    assert heard[-1] is None and journal.problem is None
    journal._destroy()
