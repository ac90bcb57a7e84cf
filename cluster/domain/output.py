"""Where a run's output lives: the key layout every output store shares, and its errors.

Logs never travel through Raft: an executor stores each attempt's log and
result in an output store and completes the run with the log's URI. Keys
name the job, run, attempt and fencing token, so a zombie attempt's upload
can never be taken for the real one:

    <job_id>/<run_id>/attempt-<n>-token-<t>.log      the log
    <job_id>/<run_id>/attempt-<n>-token-<t>.result   the result

(under a prefix in S3, under the store's directory on disk). An attempt with
no log and no result stores nothing; its URI is ``EMPTY_OUTPUT_URI``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from raftsched.cluster.domain.errors import RaftschedError

#: the log URI of an attempt that wrote no log and returned no result: nothing is stored for it (no
#: file, no object, no request), and readers answer it with empty bytes (RFC 2397's empty ``data:`` URI)
EMPTY_OUTPUT_URI = "data:,"

#: how an executor marks, in a run's error, an output it could not store
MISSING_OUTPUT_MARK = "output missing: "

_SAFE = re.compile(r"[^A-Za-z0-9_.@:-]")
_LOG_NAME = re.compile(r"(^|/)attempt-\d+-token-\d+\.log$")


@dataclass(frozen=True)
class OutputKey:
    job_id: str
    run_id: str
    attempt: int
    fencing_token: int

    def relpath(self) -> str:
        """``<job_id>/<run_id>/attempt-<n>-token-<t>`` (ids with unusual characters made safe)."""
        run = _SAFE.sub("_", self.run_id)
        return f"{_SAFE.sub('_', self.job_id)}/{run}/attempt-{self.attempt}-token-{self.fencing_token}"


def is_log_name(path: str) -> bool:
    """Whether ``path`` (a file path or an object key) ends in a run log's name."""
    return _LOG_NAME.search(path) is not None


def result_name(log_path: str) -> str:
    """The result beside a log: ``.../attempt-n-token-t.result`` for ``.../attempt-n-token-t.log``."""
    return log_path[: -len(".log")] + ".result"


class OutputMissing(RaftschedError):
    """The output cannot be read; the message says why."""


class OutputStoreError(RaftschedError):
    """The store could not be used; the message says why and what to change.

    ``retryable`` is True for failures that may pass (network, 5xx, throttling,
    a full disk) and False for ones that will not (no such bucket, access denied).
    """

    def __init__(self, message: str, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable
