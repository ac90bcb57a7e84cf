"""The built-in job types an executor runs: ``shell``, ``http`` and ``noop``.

Each is a handler ``fn(task, ctx)`` (see ``cluster.executor.ports``); users
register their own beside them.
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
from typing import Any, Callable

from cluster.executor.bounded_log import BoundedLog
from cluster.executor.ports import HandlerError, Task, TaskContext


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
