"""Every LMDB environment a test opens in this process (a state store, a Raft log) is closed by that test.

One left open is closed later by the garbage collector, on whichever thread
happens to run it, and that can end the test process with SIGSEGV (a write
transaction ended on a thread that did not begin it: ``raftsched.storage.disk.lmdb_owner``);
its ``Writeback`` thread also runs on for the rest of the session. So
``tests/conftest.py``'s ``lmdb_closed`` fixture closes what a test left open,
on the test's own thread, and fails the test naming it.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from raftsched.raft.lmdb_journal import LmdbJournal
from raftsched.storage.lmdb_state import LmdbTableStore

#: what is open now: id -> (the file, the object, how to close it)
_open: dict[int, tuple[str, Any, Callable[[], None]]] = {}


def _tracked(cls: type, opens: str, closes: str, close_at_end: str, path_of: Callable[[Any], str]) -> None:
    """Record an object of ``cls`` as open after its method ``opens`` and as closed after ``closes``."""
    opener, closer = getattr(cls, opens), getattr(cls, closes)

    @functools.wraps(opener)
    def opened(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = opener(self, *args, **kwargs)
        _open[id(self)] = (path_of(self), self, getattr(self, close_at_end))
        return result

    @functools.wraps(closer)
    def closed(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = closer(self, *args, **kwargs)
        _open.pop(id(self), None)
        return result

    setattr(cls, opens, opened)
    setattr(cls, closes, closed)


def install() -> None:
    """Track the state stores and Raft logs this process opens (once). A state store's environment is open from
    ``_open`` to ``_close_env`` (a test's simulated crash calls only the latter); an install reopens it."""
    if getattr(LmdbTableStore, "_leak_tracked", False):
        return
    _tracked(LmdbTableStore, "_open", "_close_env", "close", lambda s: s.path)
    _tracked(LmdbJournal, "__init__", "_destroy", "_destroy", lambda j: j._path)
    LmdbTableStore._leak_tracked = True  # type: ignore[attr-defined]


def open_now() -> set[int]:
    return set(_open)


def close_new(before: set[int]) -> list[str]:
    """Close (on this thread) what was opened since ``before`` and is still open; the files, for the message."""
    left = [key for key in _open if key not in before]
    paths = []
    for key in left:
        path, _obj, close = _open[key]
        paths.append(path)
        try:
            close()
        finally:
            _open.pop(key, None)
    return paths
