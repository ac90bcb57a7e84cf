"""What a task function gets in a client process, and the loops the task kinds share.

Runs inside the spawned client processes only (``bench.tasks.worker``):
counters are published to the parent through a shared array slot, errors
are counted by gRPC code with the first message of each kept.
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import grpc

from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc.client.channel import ChannelSecurity, open_channel


class Progress:
    """Per-process operation counter, published to a shared array slot twice a second."""

    def __init__(self, slot: Any, index: int) -> None:
        self.count = 0
        self._lock = threading.Lock()
        self._slot, self._index = slot, index
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def add(self, n: int = 1) -> None:
        with self._lock:
            self.count += n

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self._slot[self._index] = self.count

    def close(self) -> None:
        self._stop.set()
        self._slot[self._index] = self.count


class Errors:
    """Failed calls by code (the gRPC status name, or the exception's type), with the first message of each."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.first: dict[str, str] = {}
        self._lock = threading.Lock()

    def add(self, exc: BaseException) -> None:
        if isinstance(exc, grpc.RpcError):
            code = exc.code().name  # type: ignore[attr-defined]
            msg = exc.details() or ""  # type: ignore[attr-defined]
        else:
            code, msg = type(exc).__name__, str(exc)
        with self._lock:
            self.counts[code] = self.counts.get(code, 0) + 1
            self.first.setdefault(code, msg[:300])

    def as_dict(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "first": dict(self.first)}


class Ctx:
    """What a task function gets in a worker process: its task, channels to every node, counters."""

    def __init__(self, index: int, threads: int, task: dict[str, Any], progress: Progress) -> None:
        self.index, self.threads, self.task, self.progress = index, threads, task, progress
        self.errors = Errors()
        addrs = task.get("addresses") or []
        sec = task.get("security")  # {"ca_file", "token"} for a cluster with TLS and tokens
        security = ChannelSecurity.from_files(ca_file=sec["ca_file"], token=sec["token"]) if sec else None
        self.channels = [open_channel(a, security) for a in addrs]
        self.jobs = [pb_grpc.JobServiceStub(ch) for ch in self.channels]
        self.leases = [pb_grpc.LeaseServiceStub(ch) for ch in self.channels]

    def node_of(self, j: int) -> int:
        return (self.index * self.threads + j) % max(1, len(self.channels))

    def close(self) -> None:
        for ch in self.channels:
            ch.close()


def call_retrying(fn: Callable[[], Any], errors: Errors, give_up_at: float) -> Any:
    """Call; on UNAVAILABLE retry (counted) until ``give_up_at`` (wall time). None on failure."""
    delay = 0.02
    while True:
        try:
            return fn()
        except grpc.RpcError as exc:
            errors.add(exc)
            if exc.code() != grpc.StatusCode.UNAVAILABLE or time.time() + delay > give_up_at:  # type: ignore[attr-defined]
                return None
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)


def run_threads(threads: int, target: Callable[[int], Any]) -> list[Any]:
    """``target(j)`` on ``threads`` threads; their results in order (a crash becomes ``{"thread_error": ...}``)."""
    out: list[Any] = [None] * threads

    def run(j: int) -> None:
        try:
            out[j] = target(j)
        except BaseException as exc:  # noqa: BLE001 - reported back to the main process
            out[j] = {"thread_error": "".join(traceback.format_exception(exc))}

    ts = [threading.Thread(target=run, args=(j,), daemon=True) for j in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def thread_errors(parts: list[Any]) -> dict[str, Any]:
    errs = [p["thread_error"] for p in parts if isinstance(p, dict) and "thread_error" in p]
    return {"thread_errors": errs[:3]} if errs else {}


def merge_parts(parts: list[Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The threads' lists under ``keys`` concatenated, plus the first thread crashes."""
    out: dict[str, Any] = {k: [] for k in keys}
    for p in parts:
        if isinstance(p, dict):
            for k in keys:
                out[k].extend(p.get(k, []))
    out.update(thread_errors(parts))
    return out


def closed_loop(ctx: Ctx, threads: int, build: Callable[[], Any], send: Callable[[Any, Any], int]) -> dict[str, Any]:
    """Every thread sends ``build()`` to its node with ``send(stub, request)`` (which returns how
    many jobs it created) until ``ctx.task["until"]``: ``done`` holds a time per job, ``lat`` one
    latency per call; failed calls are counted in ``ctx.errors`` (UNAVAILABLE pauses 50 ms)."""
    until = ctx.task["until"]

    def run(j: int) -> dict[str, Any]:
        stub = ctx.jobs[ctx.node_of(j)]
        done: list[float] = []
        lat: list[float] = []
        while time.time() < until:
            req = build()
            t0 = time.time()
            try:
                ok = send(stub, req)
            except grpc.RpcError as exc:
                ctx.errors.add(exc)
                if exc.code() == grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
                    time.sleep(0.05)
                continue
            t1 = time.time()
            done += [t1] * ok
            lat.append((t1 - t0) * 1000.0)
            ctx.progress.add(ok)
        return {"done": done, "lat": lat}

    return merge_parts(run_threads(threads, run), ("done", "lat"))
