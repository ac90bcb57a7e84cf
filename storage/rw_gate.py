"""A readers-writer gate: many readers at once, or one writer; a waiting writer stops new readers.

Guards the state environment's handle (``raftsched.storage.lmdb_state``): every read
transaction runs inside ``shared()``; replacing the environment (an
installed snapshot) runs inside ``exclusive()``, once the reads that began
before it have ended. Reads are short (a page of a list, one record), so the
writer waits at most one of them.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator


class RWGate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting = 0
        self._mine = threading.local()

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        if getattr(self._mine, "depth", 0):  # a reader inside another read on this thread: already in
            yield
            return
        with self._cond:
            while self._writer or self._waiting:
                self._cond.wait()
            self._readers += 1
        self._mine.depth = 1
        try:
            yield
        finally:
            self._mine.depth = 0
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            try:
                while self._writer or self._readers:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()
