"""Reads a run's output back by its URI, whichever store wrote it (the node's ``OutputReader`` port).

``file://`` on this node's disk, ``s3://`` through ``storage.output_s3`` (boto3
loaded on first use), ``mem://`` for tests, and ``data:,`` (nothing stored) as
empty. Anything that cannot be read is ``OutputMissing`` with the reason;
nothing else is raised.
"""

from __future__ import annotations

import threading
from typing import Callable

from cluster.domain.output import EMPTY_OUTPUT_URI, OutputMissing
from storage.local_store import read_file_uri
from storage.memory_store import MemoryOutputStore

#: the most log bytes one ``GetRunOutput`` answer carries; a larger log comes back as head + note + tail
MAX_RETURNED_LOG_BYTES = 15 * 1024 * 1024


class OutputReader:
    """Reads ``(log, result)`` by URI, choosing the store by scheme: ``file://``, ``s3://``, ``mem://``.

    ``s3_reader`` builds the S3 reader on first use (it imports boto3), e.g.
    ``lambda: storage.output_s3.S3OutputReader(endpoint_url, region)``.
    """

    def __init__(
        self,
        s3_reader: Callable[[], Callable[[str, int], tuple[bytes, bytes]]] | None = None,
        memory: MemoryOutputStore | None = None,
        max_bytes: int = MAX_RETURNED_LOG_BYTES,
    ) -> None:
        self._s3_factory = s3_reader
        self._s3: Callable[[str, int], tuple[bytes, bytes]] | None = None
        self._memory = memory
        self._lock = threading.Lock()
        self.max_bytes = max_bytes

    def read(self, uri: str) -> tuple[bytes, bytes]:
        """(log, result) at ``uri``; raises ``OutputMissing`` and nothing else."""
        if uri == EMPTY_OUTPUT_URI:
            return b"", b""
        scheme = uri.partition("://")[0] if "://" in uri else ""
        try:
            if scheme == "file":
                return read_file_uri(uri, self.max_bytes)
            if scheme == "s3":
                return self._s3_read()(uri, self.max_bytes)
            if scheme == "mem" and self._memory is not None:
                return self._memory.get(uri, self.max_bytes)
        except OutputMissing:
            raise
        except Exception as exc:  # noqa: BLE001 - a reader's bug or an odd failure must not fail the RPC
            raise OutputMissing(f"log {uri} cannot be read: {type(exc).__name__}: {exc}") from exc
        raise OutputMissing(f"log URI {uri!r} has a scheme this node cannot read (file:// or s3://)")

    def _s3_read(self) -> Callable[[str, int], tuple[bytes, bytes]]:
        with self._lock:
            if self._s3 is None:
                if self._s3_factory is None:
                    raise OutputMissing("this node has no S3 reader configured")
                self._s3 = self._s3_factory()
            return self._s3
