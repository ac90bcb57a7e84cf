"""How a task says that its run failed in a particular way: ``NonRetryable`` and ``RetryAfter``.

Raise them from a task (plain or ``async``). Any other exception fails the
attempt as usual: the run is retried with the job's backoff until
``max_attempts``, then it is ``DEAD_LETTER``.

* ``NonRetryable("no such customer")``: no retry can help (bad input, a record
  that does not exist); the run is ``FAILED`` at once, whatever attempts are
  left (as Temporal's ``ApplicationError(non_retryable=True)``).
* ``RetryAfter(30, "rate limited")``: try again, but not before 30 seconds
  from now (a ``timedelta`` or ``"1m"`` works too); the job's own backoff
  still applies when it is longer (as Temporal's ``next_retry_delay``).

Both are carried to the cluster with the attempt's completion
(``CompleteRunRequest.non_retryable`` and ``retry_after``).
"""

from __future__ import annotations

import datetime as dt

from raftsched.cluster.executor.ports import HandlerError
from raftsched.sdk.durations import span_ms


class NonRetryable(HandlerError):
    """The run failed and no retry can help: it is FAILED at once (``message`` becomes its error)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, non_retryable=True)
        self.message = message


class RetryAfter(HandlerError):
    """The attempt failed; the next one must not start before ``seconds`` from now."""

    def __init__(self, seconds: float | dt.timedelta | str, message: str = "") -> None:
        delay_ms = span_ms(seconds, "seconds")
        if delay_ms < 0:
            raise ValueError(f"RetryAfter({seconds!r}): the delay must not be negative")
        self.seconds = delay_ms / 1000
        self.message = message or f"asked to be retried after {self.seconds:g} s"
        super().__init__(self.message, retry_after_s=self.seconds)
