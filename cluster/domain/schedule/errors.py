"""The error of a schedule that cannot be accepted."""

from __future__ import annotations

from raftsched.cluster.domain.errors import RaftschedError


class ScheduleError(RaftschedError, ValueError):
    """A schedule that cannot be accepted; the message names the value and what is allowed."""
