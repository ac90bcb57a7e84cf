"""One warning line per few seconds for a failure that repeats (the cluster cannot be reached).

Several threads of an executor (its acquirers, its renewer) fail together when
no node answers; each asking to warn would print the same news in pairs, every
try. ``QuietWarning.warn`` logs the first failure of a span of ``every_s``
seconds and counts the rest, which the next line mentions; ``ok()`` ends the
failing spell, so the next failure is told at once.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

#: the span in which one line is logged for a repeating failure
WARN_EVERY_S = 5.0


class QuietWarning:
    """Rate-limits one kind of warning, across threads."""

    def __init__(self, log: logging.Logger, every_s: float = WARN_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._log = log
        self._every_s = every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: float | None = None  # when the last line was logged; None: not failing
        self._quiet = 0  # failures since that line that were not logged

    def warn(self, message: str, *args: object) -> bool:
        """Log ``message % args`` unless a line was logged less than ``every_s`` ago; whether it was logged."""
        with self._lock:
            now = self._clock()
            if self._last is not None and now - self._last < self._every_s:
                self._quiet += 1
                return False
            quiet, self._quiet, self._last = self._quiet, 0, now
        if quiet:
            message += " (%d more failures since the last line)"
            args = (*args, quiet)
        self._log.warning(message, *args)
        return True

    def ok(self) -> None:
        """The failure is over: the next one is logged at once."""
        with self._lock:
            self._last, self._quiet = None, 0
