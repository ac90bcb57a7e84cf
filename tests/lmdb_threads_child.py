"""A child process for ``tests/unit/test_lmdb_owner.py``: one scenario of a write transaction and two threads.

``python -m tests.lmdb_threads_child <scenario> <dir>`` prints what happened, one line per step, and exits 0;
a crash (SIGSEGV) or a hang is what the guard in ``raft.lmdb_owner`` exists to prevent.
"""

from __future__ import annotations

import sys
import threading

import lmdb

from cluster.domain.state_store import Table
from raft.lmdb_journal import LmdbJournal
from raft.lmdb_owner import WrongThreadError
from storage.lmdb_state import LmdbStateStore


def _lock_another(folder: str) -> None:
    """A write transaction in another environment, on the calling thread: it takes a robust mutex (the writer lock).
    Its lock file is smaller than the store's (126 readers, not 512), so it is not mapped where that one was."""
    env = lmdb.open(f"{folder}/other.mdb", subdir=False, map_size=1 << 20)
    with env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    env.close()


def close_while_writing(folder: str) -> None:
    store = LmdbStateStore(f"{folder}/state.mdb", 64 << 20)
    began, go = threading.Event(), threading.Event()

    def writer() -> None:
        store.put(Table.JOBS, b"j1", b"one")  # the entry's write transaction begins on this thread
        began.set()
        go.wait()
        try:
            store.commit()
            print("writer: committed", flush=True)
        except lmdb.Error as exc:
            print(f"writer: commit failed: {exc}", flush=True)
        _lock_another(folder)
        print("writer: wrote to another environment", flush=True)

    thread = threading.Thread(target=writer)
    thread.start()
    began.wait()
    try:
        store.close()
        print("main: closed", flush=True)
    except WrongThreadError as exc:
        print(f"main: refused: {exc}", flush=True)
    go.set()
    thread.join()
    store.close()
    print("main: closed after the writer", flush=True)


def commit_elsewhere(folder: str) -> None:
    store = LmdbStateStore(f"{folder}/state.mdb", 64 << 20)
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
    store = LmdbStateStore(f"{folder}/state.mdb", 64 << 20)
    thread = threading.Thread(target=lambda: store.put(Table.JOBS, b"j1", b"one"))  # exits mid-entry
    thread.start()
    thread.join()
    store.close()
    print("main: closed", flush=True)
    _lock_another(folder)
    print("main: wrote to another environment", flush=True)


def journal_destroyed_elsewhere(folder: str) -> None:
    journal = LmdbJournal(f"{folder}/raft.lmdb")
    began, go = threading.Event(), threading.Event()

    def tick() -> None:
        journal.bind_thread()
        journal.add(b"entry", 1, 1)  # grouped until commit, in a transaction of this thread's
        began.set()
        go.wait()
        try:
            journal.commit()
            print("tick: committed", flush=True)
        except lmdb.Error as exc:
            print(f"tick: commit failed: {exc}", flush=True)
        _lock_another(folder)
        print("tick: wrote to another environment", flush=True)

    thread = threading.Thread(target=tick)
    thread.start()
    began.wait()
    try:
        journal._destroy()
        print("main: destroyed", flush=True)
    except WrongThreadError as exc:
        print(f"main: refused: {exc}", flush=True)
    go.set()
    thread.join()
    journal._destroy()
    print("main: destroyed after the tick thread", flush=True)


SCENARIOS = {f.__name__: f for f in (close_while_writing, commit_elsewhere, writer_exited, journal_destroyed_elsewhere)}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](sys.argv[2])
