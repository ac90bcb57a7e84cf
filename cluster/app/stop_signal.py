"""SIGTERM/SIGINT for the long-running commands (`raftsched node`, `raftsched executor`).

CPython runs a signal's Python handler only in the main thread, and only
when that thread executes bytecode. The kernel may deliver a process's
SIGTERM to any of its threads (gRPC's, the workers'); a main thread asleep in
a plain ``Event.wait()`` is then never woken, and the process ignores the
signal until something else disturbs it (seen here: an executor that sat
through SIGTERM for minutes). Waiting in short slices lets the main thread
notice the signal within ``POLL_S`` whichever thread received it.
"""

from __future__ import annotations

import signal
import threading

POLL_S = 0.2


class StopSignal:
    """Install at start (before any work, so an early SIGTERM is not lost); ``wait()`` returns once it came."""

    def __init__(self) -> None:
        self._event = threading.Event()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        self._event.set()

    def stop(self) -> None:
        """Stop as a signal would (a node removed from its cluster stops itself)."""
        self._event.set()

    def wait(self) -> None:
        while not self._event.wait(POLL_S):
            pass
