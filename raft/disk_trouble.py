"""A disk that refuses writes, in words people act on, and the record of it one replica keeps.

Who calls: the Raft log (``raftsched.raft.lmdb_journal``) when a commit fails, the
state machine's store (through ``raftsched.raft.adapter``) when an entry cannot be
stored, and ``raftsched.raft.adapter.RaftNode``, which keeps one ``DiskTrouble`` per
replica and tells the layer above (``RaftNode.on_storage``). Everything runs
on the tick thread except ``DiskTrouble.problem``, which any thread may call.

``describe`` words a failure the way the node's health says it:
``disk full: <path> ...`` when the filesystem holding ``path`` is (nearly)
out of space or the error is ENOSPC/EDQUOT, ``disk failing: <path>: <error>
...`` otherwise. LMDB reports a write the filesystem cut short (which is how
ENOSPC reaches it while it flushes pages) as an I/O error, so the free space
decides, not the error's text. Each says what to do, and that the node
resumes by itself: the writer tries again every ``RETRY_EVERY_S``.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from typing import Callable

log = logging.getLogger("raftsched.raft")

#: how often a write the disk refused is tried again (seconds)
RETRY_EVERY_S = 1.0
#: a filesystem with less free space than this (bytes) counts as full whatever the error said
FULL_BELOW = 16 << 20
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_MIB = 1 << 20


def free_bytes(path: str) -> int | None:
    """Bytes free to this process on the filesystem holding ``path`` (or its nearest existing parent); None if unknown."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    try:
        st = os.statvfs(probe)
    except OSError:
        return None
    return int(st.f_bavail * st.f_frsize)


def is_full(path: str, exc: BaseException | None = None) -> bool:
    """Whether a write to ``path`` that failed with ``exc`` failed for want of space."""
    if getattr(exc, "errno", None) in _FULL_ERRNOS:
        return True
    free = free_bytes(path)
    return free is not None and free < FULL_BELOW


def describe(path: str, exc: BaseException) -> str:
    """``disk full: <path> ...`` or ``disk failing: <path>: <error> ...`` for a write to ``path`` that raised ``exc``."""
    if is_full(path, exc):
        return full_words(path)
    return (
        f"disk failing: {path}: {_error_text(exc)}: check the disk (the kernel log, its SMART data); "
        f"the node tries again every {RETRY_EVERY_S:g} s and resumes by itself once it can write"
    )


def full_words(path: str, detail: str = "", advice: str = "") -> str:
    """``disk full: <path>`` with the free space left (or ``detail``) and what to do (``advice``, else: free space)."""
    if not detail:
        free = free_bytes(path)
        detail = "" if free is None else f"{free / _MIB:.1f} MiB free"
    told = f" ({detail})" if detail else ""
    return f"disk full: {path}{told}: {advice or 'free space on its disk or grow it; the node resumes by itself'}"


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


#: what a replica writes: its Raft log and its state
LOG, STATE = "log", "state"


class DiskTrouble:
    """What keeps one replica from writing, by part (``LOG``, ``STATE``), and one hook told of every change
    (``problem``'s words, or None once every part writes again)."""

    def __init__(self) -> None:
        self._parts: dict[str, str] = {}
        self._hook: Callable[[str | None], None] = lambda _problem: None
        self._lock = threading.Lock()

    def set(self, part: str, problem: str | None) -> None:
        """``part``'s problem now (None: it writes again)."""
        with self._lock:
            before = self._parts.get(part)
            if problem == before:
                return
            parts = dict(self._parts)
            if problem is None:
                parts.pop(part, None)
            else:
                parts[part] = problem
            self._parts = parts
            hook = self._hook
        if problem is None:
            log.warning("the %s writes again (was: %s)", _NAMES.get(part, part), before)
        else:
            log.error("the %s cannot be written: %s", _NAMES.get(part, part), problem)
        hook(self.problem())

    def problem(self) -> str | None:
        """Every part's problem in words (any thread); None when all of them write."""
        parts = self._parts
        return "; ".join(parts[p] for p in sorted(parts)) if parts else None

    def has(self, part: str) -> bool:
        return part in self._parts

    def on_change(self, hook: Callable[[str | None], None]) -> None:
        """Call ``hook(problem)`` now and after every change (on the thread that made it; keep it short)."""
        with self._lock:
            self._hook = hook
        hook(self.problem())


_NAMES = {LOG: "Raft log", STATE: "state"}
