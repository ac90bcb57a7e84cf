"""Small helpers every part of the benchmark uses: wall clock in ms, job specs, rounding, the repo root."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb

#: the repository root (scripts/bench/harness/common.py -> three folders up): executors and git run here
REPO_ROOT = str(Path(__file__).resolve().parents[3])


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def ts_ms(t: Any) -> int:
    """A ``google.protobuf.Timestamp`` in whole milliseconds."""
    return t.seconds * 1000 + t.nanos // 1_000_000


def every_spec(name: str, every_s: int, queue_name: str) -> pb.JobSpec:
    spec = pb.JobSpec(name=name, queue=queue_name, type="shell", payload=b'{"command": "true"}')
    spec.every.seconds = every_s
    return spec


def at_spec(name: str, at: int, queue_name: str) -> pb.JobSpec:
    spec = pb.JobSpec(name=name, queue=queue_name, type="noop")  # the executors' built-in no-op handler
    spec.at.seconds, rem = divmod(at, 1000)
    spec.at.nanos = rem * 1_000_000
    return spec


def r1(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(x, nd)


def split(seq: list[Any], n: int) -> list[list[Any]]:
    """``seq`` dealt round-robin into ``n`` parts (one per client process)."""
    return [seq[i::n] for i in range(n)]
