"""The local output store: run output as files under a directory (the default when no bucket is set).

    <root>/<job_id>/<run_id>/attempt-<n>-token-<t>.log      file://<root>/...log
    <root>/<job_id>/<run_id>/attempt-<n>-token-<t>.result

Implements ``cluster.executor.ports.OutputStore``; ``read_file_uri`` reads a
``file://`` log URI back (for ``storage.reader.OutputReader``).
"""

from __future__ import annotations

import contextlib
import io
import os
from typing import BinaryIO

from cluster.domain.output import OutputKey, OutputMissing, OutputStoreError, is_log_name, result_name
from cluster.executor.ports import LogSource, as_log_source


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
            try:
                while chunk := reader.read(self.CHUNK):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:  # a failed source or a full disk: leave no half-written .tmp behind
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise

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
    if not is_log_name(path) or "/../" in path or not os.path.isabs(path):
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
        with open(result_name(path), "rb") as f:
            result = f.read()
    except OSError:
        pass
    return log, result


def truncation_note(size: int, max_bytes: int, uri: str) -> bytes:
    return f"\n... [{size - 2 * (max_bytes // 2)} bytes of a {size}-byte log left out here; the whole log is at {uri}] ...\n".encode()
