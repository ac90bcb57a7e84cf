"""Run output stores: where an executor puts each attempt's log and result.

Logs never travel through Raft: the executor writes them to a store and puts
the returned URI into ``CompleteRun.log_uri``; ``GetRunOutput`` reads them
back by that URI. Keys name the job, run, attempt and fencing token, so a
zombie attempt's upload can never be taken for the real one:

    <prefix>/<job_id>/<run_id>/attempt-<n>-token-<t>.log      the log
    <prefix>/<job_id>/<run_id>/attempt-<n>-token-<t>.result   the result

The local store uses the same layout under its root directory (no prefix).
URIs are ``file://<absolute path>`` (local) and ``s3://<bucket>/<key>`` (S3,
``storage.output_s3``). An attempt with no log and no result stores nothing:
its URI is ``EMPTY_OUTPUT_URI`` (``data:,``), which reads back as empty.

The contract of a store (``OutputStore``):

- ``check()`` proves the store is usable (directory writable, bucket
  reachable with these credentials) or raises ``OutputStoreError`` with a
  message that says what to fix; the executor calls it at start.
- ``put(key, log, result)`` stores one attempt's result and then its log,
  streaming the log from a ``LogSource`` (never whole in memory when large),
  and returns the log's URI. Storing the same key again overwrites it. It
  raises ``OutputStoreError``; ``retryable`` says whether trying again may help.
- ``uri_for(key)`` is the URI ``put`` would return (for messages).

Readers (``OutputReader``) turn a URI back into ``(log, result)`` or raise
``OutputMissing`` with the reason; they never raise anything else for a
missing or unreachable output.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import threading
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Protocol, runtime_checkable

_SAFE = re.compile(r"[^A-Za-z0-9_.@:-]")
_LOG_NAME = re.compile(r"/attempt-\d+-token-\d+\.log$")

#: the log URI of an attempt that wrote no log and returned no result: nothing is stored for it (no
#: file, no object, no request), and readers answer it with empty bytes (RFC 2397's empty ``data:`` URI)
EMPTY_OUTPUT_URI = "data:,"

#: the most log bytes one ``GetRunOutput`` answer carries; a larger log comes back as head + note + tail
MAX_RETURNED_LOG_BYTES = 15 * 1024 * 1024


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


class OutputMissing(Exception):
    """The output cannot be read; the message says why."""


class OutputStoreError(Exception):
    """The store could not be used; the message says why and what to change.

    ``retryable`` is True for failures that may pass (network, 5xx, throttling,
    a full disk) and False for ones that will not (no such bucket, access denied).
    """

    def __init__(self, message: str, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


@runtime_checkable
class LogSource(Protocol):
    """A finished log that can be read from the start, any number of times."""

    @property
    def size(self) -> int: ...

    def open_reader(self) -> BinaryIO: ...


class BytesLogSource:
    """A ``LogSource`` over bytes already in memory (small logs, tests)."""

    def __init__(self, data: bytes) -> None:
        self._data = bytes(data)

    @property
    def size(self) -> int:
        return len(self._data)

    def open_reader(self) -> BinaryIO:
        return io.BytesIO(self._data)


def as_log_source(log: bytes | LogSource) -> LogSource:
    return BytesLogSource(log) if isinstance(log, (bytes, bytearray, memoryview)) else log


class OutputStore(Protocol):
    def describe(self) -> str:
        """Where output goes, for logs and messages (``file:///...`` or ``s3://bucket/prefix``)."""
        ...

    def check(self) -> None:
        """Raise ``OutputStoreError`` if the store cannot be written."""
        ...

    def uri_for(self, key: OutputKey) -> str:
        """The log URI ``put`` returns for ``key``."""
        ...

    def put(self, key: OutputKey, log: bytes | LogSource, result: bytes) -> str:
        """Store one attempt's log and result; return the log's URI. Raises ``OutputStoreError``."""
        ...


# ---------------------------------------------------------------------------- local disk


class LocalOutputStore:
    """Files under ``root``: ``<job>/<run>/attempt-<n>-token-<t>.log`` and ``.result``.

    Each file is written to a ``.tmp`` beside it and renamed, so a reader sees
    a whole log or none. The result is written first: when the log exists, so
    does its result.
    """

    CHUNK = 1024 * 1024

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)

    def describe(self) -> str:
        return "file://" + self.root

    def check(self) -> None:
        try:
            os.makedirs(self.root, exist_ok=True)
        except OSError as exc:
            raise OutputStoreError(f"cannot create the output directory {self.root}: {exc.strerror}", False) from exc
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise OutputStoreError(f"the output directory {self.root} is not writable by this user", False)

    def uri_for(self, key: OutputKey) -> str:
        return "file://" + os.path.join(self.root, key.relpath()) + ".log"

    def put(self, key: OutputKey, log: bytes | LogSource, result: bytes) -> str:
        base = os.path.join(self.root, key.relpath())
        source = as_log_source(log)
        try:
            _ensure_dir(os.path.dirname(base))
            if result:
                self._write(base + ".result", io.BytesIO(result))
            else:  # no file for an empty result (readers take a missing one as empty); none left from before
                with contextlib.suppress(FileNotFoundError):
                    os.remove(base + ".result")
            with source.open_reader() as reader:
                self._write(base + ".log", reader)
        except OSError as exc:
            raise OutputStoreError(f"cannot write {base}.log: {exc.strerror or exc}") from exc
        return "file://" + base + ".log"

    def _write(self, path: str, reader: BinaryIO) -> None:
        tmp = f"{path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)  # no buffered file object
        try:
            while chunk := reader.read(self.CHUNK):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def get(self, uri: str) -> tuple[bytes, bytes]:
        return read_file_uri(uri)


