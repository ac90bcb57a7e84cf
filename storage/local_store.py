"""The local output store: run output as files under a directory (the default when no bucket is set).

    <root>/<job_id>/<run_id>/attempt-<n>-token-<t>.log      file://<root>/...log
    <root>/<job_id>/<run_id>/attempt-<n>-token-<t>.result
    <root>/<job_id>/<run_id>/attempt-<n>-token-<t>.log.part-<offset>   live parts, while it runs

Implements ``raftsched.cluster.executor.ports.OutputStore`` and ``LiveOutputStore``.
Files are created ``0640`` and folders ``0750`` (less under a stricter
umask): a run's log may hold what its command printed, so other users of the
host never read it; a node that runs as another user of the executor's group
still does.
Live parts are small files, one per ship (at most one a second per run,
removed once the whole log is stored), not one file appended to: the same
layout, reader and contract as S3's parts, and a re-shipped part simply
replaces itself. ``read_file_slice`` and ``read_file_live`` read a
``file://`` log URI back from an offset (for ``raftsched.storage.reader.OutputReader``,
which first checks that the URI lies inside the node's store; parts are
opened without following symlinks).
"""

from __future__ import annotations

import contextlib
import io
import os
from typing import BinaryIO

from raftsched.cluster.domain.live_output import LogSlice, Part, parse_part, part_name
from raftsched.cluster.domain.output import OutputKey, OutputMissing, OutputStoreError, is_log_name, result_name
from raftsched.cluster.executor.ports import LogSource, as_log_source
from raftsched.storage.log_slices import live_slice, truncation_note, window_slice

__all__ = ["LocalOutputStore", "read_file_live", "read_file_slice", "read_file_uri", "truncation_note"]

#: a run's output files: its owner writes, its group (a node of another user) reads, others nothing
FILE_MODE = 0o640
#: the folders of jobs and runs (and the store's root, when it creates it)
DIR_MODE = 0o750


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
            os.makedirs(self.root, DIR_MODE, exist_ok=True)
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

    def put_part(self, key: OutputKey, offset: int, data: bytes, held: bool = False) -> None:
        path = part_name(os.path.join(self.root, key.relpath()) + ".log", offset, held)
        try:
            _ensure_dir(os.path.dirname(path))
            self._write(path, io.BytesIO(data))
        except OSError as exc:
            raise OutputStoreError(f"cannot write the live log part {path}: {exc.strerror or exc}") from exc

    def delete_parts(self, key: OutputKey, parts: list[tuple[int, bool]]) -> None:
        log = os.path.join(self.root, key.relpath()) + ".log"
        for offset, held in parts:
            with contextlib.suppress(FileNotFoundError):
                os.remove(part_name(log, offset, held))

    def _write(self, path: str, reader: BinaryIO) -> None:
        tmp = f"{path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)  # no buffered file object
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
        os.mkdir(path, DIR_MODE)
        return
    except FileExistsError:
        return
    except FileNotFoundError:
        pass
    try:
        os.mkdir(os.path.dirname(path), DIR_MODE)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), DIR_MODE, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, DIR_MODE)


def _log_path(uri: str) -> str:
    if not uri.startswith("file://"):
        raise OutputMissing(f"{uri} is not a local file URI")
    path = uri[len("file://") :]
    if not is_log_name(path) or "/../" in path or not os.path.isabs(path):
        raise OutputMissing(f"{uri} is not a raftsched run log (expected /.../attempt-N-token-T.log)")
    return path


def read_file_uri(uri: str, max_bytes: int = 0) -> tuple[bytes, bytes]:
    """(log, result) of a ``file://`` log URI; only raftsched run logs are read. Raises ``OutputMissing``."""
    piece, result = read_file_slice(uri, 0, max_bytes)
    return piece.data, result


def read_file_slice(uri: str, offset: int, max_bytes: int = 0) -> tuple[LogSlice, bytes]:
    """The log at a ``file://`` URI from ``offset`` (``plan_window``), and its result. Raises ``OutputMissing``."""
    path = _log_path(uri)
    try:
        with open(path, "rb") as f:
            fd = f.fileno()
            piece = window_slice(os.fstat(fd).st_size, offset, max_bytes, uri, lambda a, b: _pread(fd, a, b))
    except OSError as exc:
        raise OutputMissing(f"log {path} cannot be read on this node: {exc.strerror}") from exc
    result = b""
    try:
        with open(result_name(path), "rb") as f:
            result = f.read()
    except OSError:
        pass
    return piece, result


def read_file_live(uri: str, offset: int, max_bytes: int = 0) -> LogSlice:
    """The live parts beside the log at a ``file://`` URI, from ``offset``; none yet is an empty slice."""
    path = _log_path(uri)
    parts = []
    try:
        with os.scandir(os.path.dirname(path)) as entries:
            for entry in entries:
                found = parse_part(path, entry.path)
                if found is not None and entry.is_file(follow_symlinks=False):
                    parts.append(Part(found[0], entry.stat(follow_symlinks=False).st_size, found[1], entry.path))
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise OutputMissing(f"live log parts of {path} cannot be listed on this node: {exc.strerror}") from exc
    return live_slice(parts, offset, max_bytes, _read_part)


def _read_part(part: Part, start: int, end: int) -> bytes | None:
    try:
        fd = os.open(part.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)  # a part is never a symlink
    except FileNotFoundError:
        return None  # removed since it was listed: the whole log is stored by now
    except OSError as exc:
        raise OutputMissing(f"live log part {part.name} cannot be read on this node: {exc.strerror}") from exc
    try:
        return _pread(fd, start, end)
    finally:
        os.close(fd)


def _pread(fd: int, start: int, end: int) -> bytes:
    out = bytearray()
    while start + len(out) < end:
        chunk = os.pread(fd, end - start - len(out), start + len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)
