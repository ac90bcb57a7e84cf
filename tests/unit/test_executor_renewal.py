"""The executor's renewer keeps every lease it holds, whatever the mix of TTLs (a fake cluster, no processes)."""

from __future__ import annotations

import threading
import time

import pytest

from raftsched.cluster.domain.leases import Renewal
from raftsched.cluster.executor import Executor, Task, TaskContext
from raftsched.storage import MemoryOutputStore
from tests.executor_fakes import FakeApi

pytestmark = pytest.mark.unit


def _task(lease_id: str, ttl_ms: int) -> Task:
    expires = int(time.time() * 1000) + ttl_ms
    return Task(lease_id, 1, f"run-{lease_id}", "job", 1, "block", b"", 0, expires, 0)


class TwoGrants(FakeApi):
    """Grants a 30 s lease, then (half a second later) a 0.6 s one; notes when each is granted and renewed."""

    def __init__(self) -> None:
        super().__init__()
        self.plan = [("long", 30_000, 0.0), ("short", 600, 0.5)]
        self.granted: dict[str, float] = {}
        self.renewed: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def acquire(self, queues: list[str], max_runs: int, wait_ms: int, types: list[str] | None = None) -> list[Task]:
        with self._lock:
            if not self.plan:
                lease = None
            else:
                lease, ttl_ms, after = self.plan[0]
                if self.granted and time.monotonic() < max(self.granted.values()) + after:
                    lease = None
                else:
                    self.plan.pop(0)
                    self.granted[lease] = time.monotonic()
        if lease is None:
            time.sleep(0.02)
            return []
        return [_task(lease, ttl_ms)]

    def renew(self, leases: list[tuple[str, int]], within_s: float | None = None) -> list[Renewal]:
        now = time.monotonic()
        for lease_id, _ in leases:
            self.renewed.setdefault(lease_id, []).append(now)
        return [Renewal(lease_id, True, int(time.time() * 1000) + 30_000, False, "") for lease_id, _ in leases]


def test_a_lease_with_a_shorter_ttl_is_renewed_in_time_while_a_long_one_is_held() -> None:
    api = TwoGrants()
    release = threading.Event()

    def block(task: Task, ctx: TaskContext) -> bytes:
        release.wait(10)
        return b""

    ex = Executor(api, ["q"], handlers={"block": block}, output=MemoryOutputStore())  # type: ignore[arg-type]
    ex.start()
    try:
        deadline = time.monotonic() + 5
        while len(api.renewed.get("short", [])) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        release.set()
        ex.stop(0)
    assert "short" in api.granted, api.granted
    first = api.renewed.get("short", [])
    # its renewal is due a third of its 0.6 s TTL after the grant, not when the 30 s lease's would be (10 s)
    assert first and first[0] - api.granted["short"] < 0.2 + 0.15, (api.granted, api.renewed)
    assert len(first) >= 2 and first[1] - first[0] < 0.2 + 0.15, first
