"""Which log URIs a node accepts, reads and deletes: only those inside its own output store.

A completion's ``log_uri`` comes from the network. A node that took any URI
would then read (GetRunOutput) and delete (retention's janitor) whatever its
credentials reach: another bucket, ``/etc``. So one rule, ``OutputLocation``,
decides for all three, from the node's ``[logs]``:

* ``""`` (no output recorded) and ``data:,`` (nothing was stored) always;
* ``store = "s3"``: ``s3://<bucket>/<prefix>/...`` of that bucket and prefix;
* ``store = "local"``: ``file://<dir>/...`` under the node's output directory
  (``[logs] dir``, default ``<data_dir>/outputs``), with no ``..`` step;

and in both cases only a run log's name (``.../attempt-<n>-token-<t>.log``).
Anything else is ``ValidationError`` (INVALID_ARGUMENT) naming the URI and
the accepted location. Pure string rules: no I/O (the local store resolves
symlinks itself when it reads).

``uri_for(key)`` is where an executor writing with the same ``[logs]`` puts
an attempt's log (and, while it runs, its live parts: ``live_output``): the
node finds a LEASED run's live output from the run's lease alone, with
nothing going through Raft. ``run_folder`` is the folder of all of a run's
attempts (the janitor sweeps it).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.limits import MAX_LOG_URI_CHARS, check_chars, shown
from raftsched.cluster.domain.output import EMPTY_OUTPUT_URI, OutputKey, is_log_name


@dataclass(frozen=True, slots=True)
class OutputLocation:
    """The node's output store. ``local_dir`` is absolute; ``s3_bucket`` empty means no S3 store."""

    local_dir: str = ""
    s3_bucket: str = ""
    s3_prefix: str = ""
    #: tests only: also accept ``mem://`` URIs of the in-memory store
    memory: bool = False

    def describe(self) -> str:
        if self.s3_bucket:
            return f"s3://{self.s3_bucket}/{self.s3_prefix.strip('/') + '/' if self.s3_prefix.strip('/') else ''}..."
        return f"file://{self.local_dir}/..."

    def uri_for(self, key: OutputKey) -> str:
        """The log URI of ``key`` in this store, laid out as the executors' stores lay it out ("" if none)."""
        folder = self._root()
        return f"{folder}/{key.relpath()}.log" if folder else ""

    def run_folder(self, job_id: str, run_id: str) -> str:
        """The folder URI (ending in "/") that holds every attempt of a run ("" if this store has none)."""
        folder = self._root()
        return f"{folder}/{OutputKey(job_id, run_id, 0, 0).relpath().rpartition('/')[0]}/" if folder else ""

    def _root(self) -> str:
        if self.s3_bucket:
            prefix = self.s3_prefix.strip("/")
            return f"s3://{self.s3_bucket}" + (f"/{prefix}" if prefix else "")
        if self.local_dir:
            return "file://" + posixpath.normpath(self.local_dir).rstrip("/")
        return "mem:/" if self.memory else ""

    def check(self, uri: str) -> None:
        """Raise ``ValidationError`` unless ``uri`` is inside this store (or empty, or ``data:,``)."""
        check_chars("log_uri", uri, MAX_LOG_URI_CHARS)
        reason = self._refusal(uri)
        if reason:
            raise ValidationError(
                f"log_uri {shown(uri)} is not accepted: {reason}; this node takes logs only from its own "
                f"output store {self.describe()} (its [logs] section), or 'data:,' for none"
            )

    def check_attempt(self, uri: str, key: OutputKey) -> None:
        """Raise ``ValidationError`` unless ``uri`` is inside this store and names the attempt ``key``'s own log,
        ``.../<job>/<run>/attempt-<n>-token-<t>.log`` (or is empty, or ``data:,``): a completion names its own
        attempt's output, never another run's. (An executor may keep its outputs in a folder of its own inside the
        store: ``raftsched executor --output-dir``.)"""
        self.check(uri)
        if uri in ("", EMPTY_OUTPUT_URI):
            return
        if not names_attempt(uri, key):
            own = "/" + key.relpath() + ".log"
            raise ValidationError(
                f"log_uri {shown(uri)} is not this attempt's output: attempt {key.attempt} of run {key.run_id} "
                f"(fencing token {key.fencing_token}) keeps its log at {self.uri_for(key) or '...' + own}"
            )

    def inside_run(self, uri: str, job_id: str, run_id: str) -> bool:
        """Whether ``uri`` is a log of this store in a folder of run ``run_id`` of job ``job_id``
        (``.../<job>/<run>/attempt-<n>-token-<t>.log``)."""
        if not self.allows(uri):
            return False
        folder = OutputKey(job_id, run_id, 0, 0).relpath().rpartition("/")[0]
        return posixpath.dirname(_normal(uri)).endswith("/" + folder)

    def allows(self, uri: str) -> bool:
        return len(uri) <= MAX_LOG_URI_CHARS and not self._refusal(uri)

    def _refusal(self, uri: str) -> str:
        if uri in ("", EMPTY_OUTPUT_URI):
            return ""
        scheme, sep, rest = uri.partition("://")
        if not sep:
            return "it is not a URI"
        if not is_log_name(rest):
            return "it does not name a run log (.../attempt-N-token-T.log)"
        if scheme == "s3":
            return self._s3_refusal(rest)
        if scheme == "file":
            return self._file_refusal(rest)
        if scheme == "mem" and self.memory:
            return ""
        return f"scheme {scheme!r} is not this node's store"

    def _s3_refusal(self, rest: str) -> str:
        if not self.s3_bucket:
            return "this node's output store is not S3"
        bucket, _, key = rest.partition("/")
        if bucket != self.s3_bucket:
            return f"bucket {shown(bucket, 80)} is not this node's bucket"
        prefix = self.s3_prefix.strip("/")
        if prefix and not key.startswith(prefix + "/"):
            return f"the key is not under the prefix {prefix!r}"
        if any(part in ("", ".", "..") for part in key.split("/")):
            return "the key has an empty, '.' or '..' step"
        return ""

    def _file_refusal(self, path: str) -> str:
        if not self.local_dir or self.s3_bucket:
            return "this node's output store is not a local directory"
        if not posixpath.isabs(path) or ".." in path.split("/"):
            return "the path is not absolute or has a '..' step"
        root = posixpath.normpath(self.local_dir)
        if not posixpath.normpath(path).startswith(root.rstrip("/") + "/"):
            return f"the file is not under {root}"
        return ""


def names_attempt(uri: str, key: OutputKey) -> bool:
    """Whether ``uri`` (in whatever store) ends in attempt ``key``'s own log, ``/<job>/<run>/attempt-<n>-token-<t>.log``
    (the store's own part is ``OutputLocation``'s to check); "" and ``data:,`` name no output and pass."""
    if uri in ("", EMPTY_OUTPUT_URI):
        return True
    normal = _normal(uri)
    return normal.endswith("/" + key.relpath() + ".log") and "/../" not in normal


def _normal(uri: str) -> str:
    """A ``file://`` URI with its path normalized (no doubled slashes or ``.`` steps); others as they are."""
    if uri.startswith("file://"):
        return "file://" + posixpath.normpath(uri[len("file://") :])
    return uri
