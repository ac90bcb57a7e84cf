"""Counted slots for long-lived calls (WatchRuns streams, AcquireLease long polls) on one node.

Each such call holds a server thread while it waits; the node caps how many
may wait at once (``[limits]``) so that unary calls always find a thread.
Over the cap the call is refused at once with ``Overloaded``
(RESOURCE_EXHAUSTED) naming the limit.
"""

from __future__ import annotations

import threading
from typing import Callable

from raftsched.cluster.domain.errors import Overloaded


class Slots:
    """A count of open streams, refused over ``limit`` (RESOURCE_EXHAUSTED naming ``name``)."""

    def __init__(self, limit: int, name: str, what: str) -> None:
        self.limit = limit
        self._name = name
        self._what = what
        self._open = 0
        self._lock = threading.Lock()

    @property
    def open(self) -> int:
        return self._open

    def take(self) -> Callable[[], None]:
        """Take a slot; the answer gives it back (calling it again does nothing)."""
        with self._lock:
            if self._open >= self.limit:
                raise Overloaded(
                    f"this node has {self._open} open {self._what}, its limit [limits] {self._name} = {self.limit}: "
                    "end one, use another node, or raise the limit"
                )
            self._open += 1
        given = threading.Event()

        def give() -> None:
            with self._lock:
                if not given.is_set():
                    given.set()
                    self._open -= 1

        return give
