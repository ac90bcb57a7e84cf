"""A run's log while it runs: bounded in size, spooled to disk past a small in-memory part.

``LogSettings`` (the executor's ``--log-limit-mb`` and ``--log-spool-dir``)
makes each run's ``BoundedLog``; nothing here is configured through globals.
"""

from __future__ import annotations

import io
import os
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

DEFAULT_LOG_LIMIT = 64 * 1024 * 1024
#: a log stays in memory up to this size, then moves to an anonymous temp file
SPOOL_MEMORY_BYTES = 256 * 1024
MIN_LOG_LIMIT = 1024


@dataclass(frozen=True)
class LogSettings:
    """How much log each attempt keeps (head and tail) and where it spools (empty: ``$TMPDIR``)."""

    limit: int = DEFAULT_LOG_LIMIT
    spool_dir: str = ""

    def __post_init__(self) -> None:
        if self.limit < MIN_LOG_LIMIT:
            raise ValueError(f"the log limit must be at least {MIN_LOG_LIMIT} bytes, got {self.limit}")

    def new_log(self) -> "BoundedLog":
        return BoundedLog(self.limit, self.spool_dir)


class BoundedLog:
    """A run's log, spooled to disk, keeping the first and the last part past ``limit`` bytes.

    Memory stays bounded: the log lives in memory up to ``SPOOL_MEMORY_BYTES``,
    then in an anonymous temp file (deleted when closed, or when the process
    dies). The file holds the head (the first ``limit // 2`` bytes) and, after
    it, a ring of the latest ``limit - limit // 2`` bytes. ``open_reader()``
    streams the kept log in order — head, a note saying how much was dropped,
    tail — and ``size`` is its length; ``getvalue()`` reads it whole (small logs).
    """

    def __init__(self, limit: int = DEFAULT_LOG_LIMIT, spool_dir: str | None = None) -> None:
        self.limit = limit
        self._head_cap = self.limit // 2
        self._ring_cap = self.limit - self._head_cap
        self._spool_dir = spool_dir or None
        self._file: BinaryIO = io.BytesIO()
        self._on_disk = False
        self.written = 0  # every byte ever written
        self.dropped = 0
        self.failure = ""  # why the spool stopped taking bytes (then ``unsaved`` counts them)
        self.unsaved = 0
        self._lock = threading.Lock()

    def write(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8", "replace")
        if not data:
            return
        with self._lock:
            if self._file.closed:
                return
            if self.failure:
                self.unsaved += len(data)
                return
            before = self.written
            try:
                self._write(memoryview(data))
            except OSError as exc:  # e.g. a full disk: keep what we have, count the rest, never stop the pump
                self.failure = f"{exc.strerror or exc}"
                self.unsaved += len(data) - (self.written - before)
                self.dropped = max(0, self.written - self.limit)

    def _write(self, view: memoryview) -> None:
        if self.written < self._head_cap:
            n = min(len(view), self._head_cap - self.written)
            self._put(self.written, view[:n])
            self.written += n
            view = view[n:]
        while view:  # the ring: tail byte i (counting from the end of the head) lives at head_cap + i % ring_cap
            pos = (self.written - self._head_cap) % self._ring_cap
            n = min(len(view), self._ring_cap - pos)
            self._put(self._head_cap + pos, view[:n])
            self.written += n
            view = view[n:]
        self.dropped = max(0, self.written - self.limit)

    def _put(self, offset: int, data: memoryview) -> None:
        end = offset + len(data)
        if not self._on_disk and end > SPOOL_MEMORY_BYTES:
            disk = tempfile.TemporaryFile(prefix="raftsched-log-", dir=self._spool_dir)
            disk.write(self._file.getbuffer())  # type: ignore[attr-defined]
            self._file.close()
            self._file, self._on_disk = disk, True
        self._file.seek(offset)
        self._file.write(data)

    def _segments(self) -> list[tuple[int, int] | bytes]:
        """The kept log as (file offset, length) pieces and the note, in reading order."""
        lost: list[tuple[int, int] | bytes] = []
        if self.failure:
            lost = [f"\n... [the last {self.unsaved} bytes of log were lost: spooling failed: {self.failure}] ...\n".encode()]
        if not self.dropped:
            return [(0, self.written), *lost]
        split = (self.written - self._head_cap) % self._ring_cap
        note = f"\n... [{self.dropped} bytes of log dropped: over the {self.limit}-byte limit] ...\n".encode()
        return [
            (0, self._head_cap),
            note,
            (self._head_cap + split, self._ring_cap - split),
            (self._head_cap, split),
            *lost,
        ]

    @property
    def head_cap(self) -> int:
        """How many first bytes are kept whole whatever follows (the head; what live output ships)."""
        return self._head_cap

    def read_head(self, start: int, n: int) -> bytes:
        """Up to ``n`` bytes of the head from ``start``, as written so far (empty past what is written)."""
        with self._lock:
            if self._file.closed:
                raise ValueError("this log has been closed")
            end = min(start + n, self.written, self._head_cap)
        return self._read_at(start, end - start) if end > start else b""

    @property
    def size(self) -> int:
        with self._lock:
            return sum(len(s) if isinstance(s, bytes) else s[1] for s in self._segments())

    def open_reader(self) -> BinaryIO:
        """A reader of the kept log as it is now (later writes are not seen reliably: read after the run)."""
        with self._lock:
            if self._file.closed:
                raise ValueError("this log has been closed")
            self._file.flush()
            segments = self._segments()
        return cast(BinaryIO, _LogReader(self, segments))

    def _read_at(self, offset: int, n: int) -> bytes:
        with self._lock:
            if self._on_disk:
                return os.pread(self._file.fileno(), n, offset)
            return bytes(self._file.getbuffer()[offset : offset + n])  # type: ignore[attr-defined]

    def getvalue(self) -> bytes:
        with self.open_reader() as r:
            return r.read()

    def close(self) -> None:
        """Free the spool file; the log cannot be read after this."""
        with self._lock:
            self._file.close()


class _LogReader(io.RawIOBase):
    """Sequential reads over a BoundedLog's segments (one piece of the file at a time)."""

    def __init__(self, log: BoundedLog, segments: list[tuple[int, int] | bytes]) -> None:
        super().__init__()
        self._log = log
        self._segments = [s for s in segments if (len(s) if isinstance(s, bytes) else s[1])]
        self._index = 0
        self._pos = 0  # within the current segment

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        out = bytearray()
        while self._index < len(self._segments) and (size < 0 or len(out) < size):
            seg = self._segments[self._index]
            length = len(seg) if isinstance(seg, bytes) else seg[1]
            want = length - self._pos if size < 0 else min(length - self._pos, size - len(out))
            if isinstance(seg, bytes):
                out += seg[self._pos : self._pos + want]
            else:
                chunk = self._log._read_at(seg[0] + self._pos, want)
                if not chunk:
                    raise OSError("the log spool file ended early")
                out += chunk
                want = len(chunk)
            self._pos += want
            if self._pos >= length:
                self._index, self._pos = self._index + 1, 0
        return bytes(out)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
