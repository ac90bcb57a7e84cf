"""A registered task as the executor calls it, without a cluster: the payload decoded into its annotation, the
result as JSON, ``NonRetryable``/``RetryAfter`` as the executor reads them, ``ctx``, and async tasks on the
worker's event loop (cancelled with the run)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from typing import Any

import pytest

from raftsched import Context, NonRetryable, RetryAfter, Worker
from raftsched.cluster.executor.ports import HandlerError, Task, TaskContext
from raftsched.sdk.event_loop import LoopThread
from raftsched.sdk.tasks import TaskDef

pytestmark = pytest.mark.unit


@dataclasses.dataclass
class Args:
    day: str
    rows: int = 0


def _task(payload: bytes, last: bytes = b"") -> Task:
    return Task("L1", 42, "J1@7", "J1", 2, "report", payload, 0, 0, 1_700_000_000_000, last)


def test_the_payload_is_decoded_and_the_result_sent_as_json() -> None:
    seen: list[Any] = []

    def report(payload: Args, ctx: Context) -> dict:
        seen.append((payload, ctx.run_id, ctx.job_id, ctx.attempt, ctx.fencing_token, ctx.last_heartbeat))
        print("rows:", payload.rows, file=ctx.log)
        return {"rows": payload.rows * 2}

    handler = TaskDef("report", report).handler(None)
    ctx = TaskContext()
    assert handler(_task(b'{"day": "d", "rows": 3}', b'{"page": 4}'), ctx) == b'{"rows":6}'
    assert seen == [(Args("d", 3), "J1@7", "J1", 2, 42, {"page": 4})]
    assert ctx.log.getvalue() == b"rows: 3\n"


def test_a_payload_that_does_not_fit_fails_the_run_as_non_retryable_naming_the_field() -> None:
    handler = TaskDef("report", lambda payload, ctx: None).handler(None)
    typed = TaskDef("report", _typed).handler(None)
    assert handler(_task(b"anything"), TaskContext()) == b""  # unannotated: no decoding to fail
    with pytest.raises(NonRetryable, match=r"cannot decode the payload into Args: field 'rows'") as caught:
        typed(_task(b'{"day": "d", "rows": "many"}'), TaskContext())
    assert caught.value.non_retryable and caught.value.retry_after_s == 0


def _typed(payload: Args) -> str:
    return payload.day


def test_results_bytes_and_text_as_they_are_and_what_json_cannot_hold_is_non_retryable() -> None:
    assert TaskDef("t", lambda: b"\x00raw").handler(None)(_task(b""), TaskContext()) == b"\x00raw"
    assert TaskDef("t", lambda p: "text").handler(None)(_task(b""), TaskContext()) == b"text"
    with pytest.raises(NonRetryable, match="the result of task 't' cannot be sent as JSON"):
        TaskDef("t", lambda: {"x": object()}).handler(None)(_task(b""), TaskContext())


def test_non_retryable_and_retry_after_say_what_the_completion_carries() -> None:
    assert NonRetryable("no such customer").non_retryable
    later = RetryAfter(30, "rate limited")
    assert isinstance(later, HandlerError) and later.retry_after_s == 30.0 and str(later) == "rate limited"
    assert RetryAfter("1m").retry_after_s == 60.0 and "60" in str(RetryAfter("1m"))
    with pytest.raises(ValueError, match="must not be negative"):
        RetryAfter(-1)


def test_signatures_the_worker_takes_and_refuses() -> None:
    assert TaskDef("a", lambda: 1).arity == 0
    assert TaskDef("b", lambda payload: 1).arity == 1
    assert TaskDef("c", lambda payload, ctx, extra=None: 1).arity == 2
    with pytest.raises(TypeError, match="takes too many arguments"):
        TaskDef("d", lambda a, b, c: 1)
    worker = Worker(queues=["q"])

    @worker.task("report")
    def report(payload: Args) -> None: ...

    @worker.task
    def plain() -> None: ...

    assert worker.tasks == ["plain", "report"]
    with pytest.raises(ValueError, match="already registered"):
        worker.register("report", plain)
    with pytest.raises(TypeError, match="unknown job field"):
        worker.schedule("s", every="1h", task="report", colour="blue")


def test_heartbeat_details_are_json_at_most_64_kib_and_ask_for_a_renewal() -> None:
    asked = threading.Event()
    ctx = TaskContext(renew_now=asked.set)
    context = Context(_task(b""), ctx)
    context.heartbeat({"page": 3})
    assert asked.is_set() and ctx.pending_details() == b'{"page":3}'
    with pytest.raises(ValueError, match="at most 65536 are kept"):
        context.heartbeat("x" * 70_000)
    context.heartbeat()  # no details: a renewal only, the pending ones stay
    assert ctx.pending_details() == b'{"page":3}'
    ctx.details_sent(b'{"page":3}')
    assert ctx.pending_details() is None


def test_deadline_is_a_point_in_time() -> None:
    ctx = TaskContext(deadline=time.monotonic() + 60)
    context = Context(_task(b""), ctx)
    assert context.deadline is not None and context.deadline.tzinfo is not None
    left = context.time_left()
    assert left is not None and 55 < left <= 60
    assert Context(_task(b""), TaskContext()).deadline is None


def test_async_tasks_run_on_the_workers_event_loop_thread() -> None:
    loop = LoopThread()
    loop.start()
    threads: list[str] = []

    async def fetch(payload: Args, ctx: Context) -> dict:
        await asyncio.sleep(0.01)
        threads.append(threading.current_thread().name)
        return {"day": payload.day}

    try:
        handler = TaskDef("fetch", fetch).handler(loop)
        assert TaskDef("fetch", fetch).is_async
        assert handler(_task(b'{"day": "d"}'), TaskContext()) == b'{"day":"d"}'
        assert handler(_task(b'{"day": "e"}'), TaskContext()) == b'{"day":"e"}'
        assert threads == ["raftsched-worker-loop"] * 2
    finally:
        loop.stop()


def test_an_async_task_is_cancelled_with_its_run() -> None:
    loop = LoopThread()
    loop.start()
    cleaned = threading.Event()

    async def forever(payload: Any, ctx: Context) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            cleaned.set()

    ctx = TaskContext()
    ctx.reason = "cancelled by request"
    threading.Timer(0.2, ctx.cancelled.set).start()
    try:
        with pytest.raises(HandlerError, match="stopped: cancelled by request"):
            TaskDef("forever", forever).handler(loop)(_task(b""), ctx)
        assert cleaned.wait(5)
    finally:
        loop.stop()
