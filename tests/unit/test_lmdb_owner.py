"""A write transaction ends only on the thread that began it (raftsched.storage.disk.lmdb_owner): otherwise the process crashes later.

Each scenario runs in its own process (``tests/lmdb_threads_child.py``): without the guard, the first and the
last end in SIGSEGV the moment the writing thread takes any LMDB writer lock again, and the second leaves the
writer lock held by a thread that believes it has none.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from raftsched.storage.disk.lmdb_owner import WrongThreadError, check_abort, check_commit, thread_alive

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _child(scenario: str, folder: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-m", "tests.lmdb_threads_child", scenario, str(folder)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, f"the child ended with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout.splitlines()


def test_closing_a_store_while_another_thread_is_mid_entry_is_refused_and_the_writer_goes_on(tmp_path: Path) -> None:
    lines = _child("close_while_writing", tmp_path)
    assert lines[0].startswith("main: refused: ") and f"{tmp_path}/state.mdb" in lines[0]
    assert "in the middle of a write transaction" in lines[0]
    assert lines[1:] == ["writer: committed", "writer: wrote to another environment", "main: closed after the writer"]


def test_a_commit_on_another_thread_is_refused_and_the_entry_stays_the_writers(tmp_path: Path) -> None:
    lines = _child("commit_elsewhere", tmp_path)
    assert lines[0].startswith("other: refused: ") and "only that thread may commit" in lines[0]
    assert lines[1:] == ["main: [(b'j1', b'one'), (b'j2', b'two')]"]


def test_a_store_whose_writer_thread_exited_mid_entry_closes_cleanly(tmp_path: Path) -> None:
    assert _child("writer_exited", tmp_path) == ["main: closed", "main: wrote to another environment"]


def test_destroying_the_raft_log_while_the_tick_thread_is_mid_transaction_is_refused(tmp_path: Path) -> None:
    lines = _child("journal_destroyed_elsewhere", tmp_path)
    assert lines[0].startswith("main: refused: ") and f"{tmp_path}/raft.lmdb" in lines[0]
    assert lines[1:] == ["tick: committed", "tick: wrote to another environment", "main: destroyed after the tick thread"]


def test_the_checks_name_the_thread_that_may_end_a_transaction() -> None:
    here = threading.get_ident()
    check_commit(here, "f")
    check_abort(here, "f")
    stop = threading.Event()
    live = threading.Thread(target=stop.wait)
    live.start()
    try:
        assert live.ident is not None and thread_alive(live.ident)
        with pytest.raises(WrongThreadError, match=f"thread {live.ident} is in the middle"):
            check_abort(live.ident, "f")
        with pytest.raises(WrongThreadError, match=f"begun on thread {live.ident}"):
            check_commit(live.ident, "f")
    finally:
        stop.set()
        live.join()
    assert not thread_alive(live.ident)
    check_abort(live.ident, "f")  # an exited thread's locks were released by the kernel: safe
    with pytest.raises(WrongThreadError):
        check_commit(live.ident, "f")  # but a commit is the writer's alone, always
