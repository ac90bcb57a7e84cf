"""Removes the stored output of runs that retention dropped from the history.

The state machine reports every dropped run as a ("pruned", run) event on
every node; only the node that believes it leads deletes (best effort, in a
background thread, never on the Raft thread). Local ``file://`` logs are
deleted where this node can see them; ``s3://`` objects are deleted through
boto3 when the node has an S3 config. What a leader change drops on the floor
is caught by the bucket's lifecycle rule (docs/operations.md). Given the node's
``OutputLocation``, nothing outside its own output store is ever deleted.

Live parts (``raftsched.cluster.domain.live_output``) are removed by their executor
once the whole log is stored. Those an attempt left behind (its executor
died, lost the lease, or could not store the log) go with the run: when a
pruned run was tried more than once or stored no log, the janitor sweeps the
run's folder in the node's store (``OutputLocation.run_folder``) of every
file or object named as an attempt's output (logs, results, parts). With a
local store it always sweeps (a directory listing costs nothing); a run that
stored nothing (``data:,``) in one attempt costs no request at all.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import queue
import threading
from typing import Any, Callable

from raftsched.cluster.domain.live_output import is_output_name
from raftsched.cluster.domain.output import EMPTY_OUTPUT_URI, is_log_name, result_name
from raftsched.cluster.domain.output_location import OutputLocation

log = logging.getLogger("raftsched.janitor")


class OutputJanitor:
    def __init__(
        self, is_leader: Callable[[], bool], s3_client: Callable[[], Any] | None = None, location: OutputLocation | None = None
    ) -> None:
        self._is_leader = is_leader
        self._s3_client = s3_client
        #: the node's output store: nothing outside it is deleted (None: any location, for tests)
        self._location = location
        #: (log URI or "", job id and run id whose folder to sweep, or "")
        self._queue: queue.Queue[tuple[str, str, str]] = queue.Queue(maxsize=100_000)
        self.deleted = 0
        self._thread = threading.Thread(target=self._run, name="output-janitor", daemon=True)
        self._thread.start()

    def on_applied(self, events: list[tuple[str, Any]]) -> None:
        """A ``Replica.on_applied`` hook (tick thread): queue the pruned runs' outputs."""
        if not events or not self._is_leader():
            return
        for kind, run in events:
            if kind != "pruned":
                continue
            uri = run.log_uri if run.log_uri != EMPTY_OUTPUT_URI else ""
            if uri and self._location is not None and not self._location.inside_run(uri, run.job_id, run.run_id):
                log.warning("not deleting %s: it is not inside run %s's own output folder", uri[:300], run.run_id)
                uri = ""
            sweep = self._sweeps(run.attempt, run.log_uri)
            if uri or sweep:
                try:
                    self._queue.put_nowait((uri, run.job_id if sweep else "", run.run_id if sweep else ""))
                except queue.Full:
                    return

    def _sweeps(self, attempts: int, log_uri: str) -> bool:
        """Whether a pruned run's folder may hold more than its log and result (see the module's docstring)."""
        loc = self._location
        if loc is None or attempts < 1:
            return False
        if loc.local_dir and not loc.s3_bucket:
            return log_uri != EMPTY_OUTPUT_URI or attempts > 1
        return bool(loc.s3_bucket) and self._s3_client is not None and (attempts > 1 or not log_uri)

    def _run(self) -> None:
        while True:
            uri, job_id, run_id = self._queue.get()
            try:
                if uri:
                    self.delete(uri)
                if job_id:
                    self.sweep(job_id, run_id)
                self.deleted += 1
            except Exception as exc:  # noqa: BLE001 - best effort; the lifecycle rule is the backstop
                log.info("could not delete pruned output %s of run %s: %s", uri or "(none)", run_id or "?", exc)

    def sweep(self, job_id: str, run_id: str) -> int:
        """Remove every attempt's output in a run's folder of this node's store; how many files or objects."""
        folder = self._location.run_folder(job_id, run_id) if self._location is not None else ""
        if folder.startswith("file://"):
            return _sweep_dir(folder[len("file://") :])
        if folder.startswith("s3://") and self._s3_client is not None:
            bucket, _, prefix = folder[len("s3://") :].partition("/")
            return _sweep_prefix(self._s3_client(), bucket, prefix)
        return 0

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


def _sweep_dir(path: str) -> int:
    removed = 0
    try:
        with os.scandir(path) as entries:
            names = [e.path for e in entries if is_output_name(e.name) and not e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return 0
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.remove(name)
            removed += 1
    for d in (path, os.path.dirname(path.rstrip("/"))):
        try:
            os.rmdir(d)  # only when empty: the run's, then the job's folder
        except OSError:
            break
    return removed


def _sweep_prefix(client: Any, bucket: str, prefix: str) -> int:
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", []) if is_output_name(posixpath.basename(o["Key"]))]
    for i in range(0, len(keys), 1000):
        chunk = [{"Key": k} for k in keys[i : i + 1000]]
        client.delete_objects(Bucket=bucket, Delete={"Objects": chunk, "Quiet": True})
    return len(keys)
