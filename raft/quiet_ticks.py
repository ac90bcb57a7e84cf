"""A replica with nothing to do ticks every 25 ms instead of every 5 ms, and a proposal wakes it at once.

pysyncobj's tick thread runs a tick, then waits for the network for ``autoTickPeriod`` (5 ms here) at most: a
proposal from another thread waits in its queue for the next tick, so the wait must be short. Idle, those
200 ticks a second were most of what a node spent (300-450 µs of CPU each on a small machine: the tick's
checks, the transport's, the probes' and the log's).

``QuietTicks`` (a mixin of the replica, before ``SyncObj``) lengthens the wait to ``QUIET_WAIT_S`` when the
tick leaves nothing to do: every committed entry applied, no proposal waiting, and either a follower, or a
leader whose log is quiet (``raftsched.raft.heartbeats``). A message from a peer ends the wait as before, and a
proposal made meanwhile wakes the thread through pysyncobj's own ``PipeNotifier``. Everything else the tick
looks at runs on timers of half a second or more (elections, reconnects, probes, dropping silent connections,
retries of a refused disk), which a 25 ms wait delays by at most that.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from pysyncobj import SyncObj
from pysyncobj.monotonic import monotonic
from pysyncobj.pipe_notifier import PipeNotifier
from pysyncobj.syncobj import _RAFT_STATE

from raftsched.raft.heartbeats import quiet

#: how long a tick with nothing left to do waits for the network (seconds)
QUIET_WAIT_S = 0.025


class QuietTicks:
    """Mixin for ``SyncObj`` (see the module docstring). ``_quiet_wait``: seconds a tick with nothing to do waits."""

    _quiet_wait: float = QUIET_WAIT_S
    _notifier: PipeNotifier | None = None
    #: set by the tick thread while it may wait long: a proposal made meanwhile must wake it
    _may_wait_long: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._wake_lock = threading.Lock()
        super().__init__(*args, **kwargs)
        replica: Any = self
        poller = replica._poller
        poll = poller.poll

        def chosen(timeout: float) -> None:  # the tick thread, once its tick is done
            if 0 < timeout < self._quiet_wait:
                if self._notifier is None:  # made here, on the thread that polls, before any wake-up can be asked
                    self._notifier = PipeNotifier(poller)
                self._may_wait_long = True  # before looking: a proposal queued after the look sees it set
                if idle(replica):
                    timeout = self._quiet_wait
                    if replica._isLeader():  # not past its next heartbeat
                        due = replica._SyncObj__newAppendEntriesTime - monotonic()
                        timeout = max(0.0, min(timeout, due))
                else:
                    self._may_wait_long = False
            try:
                poll(timeout)
            finally:
                self._may_wait_long = False

        poller.poll = chosen

    def _applyCommand(self, command: bytes, callback: Any, commandType: Any = None) -> None:
        """pysyncobj's: queue a proposal for the tick thread (any thread); wake that thread if it may be waiting long."""
        SyncObj._applyCommand(self, command, callback, commandType)
        if self._may_wait_long:
            with self._wake_lock:
                if self._notifier is not None:
                    try:
                        self._notifier.notify()
                    except BlockingIOError:  # the pipe is full of wake-ups already
                        pass

    def _doDestroy(self) -> None:
        """pysyncobj's, on the tick thread as it stops: the wake-up pipe goes with it (under the lock a wake-up
        takes, so no write ever reaches a descriptor number the process has given to another file since)."""
        SyncObj._doDestroy(self)
        replica: Any = self
        with self._wake_lock:
            notifier, self._notifier = self._notifier, None
            if notifier is not None:
                read_fd, write_fd = notifier._PipeNotifier__pipeR, notifier._PipeNotifier__pipeW
                replica._poller.unsubscribe(read_fd)
                os.close(read_fd)
                os.close(write_fd)


def idle(replica: Any) -> bool:
    """Whether the tick left nothing to do: all committed entries applied, no proposal queued, and a follower or a
    quiet leader (``raftsched.raft.heartbeats.quiet``)."""
    if replica._SyncObj__raftCommitIndex != replica._SyncObj__raftLastApplied:
        return False
    if replica._SyncObj__commandsQueue._FastQueue__queue:
        return False
    state = replica._SyncObj__raftState
    if state == _RAFT_STATE.LEADER:
        return bool(quiet(replica))
    return bool(state == _RAFT_STATE.FOLLOWER)
