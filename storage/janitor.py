"""Removes the stored output of runs that retention dropped from the history.

The state machine reports every dropped run as a ("pruned", run) event on
every node; only the node that believes it leads deletes (best effort, in a
background thread, never on the Raft thread). Local ``file://`` logs are
deleted where this node can see them; ``s3://`` objects are deleted through
boto3 when the node has an S3 config. What a leader change drops on the floor
is caught by the bucket's lifecycle rule (see the README). Given the node's
``OutputLocation``, nothing outside its own output store is ever deleted.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from typing import Any, Callable

from cluster.domain.output import EMPTY_OUTPUT_URI, is_log_name, result_name
from cluster.domain.output_location import OutputLocation

log = logging.getLogger("raftsched.janitor")


class OutputJanitor:
    def __init__(
        self, is_leader: Callable[[], bool], s3_client: Callable[[], Any] | None = None, location: OutputLocation | None = None
    ) -> None:
        self._is_leader = is_leader
        self._s3_client = s3_client
        #: the node's output store: nothing outside it is deleted (None: any location, for tests)
        self._location = location
        self._queue: queue.Queue[str] = queue.Queue(maxsize=100_000)
        self.deleted = 0
        self._thread = threading.Thread(target=self._run, name="output-janitor", daemon=True)
        self._thread.start()

    def on_applied(self, events: list[tuple[str, Any]]) -> None:
        """A ``ReplicatedState.on_applied`` hook (tick thread): queue the pruned runs' outputs."""
        if not events or not self._is_leader():
            return
        for kind, run in events:
            if kind == "pruned" and run.log_uri and run.log_uri != EMPTY_OUTPUT_URI:
                try:
                    self._queue.put_nowait(run.log_uri)
                except queue.Full:
                    return

    def _run(self) -> None:
        while True:
            uri = self._queue.get()
            try:
                self.delete(uri)
                self.deleted += 1
            except Exception as exc:  # noqa: BLE001 - best effort; the lifecycle rule is the backstop
                log.info("could not delete pruned output %s: %s", uri, exc)

    def delete(self, uri: str) -> None:
        if self._location is not None and not self._location.allows(uri):
            log.warning("not deleting %s: it is outside this node's output store %s", uri[:300], self._location.describe())
            return
        if uri.startswith("file://"):
            path = uri[len("file://") :]
            if not is_log_name(path) or "/../" in path or not os.path.isabs(path):
                return
            for p in (path, result_name(path)):
                try:
                    os.remove(p)
                except FileNotFoundError:
                    pass
            for d in (os.path.dirname(path), os.path.dirname(os.path.dirname(path))):
                try:
                    os.rmdir(d)  # only when empty: the run's, then the job's folder
                except OSError:
                    break
        elif uri.startswith("s3://") and self._s3_client is not None:
            bucket, _, key = uri[len("s3://") :].partition("/")
            if bucket and is_log_name(key):
                self._s3_client().delete_objects(
                    Bucket=bucket, Delete={"Objects": [{"Key": key}, {"Key": result_name(key)}], "Quiet": True}
                )
