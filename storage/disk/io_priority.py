"""The calling thread's disk I/O priority: the idle class, for work that must never delay the Raft log.

Linux gives every thread an I/O priority (``ioprio_set(2)``; Python's ``os``
has no call for it, hence the raw system call). The block layer's
``mq-deadline`` (kernel 5.14 and later) and ``bfq`` schedulers serve a
request of the idle class only when no request of a higher class waits, and
threads a thread starts take its priority. What runs in the idle class here
is the snapshot writer — its reads of the state file (page faults of LMDB's
copy) and its writes — so that when one disk holds the node's Raft log as
well (or, on a test machine, several nodes), the log's fsyncs are served
first: every Raft answer waits for those. mq-deadline's ``prio_aging_expire``
(10 s by default) still serves a starved idle request, so the snapshot
always ends. With the ``none`` scheduler, or on another OS, the call changes
nothing that matters, and fails silently where it is missing.
"""

from __future__ import annotations

import ctypes
import platform
import threading

#: ioprio_set's system call number per architecture (Linux); ioprio_get's is the next one on both
_SYSCALLS = {"x86_64": 251, "aarch64": 30}
_WHO_PROCESS = 1  # "process" means one thread for this call: its id as gettid() gives it
CLASS_IDLE = 3


def _call(get: bool, native_id: int | None, *value: int) -> int | None:
    """ioprio_set (or ioprio_get) on a thread, by default the calling one: the kernel's answer, None where missing."""
    number = _SYSCALLS.get(platform.machine())
    if number is None:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    tid = threading.get_native_id() if native_id is None else native_id
    return int(libc.syscall(number + int(get), _WHO_PROCESS, tid, *value))


def set_idle(native_id: int | None = None) -> bool:
    """Put a thread (by default the calling one) in the idle I/O class. Whether the kernel took it."""
    return _call(False, native_id, CLASS_IDLE << 13) == 0


def get(native_id: int | None = None) -> int | None:
    """A thread's I/O priority as the kernel holds it (class << 13 | level), or None where unknown."""
    value = _call(True, native_id)
    return None if value is None or value < 0 else value
