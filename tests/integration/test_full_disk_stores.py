"""The Raft log and the state environment on a real disk that fills (a small tmpfs): a commit the disk refuses
is reported as ``disk full: <path>``, never acknowledged and never lost from memory, tried again from the
changes it recorded once room returns, and the files reopen holding exactly what was committed: all of it
after the retry, only what was committed before the disk filled if the process ends first."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from raftsched.cluster.fsm.store import StoreFailure, Table
from raftsched.raft import disk_trouble
from raftsched.raft.lmdb_journal import LmdbJournal
from raftsched.storage.lmdb_state import LmdbTableStore
from tests import tmpfs

pytestmark = pytest.mark.integration

SIZE = 4 << 20
ENTRY = b"e" * 60_000


@pytest.fixture()
def disk(tmp_path: Path) -> Iterator[str]:
    with tmpfs.mounted(str(tmp_path / "disk"), SIZE) as path:
        yield path


def _fill_the_log(journal: LmdbJournal) -> int:
    """Append and commit entries until a commit fails; the last index committed (acknowledgeable)."""
    committed = 0
    for index in range(1, 1000):
        journal.add(ENTRY, index, 1)
        journal.commit()
        if not journal.durable:
            return committed
        committed = index
    raise AssertionError("the disk never filled")


def test_a_full_disk_stops_the_log_until_room_returns_then_everything_is_committed(disk: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(disk_trouble, "RETRY_EVERY_S", 0.2)
    path = os.path.join(disk, "raft.lmdb")
    journal = LmdbJournal(path)
    journal.bind_thread()
    heard: list[str | None] = []
    journal.on_trouble = heard.append
    tmpfs.fill(disk, leave=600_000)
    acked = _fill_the_log(journal)
    assert acked > 3 and len(heard) == 1 and (heard[0] or "").startswith(f"disk full: {path} (")
    assert "free space on its disk or grow it; the node resumes by itself" in (heard[0] or "")
    journal.add(b"after", acked + 2, 1)  # pysyncobj goes on reading and writing the log in memory
    journal.commit()
    assert not journal.durable and journal[-1] == (b"after", acked + 2, 1) and len(journal) == acked + 2
    os.unlink(os.path.join(disk, tmpfs.FILLER))  # room returns
    time.sleep(0.25)
    journal.commit()
    assert journal.durable and heard[-1] is None
    journal._destroy()
    again = LmdbJournal(path)
    assert [e[1] for e in again[0:]] == list(range(1, acked + 3)) and again[0:][-1][0] == b"after"
    again._destroy()


def test_a_process_that_ends_while_the_disk_is_full_keeps_exactly_what_was_committed(disk: str) -> None:
    path = os.path.join(disk, "raft.lmdb")
    journal = LmdbJournal(path)
    journal.bind_thread()
    journal.setCurrentTerm(7, "n1")
    journal.commit()
    tmpfs.fill(disk, leave=600_000)
    acked = _fill_the_log(journal)
    journal.setCurrentTerm(8, "n3")  # a vote never written: never sent either
    journal._destroy()
    tmpfs.grow(disk, SIZE * 2)  # room to open it again
    again = LmdbJournal(path)
    assert [e[1] for e in again[0:]] == list(range(1, acked + 1))
    assert (again.getCurrentTerm(), again.getVotedForNodeId()) == (7, "n1")
    again._destroy()


def _read_elsewhere(store: LmdbTableStore, key: bytes) -> bytes | None:
    seen: list[bytes | None] = []
    thread = threading.Thread(target=lambda: seen.append(store.get(Table.RUNS, key)))
    thread.start()
    thread.join()
    return seen[0]


def test_a_full_disk_holds_the_state_commit_until_room_returns(disk: str) -> None:
    path = os.path.join(disk, "state.mdb")
    store = LmdbTableStore(path, 64 << 20)
    tmpfs.fill(disk, leave=300_000)
    committed = 0
    with pytest.raises(StoreFailure) as err:
        for batch in range(1, 1000):
            for k in range(10):
                store.put(Table.RUNS, b"r%04d-%d" % (batch, k), os.urandom(3000))
            store.commit()
            committed = batch
    failure = err.value
    assert committed > 3 and failure.kept and failure.storage_problem.startswith(f"disk full: {path} (")
    assert _read_elsewhere(store, b"r%04d-0" % (committed + 1)) is None  # readers keep the last commit
    assert _read_elsewhere(store, b"r%04d-0" % committed) is not None
    with pytest.raises(StoreFailure):
        store.commit()  # still full: refused again, still kept
    os.unlink(os.path.join(disk, tmpfs.FILLER))
    store.commit()  # the same writes, in a fresh transaction
    assert _read_elsewhere(store, b"r%04d-9" % (committed + 1)) is not None
    store.close()
    again = LmdbTableStore(path, 64 << 20)
    assert again.count(Table.RUNS) == 10 * (committed + 1)
    again.close()
