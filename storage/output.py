"""Run output stores: where an executor puts each attempt's log and result.

Logs never travel through Raft: the executor writes them to a store and puts
the returned URI into ``CompleteRun.log_uri``; ``GetRunOutput`` reads them
back through the same interface. Keys name the job, run, attempt and fencing
token, so a zombie attempt's upload can never be taken for the real one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Protocol

_SAFE = re.compile(r"[^A-Za-z0-9_.@:-]")


@dataclass(frozen=True)
class OutputKey:
    job_id: str
    run_id: str
    attempt: int
    fencing_token: int

    def relpath(self) -> str:
        run = _SAFE.sub("_", self.run_id)
        return f"{_SAFE.sub('_', self.job_id)}/{run}/attempt-{self.attempt}-token-{self.fencing_token}"


class OutputMissing(Exception):
    """The output cannot be read; the message says why."""


class OutputStore(Protocol):
    def put(self, key: OutputKey, log: bytes, result: bytes) -> str:
        """Store one attempt's log and result; return the log's URI."""
        ...

    def get(self, uri: str) -> tuple[bytes, bytes]:
        """(log, result) stored at ``uri``; raises OutputMissing."""
        ...


class LocalOutputStore:
    """Files under ``root``: ``<job>/<run>/attempt-<n>-token-<t>.log`` and ``.result``."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)

    def put(self, key: OutputKey, log: bytes, result: bytes) -> str:
        base = os.path.join(self.root, key.relpath())
        os.makedirs(os.path.dirname(base), exist_ok=True)
        for suffix, data in ((".result", result), (".log", log)):
            tmp = f"{base}{suffix}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, base + suffix)
        return "file://" + base + ".log"

    def get(self, uri: str) -> tuple[bytes, bytes]:
        return read_file_uri(uri)


def read_file_uri(uri: str) -> tuple[bytes, bytes]:
    if not uri.startswith("file://"):
        raise OutputMissing(f"{uri} is not a local file URI")
    path = uri[len("file://") :]
    if not re.search(r"/attempt-\d+-token-\d+\.log$", path):
        raise OutputMissing(f"{uri} is not a raftsched run log (expected .../attempt-N-token-T.log)")
    try:
        with open(path, "rb") as f:
            log = f.read()
    except OSError as exc:
        raise OutputMissing(f"log {path} cannot be read on this node: {exc.strerror}") from exc
    result = b""
    if path.endswith(".log") and os.path.exists(path[:-4] + ".result"):
        with open(path[:-4] + ".result", "rb") as f:
            result = f.read()
    return log, result
