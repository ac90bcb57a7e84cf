"""A child process for ``tests/unit/test_lmdb_owner.py``: one scenario of a write transaction and two threads.

``python -m tests.lmdb_threads_child <scenario> <dir>`` prints what happened, one line per step, and exits 0;
a crash (SIGSEGV) or a hang is what the guard in ``raftsched.storage.disk.lmdb_owner`` exists to prevent.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable

import lmdb

from raftsched.cluster.fsm.store import Table
from raftsched.raft.lmdb_journal import LmdbJournal
from raftsched.storage.disk.lmdb_owner import WrongThreadError
from raftsched.storage.lmdb_state import LmdbTableStore


def _lock_another(folder: str) -> None:
    """A write transaction in another environment, on the calling thread: it takes a robust mutex (the writer lock).
    Its lock file is smaller than the store's (126 readers, not 512), so it is not mapped where that one was."""
    env = lmdb.open(f"{folder}/other.mdb", subdir=False, map_size=1 << 20)
    with env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    env.close()


def _closed_while_another_thread_writes(
    folder: str, begin: Callable[[], None], commit: Callable[[], None], close: Callable[[], None], names: tuple[str, str, str]
) -> None:
    """A thread begins a write transaction (``begin``) and waits; the main thread tries ``close``; then the thread
    commits and takes another writer lock, and the main thread closes again. ``names``: the writing thread's name,
    what closing is called, and who the main thread waited for."""
    writer, closed, waited_for = names
    began, go = threading.Event(), threading.Event()

    def write() -> None:
        begin()
        began.set()
        go.wait()
        try:
            commit()
            print(f"{writer}: committed", flush=True)
        except lmdb.Error as exc:
            print(f"{writer}: commit failed: {exc}", flush=True)
        _lock_another(folder)
        print(f"{writer}: wrote to another environment", flush=True)

    thread = threading.Thread(target=write)
    thread.start()
    began.wait()
    try:
        close()
        print(f"main: {closed}", flush=True)
    except WrongThreadError as exc:
        print(f"main: refused: {exc}", flush=True)
    go.set()
    thread.join()
    close()
    print(f"main: {closed} after the {waited_for}", flush=True)


def close_while_writing(folder: str) -> None:
    store = LmdbTableStore(f"{folder}/state.mdb", 64 << 20)
    # the entry's write transaction begins on the writing thread
    _closed_while_another_thread_writes(
        folder, lambda: store.put(Table.JOBS, b"j1", b"one"), store.commit, store.close, ("writer", "closed", "writer")
    )


def commit_elsewhere(folder: str) -> None:
    store = LmdbTableStore(f"{folder}/state.mdb", 64 << 20)
    store.put(Table.JOBS, b"j1", b"one")

    def other() -> None:
        try:
            store.commit()
            print("other: committed", flush=True)
        except WrongThreadError as exc:
            print(f"other: refused: {exc}", flush=True)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    store.commit()
    store.put(Table.JOBS, b"j2", b"two")  # the next entry takes the writer lock again
    store.commit()
    print(f"main: {store.scan(Table.JOBS)}", flush=True)
    store.close()


def writer_exited(folder: str) -> None:
    store = LmdbTableStore(f"{folder}/state.mdb", 64 << 20)
    thread = threading.Thread(target=lambda: store.put(Table.JOBS, b"j1", b"one"))  # exits mid-entry
    thread.start()
    thread.join()
    store.close()
    print("main: closed", flush=True)
    _lock_another(folder)
    print("main: wrote to another environment", flush=True)


def journal_destroyed_elsewhere(folder: str) -> None:
    journal = LmdbJournal(f"{folder}/raft.lmdb")

    def begin() -> None:
        journal.bind_thread()
        journal.add(b"entry", 1, 1)  # grouped until commit, in a transaction of this thread's

    _closed_while_another_thread_writes(folder, begin, journal.commit, journal._destroy, ("tick", "destroyed", "tick thread"))


SCENARIOS = {f.__name__: f for f in (close_while_writing, commit_elsewhere, writer_exited, journal_destroyed_elsewhere)}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](sys.argv[2])