def _ensure_dir(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)`` in as few system calls as the usual cases allow: one when
    only the run's directory is missing, three when its job's is missing too (a one-off job's first run)."""
    try:
        os.mkdir(path)
        return
    except FileExistsError:
        return
    except FileNotFoundError:
        pass
    try:
        os.mkdir(os.path.dirname(path))
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path)


def read_file_uri(uri: str, max_bytes: int = 0) -> tuple[bytes, bytes]:
    """(log, result) of a ``file://`` log URI; only raftsched run logs are read. Raises ``OutputMissing``."""
    if not uri.startswith("file://"):
        raise OutputMissing(f"{uri} is not a local file URI")
    path = uri[len("file://") :]
    if not _LOG_NAME.search(path) or "/../" in path or not os.path.isabs(path):
        raise OutputMissing(f"{uri} is not a raftsched run log (expected /.../attempt-N-token-T.log)")
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if max_bytes and size > max_bytes:
                head = f.read(max_bytes // 2)
                f.seek(size - max_bytes // 2)
                log = head + truncation_note(size, max_bytes, uri) + f.read()
            else:
                log = f.read()
    except OSError as exc:
        raise OutputMissing(f"log {path} cannot be read on this node: {exc.strerror}") from exc
    result = b""
    try:
        with open(path[:-4] + ".result", "rb") as f:
            result = f.read()
    except OSError:
        pass
    return log, result


def truncation_note(size: int, max_bytes: int, uri: str) -> bytes:
    return f"\n... [{size - 2 * (max_bytes // 2)} bytes of a {size}-byte log left out here; the whole log is at {uri}] ...\n".encode()


# ---------------------------------------------------------------------------- in-memory fake


@dataclass
class MemoryOutputStore:
    """An in-memory store for tests: ``mem://<key>``; ``failures`` makes the next N puts fail."""

    objects: dict[str, bytes] = field(default_factory=dict)
    failures: int = 0
    retryable: bool = True
    puts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def describe(self) -> str:
        return "mem://"

    def check(self) -> None:
        pass

    def uri_for(self, key: OutputKey) -> str:
        return f"mem://{key.relpath()}.log"

    def put(self, key: OutputKey, log: bytes | LogSource, result: bytes) -> str:
        with self._lock:
            self.puts += 1
            if self.failures > 0:
                self.failures -= 1
                raise OutputStoreError("the fake store is down", self.retryable)
        with as_log_source(log).open_reader() as reader:
            data = reader.read()
        self.objects[f"{key.relpath()}.result"] = bytes(result)
        self.objects[f"{key.relpath()}.log"] = data
        return self.uri_for(key)

    def get(self, uri: str) -> tuple[bytes, bytes]:
        rel = uri[len("mem://") :]
        if rel not in self.objects:
            raise OutputMissing(f"{uri} is not in the store")
        return self.objects[rel], self.objects.get(rel[:-4] + ".result", b"")


# ---------------------------------------------------------------------------- reading by URI


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
                return self._memory.get(uri)
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
