"""A node process whose wall clock a test moves, with no hook in the product: a ``sitecustomize`` module.

``SkewedClocks(root)`` writes ``root/sitecustomize.py``; a node started with ``env(node_id)`` (its directory
first on ``PYTHONPATH``) imports it before anything else, and from then on ``time.time`` and ``time.time_ns``
return the real time plus the offset last written with ``set(node_id, ms)`` (one file per node, re-read at
most every 50 ms, only when it changed). ``time.monotonic`` and the clocks the C library reads are left
alone, so the node sees what a stepped system clock shows it: wall time jumping against monotonic time.

What the node reads its wall time from: ``raftsched.cluster.node.clock.SystemClock`` and the Raft probes
(``raftsched.raft.peer_probe``) call ``time.time_ns``; log records call ``time.time``. ``datetime.now`` is read only
for certificates and the command line's dates, never to decide what is due, so it is left as it is.
gRPC's Python layer turns a call's timeout into a ``time.time()`` deadline that its C core reads against
the real clock; with a real skew both would move together, so calls made from gRPC's own modules get the
real time (the skew must not turn every call's deadline into one long past or far away).

Debian's libfaketime is no use here: it hangs Python's timed waits.
"""

from __future__ import annotations

import os

#: the environment variable naming the file a node reads its offset (milliseconds, a float) from
OFFSET_FILE_ENV = "RAFTSCHED_TEST_CLOCK_OFFSET_FILE"

SITECUSTOMIZE = '''\
"""Test only (tests/skewed_clock.py): time.time and time.time_ns plus the offset in $%(env)s."""
import os
import sys
import time

_path = os.environ.get("%(env)s")
if _path:
    _real_time, _real_time_ns, _monotonic, _frame = time.time, time.time_ns, time.monotonic, sys._getframe
    _state = {"offset_ns": 0, "checked": -1.0, "seen": None}

    def _offset_ns():
        now = _monotonic()
        if now - _state["checked"] >= 0.05:
            _state["checked"] = now
            try:
                st = os.stat(_path)
                seen = (st.st_ino, st.st_mtime_ns, st.st_size)
                if seen != _state["seen"]:
                    with open(_path, encoding="ascii") as f:
                        _state["offset_ns"] = int(float(f.read().strip() or 0) * 1_000_000)
                    _state["seen"] = seen
            except (OSError, ValueError):
                pass
        return _state["offset_ns"]

    def _from_grpc():
        return _frame(2).f_globals.get("__name__", "").startswith("grpc")

    def time_ns():
        return _real_time_ns() if _from_grpc() else _real_time_ns() + _offset_ns()

    def time_():
        return _real_time() if _from_grpc() else _real_time() + _offset_ns() / 1e9

    time.time_ns, time.time = time_ns, time_
''' % {"env": OFFSET_FILE_ENV}


class SkewedClocks:
    def __init__(self, root: str) -> None:
        self.root = root
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, "sitecustomize.py"), "w", encoding="utf-8") as f:
            f.write(SITECUSTOMIZE)

    def _file(self, node_id: str) -> str:
        return os.path.join(self.root, f"{node_id}.offset")

    def env(self, node_id: str) -> dict[str, str]:
        """The environment that starts ``node_id`` with a clock this object moves (at offset 0 until ``set``)."""
        if not os.path.exists(self._file(node_id)):
            self.set(node_id, 0)
        path = os.pathsep.join(p for p in (self.root, os.environ.get("PYTHONPATH", "")) if p)
        return {"PYTHONPATH": path, OFFSET_FILE_ENV: self._file(node_id)}

    def set(self, node_id: str, offset_ms: float) -> None:
        """From now on (within 50 ms) ``node_id``'s wall clock reads ``offset_ms`` ahead of the real one."""
        path = self._file(node_id)
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="ascii") as f:
            f.write(f"{offset_ms}\n")
        os.replace(tmp, path)  # a new inode: the node never reads a half-written file
