"""Reads a run's output back by its URI, whichever store wrote it (the node's ``OutputReader`` port).

``file://`` on this node's disk, ``s3://`` through ``raftsched.storage.output_s3`` (boto3
loaded on first use), ``mem://`` for tests, and ``data:,`` (nothing stored) as
empty. Anything that cannot be read is ``OutputMissing`` with the reason;
nothing else is raised. Given the node's ``OutputLocation``, a URI outside
the node's own output store is never read (a file reached through a symlink
that leaves the output directory neither).

Three reads: ``read(uri)`` (the whole log, cut to head + note + tail over
``max_bytes``), ``read_at(uri, offset)`` (from a byte offset, so a follower
fetches only what is new) and ``read_live(key, offset)``: a running attempt's
live parts (``raftsched.cluster.domain.live_output``). The live URI is computed from
the attempt's key and the node's own location (``OutputLocation.uri_for``) —
inside the store by construction, and checked by the same rule as any other.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Protocol

from raftsched.cluster.domain.live_output import LogSlice
from raftsched.cluster.domain.output import EMPTY_OUTPUT_URI, OutputKey, OutputMissing
from raftsched.cluster.domain.output_location import OutputLocation
from raftsched.storage.local_store import read_file_live, read_file_slice
from raftsched.storage.memory_store import MemoryOutputStore

#: the most log bytes one ``GetRunOutput`` answer carries; a larger log comes back as head + note + tail
MAX_RETURNED_LOG_BYTES = 15 * 1024 * 1024


class S3Reader(Protocol):
    """The S3 side (``raftsched.storage.output_s3.S3OutputReader``)."""

    def read_at(self, uri: str, offset: int, max_bytes: int = 0) -> tuple[LogSlice, bytes]: ...

    def read_live(self, uri: str, offset: int, max_bytes: int = 0) -> LogSlice: ...


class OutputReader:
    """Reads output by URI, choosing the store by scheme: ``file://``, ``s3://``, ``mem://``.

    ``s3_reader`` builds the S3 reader on first use (it imports boto3), e.g.
    ``lambda: raftsched.storage.output_s3.S3OutputReader(endpoint_url, region)``.
    """

    def __init__(
        self,
        s3_reader: Callable[[], S3Reader] | None = None,
        memory: MemoryOutputStore | None = None,
        max_bytes: int = MAX_RETURNED_LOG_BYTES,
        location: OutputLocation | None = None,
    ) -> None:
        #: the node's output store: nothing outside it is read (None: any location, for tools and tests)
        self.location = location
        self._s3_factory = s3_reader
        self._s3: S3Reader | None = None
        self._memory = memory
        self._lock = threading.Lock()
        self.max_bytes = max_bytes

    def read(self, uri: str) -> tuple[bytes, bytes]:
        """(log, result) at ``uri``; raises ``OutputMissing`` and nothing else."""
        piece, result = self.read_at(uri, 0)
        return piece.data, result

    def read_at(self, uri: str, offset: int) -> tuple[LogSlice, bytes]:
        """The log at ``uri`` from byte ``offset`` (``plan_window``) and the result; raises ``OutputMissing``."""
        if uri == EMPTY_OUTPUT_URI:
            return LogSlice(b"", 0, offset), b""
        scheme = self._check_location(uri)
        try:
            if scheme == "file":
                return read_file_slice(uri, offset, self.max_bytes)
            if scheme == "s3":
                return self._s3_read().read_at(uri, offset, self.max_bytes)
            if scheme == "mem" and self._memory is not None:
                return self._memory.get_at(uri, offset, self.max_bytes)
        except OutputMissing:
            raise
        except Exception as exc:  # noqa: BLE001 - a reader's bug or an odd failure must not fail the RPC
            raise OutputMissing(f"log {uri} cannot be read: {type(exc).__name__}: {exc}") from exc
        raise OutputMissing(f"log URI {uri!r} has a scheme this node cannot read (file:// or s3://)")

    def read_live(self, key: OutputKey, offset: int) -> LogSlice:
        """What a running attempt has shipped so far, from ``offset``; raises ``OutputMissing``."""
        uri = self.location.uri_for(key) if self.location is not None else ""
        if not uri:
            raise OutputMissing("this node has no output location configured ([logs]): live output cannot be found")
        scheme = self._check_location(uri)
        try:
            if scheme == "file":
                return read_file_live(uri, offset, self.max_bytes)
            if scheme == "s3":
                return self._s3_read().read_live(uri, offset, self.max_bytes)
            if scheme == "mem" and self._memory is not None:
                return self._memory.get_live(uri, offset, self.max_bytes)
        except OutputMissing:
            raise
        except Exception as exc:  # noqa: BLE001
            raise OutputMissing(f"live output at {uri} cannot be read: {type(exc).__name__}: {exc}") from exc
        raise OutputMissing(f"live output at {uri!r} has a scheme this node cannot read")

    def _check_location(self, uri: str) -> str:
        """The URI's scheme, once it is known to lie inside the node's store."""
        scheme = uri.partition("://")[0] if "://" in uri else ""
        loc = self.location
        if loc is None:
            return scheme
        if not loc.allows(uri):
            raise OutputMissing(f"log URI {uri[:300]!r} is outside this node's output store {loc.describe()}; it is not read")
        if scheme == "file":
            real, root = os.path.realpath(uri[len("file://") :]), os.path.realpath(loc.local_dir)
            if not real.startswith(root.rstrip("/") + "/"):
                raise OutputMissing(f"log {uri[:300]!r} leads outside this node's output directory {root}; it is not read")
        return scheme

    def _s3_read(self) -> S3Reader:
        with self._lock:
            if self._s3 is None:
                if self._s3_factory is None:
                    raise OutputMissing("this node has no S3 reader configured")
                self._s3 = self._s3_factory()
            return self._s3
