"""Which thread may end an LMDB write transaction: the one that began it (or any, once that one has exited).

LMDB's writer lock is a robust POSIX mutex in the environment's lock file,
mapped shared. glibc keeps every robust mutex a thread holds in that thread's
robust list, linked through the mutexes themselves. A write transaction ended
on another thread cannot unlock it (``EPERM``, which LMDB ignores): the
mutex stays locked and stays on its owner's list. Once the environment is
closed and the lock file unmapped, the owner's list points into unmapped
memory, and the owner's next lock of any robust mutex — any LMDB
transaction, in any environment — dies with SIGSEGV (seen as a crash in
``lmdb.open``); if another lock file was mapped at that address instead, it
silently writes into that file's mutex. A commit on another thread is worse
still: the writer lock stays held and the next write transaction finds it
owned by a live thread of its own process (``MDB_PANIC``).

A thread that has exited is safe to end for: the kernel walks its robust list
when it exits (marking what it held as owner-dead), so nothing points at the
mutex afterwards.
"""

from __future__ import annotations

import threading

from raftsched.cluster.domain.errors import RaftschedError


class WrongThreadError(RaftschedError, RuntimeError):
    """A write transaction was to be ended on a thread that did not begin it (the message names both)."""


def thread_alive(ident: int) -> bool:
    """Whether the Python thread ``ident`` is still running."""
    return any(t.ident == ident for t in threading.enumerate())


def check_commit(owner: int, path: str) -> None:
    """Raise ``WrongThreadError`` unless the calling thread began the write transaction (thread ``owner``)."""
    here = threading.get_ident()
    if owner != here:
        raise WrongThreadError(
            f"{path}: a write transaction begun on thread {owner} was to be committed on thread {here}; "
            "LMDB's writer lock belongs to the thread that took it, so only that thread may commit"
        )


def check_abort(owner: int, path: str) -> None:
    """Raise ``WrongThreadError`` if thread ``owner`` began the write transaction and is still running elsewhere:
    aborting here would leave its writer lock on that thread's robust list (see the module docstring)."""
    here = threading.get_ident()
    if owner != here and thread_alive(owner):
        raise WrongThreadError(
            f"{path}: thread {owner} is in the middle of a write transaction; it cannot be ended on thread {here} "
            "(stop the writing thread first, or end the transaction on it)"
        )
