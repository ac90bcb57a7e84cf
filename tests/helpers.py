"""Test helpers: build protobuf specs tersely, wait for conditions."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from protos.raftsched.v1 import scheduler_pb2 as pb
from rpc import convert as cv

T = TypeVar("T")


def every_spec(name: str, every_ms: int, **kw: object) -> pb.JobSpec:
    spec = pb.JobSpec(name=name, type="noop", **kw)  # type: ignore[arg-type]
    cv.to_dur(every_ms, spec.every)
    return spec


def at_spec(name: str, at_ms: int, **kw: object) -> pb.JobSpec:
    spec = pb.JobSpec(name=name, type="noop", **kw)  # type: ignore[arg-type]
    cv.to_ts(at_ms, spec.at)
    return spec


def cron_spec(name: str, expression: str, timezone: str = "UTC", **kw: object) -> pb.JobSpec:
    spec = pb.JobSpec(name=name, type="noop", **kw)  # type: ignore[arg-type]
    spec.cron.expression, spec.cron.timezone = expression, timezone
    return spec


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def wait_for(fn: Callable[[], T | None], timeout: float, what: str, interval: float = 0.1) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")
