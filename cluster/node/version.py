"""Which raftsched this node runs, and its report of it to the cluster.

Each node proposes one ``NodeInfo`` command once it runs (retrying until it
commits), so every replica knows every member's version, command format and
Raft address: ``GetClusterStatus`` shows them, and the leader switches the
cluster to a newer command format only once every member of the Raft
configuration reported it (``raftsched.cluster.node.membership.keeper``).
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.commands import wire
from raftsched.cluster.domain.errors import RaftschedError
from raftsched.cluster.node.clock import Clock
from raftsched.cluster.node.replica import Replica

log = logging.getLogger("raftsched.node")

RETRY_S = 1.0


def raftsched_version() -> str:
    try:
        return importlib.metadata.version("raftsched")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "0+unknown"


def version_text() -> str:
    """What ``raftsched --version`` prints."""
    parts = [f"raftsched {raftsched_version()}", f"command format {wire.FORMAT_VERSION}"]
    for dist in ("pysyncobj", "grpcio", "croniter", "tzdata"):
        try:
            parts.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{dist} (not installed)")
    return ", ".join(parts)


class VersionReporter:
    """Proposes this node's ``NodeInfo`` until it commits (in a thread; ``stop`` ends it)."""

    def __init__(self, replica: Replica, clock: Clock, node_id: str, version: str, raft: str = "") -> None:
        self._replica = replica
        self._clock = clock
        self._node_id = node_id
        self._version = version
        self._raft = raft
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="version-report", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _run(self) -> None:
        while not self._stop.is_set():
            fmt = wire.FORMAT_VERSION
            cmd = c.NodeInfo(self._clock.now_ms(), self._node_id, self._version, fmt, self._raft)
            try:
                self._replica.execute(cmd)
                log.info("node %s reported version %s (command format %d)", self._node_id, self._version, fmt)
                return
            except RaftschedError as exc:
                log.debug("version report not committed yet (%s); retrying", exc)
            self._stop.wait(RETRY_S)
