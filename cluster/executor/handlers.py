"""Job types an executor can run: the built-in ``shell`` and ``http``, and user callables.

A handler is ``fn(task, ctx) -> Outcome | bytes | str | None``: returning
means success (the value becomes the run's result), raising means failure
(the exception text becomes the run's error). ``ctx.log`` collects the run's
log, bounded in size and spooled to a temp file (``BoundedLog``);
``ctx.cancelled`` is set when the run is cancelled, its lease is lost, or
the executor shuts down; ``ctx.deadline`` is the job's
timeout as a monotonic instant (or None).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Protocol, cast

DEFAULT_LOG_LIMIT = 64 * 1024 * 1024
#: a log stays in memory up to this size, then moves to an anonymous temp file
SPOOL_MEMORY_BYTES = 256 * 1024
#: where spool files go (None: the system temp dir, $TMPDIR); ``configure_log_spool`` sets both
SPOOL_DIR: str | None = None


def configure_log_spool(limit: int | None = None, spool_dir: str | None = None) -> None:
    """Set the log cap and spool directory for the contexts created from now on (the executor's flags)."""
    global DEFAULT_LOG_LIMIT, SPOOL_DIR
    if limit is not None:
        if limit < 1024:
            raise ValueError("the log limit must be at least 1024 bytes")
        DEFAULT_LOG_LIMIT = limit
    if spool_dir is not None:
        SPOOL_DIR = spool_dir or None


@dataclass(frozen=True)
class Task:
    """One leased run, as the executor sees it."""

    lease_id: str
    fencing_token: int
    run_id: str
    job_id: str
    attempt: int
    type: str
    payload: bytes
    timeout_ms: int
    expires_ms: int
    scheduled_ms: int


class BoundedLog:
    """A run's log, spooled to disk, keeping the first and the last part past ``limit`` bytes.

    Memory stays bounded: the log lives in memory up to ``SPOOL_MEMORY_BYTES``,
    then in an anonymous temp file (deleted when closed, or when the process
    dies). The file holds the head (the first ``limit // 2`` bytes) and, after
    it, a ring of the latest ``limit - limit // 2`` bytes. ``open_reader()``
    streams the kept log in order — head, a note saying how much was dropped,
    tail — and ``size`` is its length; ``getvalue()`` reads it whole (small logs).
    """

    def __init__(self, limit: int | None = None, spool_dir: str | None = None) -> None:
        self.limit = DEFAULT_LOG_LIMIT if limit is None else limit
        self._head_cap = self.limit // 2
        self._ring_cap = self.limit - self._head_cap
        self._spool_dir = spool_dir if spool_dir is not None else SPOOL_DIR
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


@dataclass
class TaskContext:
    log: BoundedLog = field(default_factory=BoundedLog)
    cancelled: threading.Event = field(default_factory=threading.Event)
    deadline: float | None = None
    reason: str = ""

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()


class LeaseLost(Exception):
    """The cluster refused a completion or renewal: the lease expired or was superseded."""


class HandlerError(Exception):
    """A handler's failure with a message meant for the run's error field."""


class Handler(Protocol):
    def __call__(self, task: Task, ctx: TaskContext) -> object: ...


def _json_payload(task: Task, required: str) -> dict:
    try:
        payload = json.loads(task.payload.decode("utf-8") or "{}")
    except (UnicodeDecodeError, ValueError) as exc:
        raise HandlerError(f"{task.type} payload is not JSON: {exc}") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get(required), str):
        raise HandlerError(f'{task.type} payload needs a string {required!r} field, e.g. {{"{required}": "..."}}')
    return payload


def _pump(stream: object, log: BoundedLog) -> None:
    for chunk in iter(lambda: stream.read1(65536), b""):  # type: ignore[attr-defined]
        log.write(chunk)


def shell_handler(task: Task, ctx: TaskContext) -> bytes:
    """``{"command": "...", "env": {...}, "cwd": "..."}`` run with /bin/sh -c; exit code 0 is success."""
    payload = _json_payload(task, "command")
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (payload.get("env") or {}).items()})
    env.update({"RAFTSCHED_RUN_ID": task.run_id, "RAFTSCHED_JOB_ID": task.job_id, "RAFTSCHED_ATTEMPT": str(task.attempt)})
    proc = subprocess.Popen(
        ["/bin/sh", "-c", payload["command"]],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=payload.get("cwd") or None,
        env=env,
        start_new_session=True,
    )
    pump = threading.Thread(target=_pump, args=(proc.stdout, ctx.log), daemon=True)
    pump.start()
    stopped = ""
    while proc.poll() is None:
        left = ctx.time_left()
        if left is not None and left <= 0:
            stopped = f"timed out after {task.timeout_ms} ms"
        elif ctx.cancelled.is_set():
            stopped = ctx.reason or "cancelled"
        if stopped:
            _kill_group(proc)
            break
        time.sleep(0.02)
    proc.wait()
    pump.join(timeout=5)
    if stopped:
        raise HandlerError(stopped)
    if proc.returncode != 0:
        raise HandlerError(f"command exited with code {proc.returncode}")
    return json.dumps({"exit_code": 0}).encode()


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=2)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def http_handler(task: Task, ctx: TaskContext) -> bytes:
    """``{"method": "POST", "url": "...", "headers": {...}, "body": "..."}``; a 2xx answer is success."""
    payload = _json_payload(task, "url")
    body = payload.get("body")
    data = body.encode("utf-8") if isinstance(body, str) else None
    req = urllib.request.Request(payload["url"], data=data, method=str(payload.get("method") or "GET").upper())
    for k, v in (payload.get("headers") or {}).items():
        req.add_header(str(k), str(v))
    left = ctx.time_left()
    timeout = max(0.1, left) if left is not None else 60.0
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, content = resp.status, _copy_body(resp, req, ctx)
    except urllib.error.HTTPError as exc:
        status, content = exc.code, _copy_body(exc, req, ctx)
    except (urllib.error.URLError, OSError) as exc:
        raise HandlerError(f"{req.get_method()} {payload['url']} failed: {exc}") from exc
    if not 200 <= status < 300:
        raise HandlerError(f"{req.get_method()} {payload['url']} answered {status}")
    return content


def _copy_body(resp: Any, req: urllib.request.Request, ctx: TaskContext, keep: int = 65536) -> bytes:
    """Stream an answer's body into the log (bounded there); return its first ``keep`` bytes for the result."""
    ctx.log.write(f"{req.get_method()} {req.full_url} -> {getattr(resp, 'status', None) or resp.code}\n".encode())
    first = bytearray()
    for chunk in iter(lambda: resp.read(65536), b""):
        ctx.log.write(chunk)
        if len(first) < keep:
            first += chunk[: keep - len(first)]
    return bytes(first)


def noop_handler(task: Task, ctx: TaskContext) -> bytes:
    """Does nothing and succeeds (benchmarks, tests)."""
    return b""


BUILTIN_HANDLERS: dict[str, Callable[[Task, TaskContext], object]] = {
    "shell": shell_handler,
    "http": http_handler,
    "noop": noop_handler,
}
