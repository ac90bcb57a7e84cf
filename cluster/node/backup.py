"""A backup: this node's snapshot file, taken at or after a committed index the caller's read saw.

``open_backup`` commits a read barrier (so the snapshot covers every write
acknowledged before the call), asks Raft for a snapshot of what is applied
(written in the background, as every snapshot is: the state is never encoded
on a gRPC thread), waits until the snapshot file covers the barrier, and
opens it. The file is read through that descriptor: a later snapshot replaces
the file whole (a rename), never the bytes being read. What is streamed is
the snapshot file exactly as Raft wrote it: its marker, metadata and checksum
(``raftsched.raft.snapshot_file``) let ``raftsched node restore`` check it.
"""

from __future__ import annotations

import os
import threading
from typing import BinaryIO

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import Unavailable
from raftsched.cluster.node.clock import Clock
from raftsched.cluster.node.ports import Snapshots
from raftsched.cluster.node.replica import Replica

POLL_S = 0.05


def open_backup(replica: Replica, snapshots: Snapshots, clock: Clock, timeout_s: float) -> tuple[int, BinaryIO]:
    """``(index, file)``: a snapshot covering at least the index a barrier committed now; the caller closes it."""
    path = snapshots.snapshot_path
    if path is None:
        raise Unavailable("this node keeps no snapshot file (no data dir): back up from another node")
    index = int(replica.execute(c.Barrier(clock.now_ms())))
    deadline = clock.monotonic() + timeout_s
    asked = -1.0
    while snapshots.last_snapshot_index < index or not os.path.exists(path):
        now = clock.monotonic()
        if now >= deadline:
            raise Unavailable(
                f"the snapshot for the backup (index {index}) was not written within {timeout_s:.0f} s "
                "(a large state takes longer: retry, or back up from another node)"
            )
        if now - asked >= 1.0:  # pysyncobj drops a request while a snapshot is being written: ask again
            snapshots.force_snapshot()
            asked = now
        threading.Event().wait(POLL_S)
    f = open(path, "rb")  # handed to the caller, who streams and closes it
    return snapshots.last_snapshot_index, f
