"""Job types an executor can run: the built-in ``shell`` and ``http``, and user callables.

A handler is ``fn(task, ctx) -> Outcome | bytes | str | None``: returning
means success (the value becomes the run's result), raising means failure
(the exception text becomes the run's error). ``ctx.log`` collects the run's
log, bounded in size; ``ctx.cancelled`` is set when the run is cancelled, its
lease is lost, or the executor shuts down; ``ctx.deadline`` is the job's
timeout as a monotonic instant (or None).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Callable, Protocol

DEFAULT_LOG_LIMIT = 1024 * 1024


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
    """Keeps the first and the last part of a log when it grows past ``limit`` bytes."""

    def __init__(self, limit: int = DEFAULT_LOG_LIMIT) -> None:
        self.limit = limit
        self._head = bytearray()
        self._tail = bytearray()
        self.dropped = 0
        self._lock = threading.Lock()

    def write(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8", "replace")
        with self._lock:
            half = self.limit // 2
            room = half - len(self._head)
            if room > 0:
                self._head += data[:room]
                data = data[room:]
            if data:
                self._tail += data
                if len(self._tail) > half:
                    cut = len(self._tail) - half
                    self.dropped += cut
                    del self._tail[:cut]

    def getvalue(self) -> bytes:
        with self._lock:
            if not self.dropped:
                return bytes(self._head + self._tail)
            note = f"\n... [{self.dropped} bytes of log dropped: over the {self.limit}-byte limit] ...\n".encode()
            return bytes(self._head) + note + bytes(self._tail)


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
        raise HandlerError(f"{task.type} payload needs a string {required!r} field, e.g. {{\"{required}\": \"...\"}}")
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
            status, content = resp.status, resp.read(ctx.log.limit)
    except urllib.error.HTTPError as exc:
        status, content = exc.code, exc.read(ctx.log.limit)
    except (urllib.error.URLError, OSError) as exc:
        raise HandlerError(f"{req.get_method()} {payload['url']} failed: {exc}") from exc
    ctx.log.write(f"{req.get_method()} {payload['url']} -> {status}\n".encode())
    ctx.log.write(content)
    if not 200 <= status < 300:
        raise HandlerError(f"{req.get_method()} {payload['url']} answered {status}")
    return content[:65536]


def noop_handler(task: Task, ctx: TaskContext) -> bytes:
    """Does nothing and succeeds (benchmarks, tests)."""
    return b""


BUILTIN_HANDLERS: dict[str, Callable[[Task, TaskContext], object]] = {
    "shell": shell_handler,
    "http": http_handler,
    "noop": noop_handler,
}
