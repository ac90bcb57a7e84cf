"""The executor's client-side group commit of completions (``raftsched.cluster.executor.completer.Completer``)."""

from __future__ import annotations

import threading
import time

import pytest

from raftsched.cluster.executor.completer import Completer
from raftsched.cluster.executor.ports import Finished, LeaseLost, Task

pytestmark = pytest.mark.unit


def _task(i: int) -> Task:
    return Task(
        lease_id=f"L{i}",
        fencing_token=i,
        run_id=f"j@{i}",
        job_id="j",
        attempt=1,
        type="noop",
        payload=b"",
        timeout_ms=0,
        expires_ms=0,
        scheduled_ms=0,
    )


def _done(i: int) -> Finished:
    return Finished(_task(i), True)


class BatchApi:
    """The first call (either method) blocks until released; records every call's lease ids."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.single: list[str] = []
        self.first_in = threading.Event()
        self.release = threading.Event()
        self.lose: set[str] = set()
        self.fail_all: Exception | None = None

    def _hold_first(self) -> None:
        if not self.first_in.is_set():
            self.first_in.set()
            assert self.release.wait(5)

    def complete(self, finished: Finished) -> None:
        self.single.append(finished.task.lease_id)
        self._hold_first()
        if finished.task.lease_id in self.lose:
            raise LeaseLost(f"{finished.task.lease_id} lost")

    def complete_many(self, done: list[Finished]) -> list[Exception | None]:
        self.calls.append([d.task.lease_id for d in done])
        self._hold_first()
        if self.fail_all is not None:
            raise self.fail_all
        return [LeaseLost("lost") if d.task.lease_id in self.lose else None for d in done]


def _run(completer: Completer, items: list[int]) -> tuple[list[threading.Thread], dict[int, Exception | None]]:
    out: dict[int, Exception | None] = {}

    def one(i: int) -> None:
        out[i] = completer.complete(_done(i))

    threads = [threading.Thread(target=one, args=(i,)) for i in items]
    for t in threads:
        t.start()
    return threads, out


def _queued(completer: Completer, n: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with completer._lock:
            if len(completer._queue) >= n:
                return
        time.sleep(0.005)
    raise AssertionError(f"{n} completions never queued")


def _queue_together(completer: Completer, items: list[int]) -> dict[int, Exception | None]:
    """Complete ``items`` from threads while a call is (pretended) on its way, so they queue
    together; then send them as the one next call and wait for every answer."""
    completer._sending = True
    threads, out = _run(completer, items)
    _queued(completer, len(items))
    completer._sending = False
    completer._drain()
    for t in threads:
        t.join(5)
    return out


def test_completions_that_finish_during_a_call_go_together_in_the_next() -> None:
    api = BatchApi()
    api.lose = {"L3"}
    completer = Completer(api)
    first, out = _run(completer, [0])  # alone: sent at once through complete(), which we hold open
    assert api.first_in.wait(5)
    later, out_later = _run(completer, [1, 2, 3, 4])
    _queued(completer, 4)  # they wait behind the open call
    assert api.calls == []
    api.release.set()
    for t in first + later:
        t.join(5)
    assert api.single == ["L0"] and out == {0: None}
    assert api.calls == [["L1", "L2", "L3", "L4"]]  # then sent together in one call
    assert isinstance(out_later[3], LeaseLost)
    assert out_later[1] is None and out_later[2] is None and out_later[4] is None


def test_a_failed_call_fails_every_item_and_the_next_ones_still_go() -> None:
    api = BatchApi()
    api.release.set()
    api.fail_all = RuntimeError("UNAVAILABLE: no leader")
    completer = Completer(api)
    out = _queue_together(completer, [1, 2, 3])
    assert api.calls == [["L1", "L2", "L3"]]
    assert all(isinstance(out[i], RuntimeError) for i in (1, 2, 3))
    api.fail_all = None
    assert completer.complete(_done(7)) is None  # a lone completion: complete() directly
    assert api.single == ["L7"]


class SingleApi:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def complete(self, finished: Finished) -> None:
        self.seen.append(finished.task.lease_id)
        if finished.task.fencing_token == 2:
            raise LeaseLost("stale token")


def test_an_api_without_complete_many_gets_one_call_per_run() -> None:
    api = SingleApi()
    completer = Completer(api)  # type: ignore[arg-type]
    out = _queue_together(completer, [1, 2, 3])
    assert sorted(api.seen) == ["L1", "L2", "L3"]
    assert out[1] is None and out[3] is None and isinstance(out[2], LeaseLost)
