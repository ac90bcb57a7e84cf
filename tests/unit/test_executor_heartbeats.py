"""The executor's side of the SDK, with a fake cluster: a heartbeat renews at once and carries its details once,
a handler's non-retryable or retry-after failure reaches the completion, the lease API puts both on the wire,
an executor without an output store refuses to start, and a failing cluster is one warning line per few seconds."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from raftsched.cluster.domain.errors import ConfigError
from raftsched.cluster.domain.leases import Renewal
from raftsched.cluster.executor import Executor, HandlerError, Task, TaskContext
from raftsched.cluster.executor.ports import Finished
from raftsched.cluster.executor.quiet_log import QuietWarning
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.lease_api import GrpcLeaseApi, _complete_request
from raftsched.storage import MemoryOutputStore
from tests.executor_fakes import FakeApi

pytestmark = pytest.mark.unit


class OneRun(FakeApi):
    """Grants one run of type ``t`` (a 30 s lease), records renewals (with their details) and completions."""

    def __init__(self) -> None:
        super().__init__()
        self.granted = False
        self.renewals: list[dict[str, bytes]] = []
        self.finished: list[Finished] = []
        self.renewed = threading.Condition()

    def acquire(self, queues: list[str], max_runs: int, wait_ms: int, types: list[str] | None = None) -> list[Task]:
        if self.granted:
            time.sleep(0.02)
            return []
        self.granted = True
        return [Task("L1", 7, "J@1", "J", 1, "t", b"", 0, int(time.time() * 1000) + 30_000, 0, b'{"page": 1}')]

    def renew(
        self, leases: list[tuple[str, int]], within_s: float | None = None, details: dict[str, bytes] | None = None
    ) -> list[Renewal]:
        with self.renewed:
            self.renewals.append(dict(details or {}))
            self.renewed.notify_all()
        return [Renewal(lease_id, True, int(time.time() * 1000) + 30_000, False, "") for lease_id, _ in leases]

    def complete(self, finished: Finished) -> None:
        self.finished.append(finished)
        super().complete(finished)


def _run(api: OneRun, handler: Any) -> None:
    ex = Executor(api, ["q"], handlers={"t": handler}, output=MemoryOutputStore())  # type: ignore[arg-type]
    ex.start()
    try:
        deadline = time.monotonic() + 10
        while not api.finished and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        ex.stop(1)
    assert api.finished, "the run was not completed"


def test_a_heartbeat_renews_now_with_its_details_sent_once() -> None:
    api = OneRun()
    seen: list[bytes] = []

    def handler(task: Task, ctx: TaskContext) -> bytes:
        seen.append(task.last_heartbeat)
        ctx.heartbeat(b'{"page": 2}')
        with api.renewed:  # the renewer's own round is a third of the 30 s TTL away: this one is the heartbeat's
            api.renewed.wait_for(lambda: any(api.renewals), timeout=5)
        ctx.heartbeat()  # a renewal, no details
        with api.renewed:
            api.renewed.wait_for(lambda: len(api.renewals) >= 2, timeout=5)
        return b"ok"

    _run(api, handler)
    assert seen == [b'{"page": 1}']
    with_details = [r for r in api.renewals if r]
    assert with_details == [{"L1": b'{"page": 2}'}], api.renewals
    assert len(api.renewals) >= 2


def test_details_not_sent_yet_go_before_the_completion() -> None:
    api = OneRun()

    def fail_at_once(task: Task, ctx: TaskContext) -> bytes:
        ctx.heartbeat(b'{"page": 9}')
        raise RuntimeError("boom")

    _run(api, fail_at_once)
    assert {"L1": b'{"page": 9}'} in api.renewals
    assert api.finished[0].error == "RuntimeError: boom"


def test_a_handlers_verdict_reaches_the_completion() -> None:
    api = OneRun()

    def refuse(task: Task, ctx: TaskContext) -> bytes:
        raise HandlerError("no such customer", non_retryable=True)

    _run(api, refuse)
    done = api.finished[0]
    assert (done.succeeded, done.error, done.non_retryable, done.retry_after_ms) == (False, "no such customer", True, 0)

    api = OneRun()

    def later(task: Task, ctx: TaskContext) -> bytes:
        raise HandlerError("rate limited", retry_after_s=2.5)

    _run(api, later)
    assert (api.finished[0].non_retryable, api.finished[0].retry_after_ms) == (False, 2500)


def test_the_lease_api_puts_verdicts_and_details_on_the_wire() -> None:
    task = Task("L1", 7, "J@1", "J", 1, "t", b"", 0, 0, 0)
    req = _complete_request(Finished(task, False, error="x", non_retryable=True), "e1")
    assert req.non_retryable and not req.HasField("retry_after")
    req = _complete_request(Finished(task, False, error="x", retry_after_ms=30_000), "e1")
    assert not req.non_retryable and req.retry_after.seconds == 30
    req = _complete_request(Finished(task, True, non_retryable=True, retry_after_ms=5), "e1")
    assert not req.non_retryable and not req.HasField("retry_after")  # only a failure carries them

    sent: list[Any] = []

    class Calls:
        def lease(self, method: str, request: Any, **kw: Any) -> Any:
            sent.append(request)
            return pb.RenewLeaseResponse(leases=[pb.LeaseRenewal(lease_id=ref.lease_id, ok=True) for ref in request.leases])

    api = GrpcLeaseApi(Calls(), "e1")  # type: ignore[arg-type]
    api.renew([("L1", 7), ("L2", 8)], details={"L2": b'{"n": 1}'})
    assert [(r.lease_id, r.details) for r in sent[0].leases] == [("L1", b""), ("L2", b'{"n": 1}')]


def test_the_lease_api_asks_for_statuses_only_and_reads_each_item() -> None:
    sent: list[Any] = []

    class Calls:
        def lease(self, method: str, request: Any, **kw: Any) -> Any:
            sent.append((method, request))
            return pb.CompleteRunsResponse(
                results=[pb.CompleteRunResult(), pb.CompleteRunResult(status=pb.ItemStatus(code=9, message="stale"))]
            )

    task = Task("L1", 7, "J@1", "J", 1, "t", b"", 0, 0, 0)
    api = GrpcLeaseApi(Calls(), "e1")  # type: ignore[arg-type]
    answers = api.complete_many([Finished(task, True), Finished(task, True)])
    assert [method for method, _ in sent] == ["CompleteRuns"] and sent[0][1].status_only
    assert answers[0] is None and isinstance(answers[1], Exception) and "stale" in str(answers[1])


def test_an_executor_without_an_output_store_refuses_to_start() -> None:
    ex = Executor(FakeApi(), ["q"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="an executor needs an output store for its runs' logs"):
        ex.start()


def test_a_repeating_failure_is_one_line_per_span_with_the_rest_counted(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    warning = QuietWarning(logging.getLogger("test.quiet"), every_s=5.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "test.quiet"):
        assert warning.warn("acquire failed (%s)", "down")
        assert not warning.warn("acquire failed (%s)", "down")  # the second acquirer, at the same moment
        now[0] += 4.9
        assert not warning.warn("renewal failed")
        now[0] += 0.2
        assert warning.warn("acquire failed (%s)", "down")
        warning.ok()
        assert warning.warn("acquire failed (%s)", "again")
    assert [r.getMessage() for r in caplog.records] == [
        "acquire failed (down)",
        "acquire failed (down) (2 more failures since the last line)",
        "acquire failed (again)",
    ]


def test_two_acquirers_that_cannot_reach_the_cluster_say_so_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    class Down(FakeApi):
        def acquire(self, queues: list[str], max_runs: int, wait_ms: int, types: list[str] | None = None) -> list[Task]:
            raise RuntimeError("no node of the cluster answers at 127.0.0.1:1: is it running?")

    ex = Executor(Down(), ["q"], output=MemoryOutputStore())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, "raftsched.executor"):
        ex.start()
        time.sleep(1.0)  # both acquirers fail several times (backoff from 0.1 s)
        ex.stop(0)
    lines = [r.getMessage() for r in caplog.records if "acquire failed" in r.getMessage()]
    assert len(lines) == 1, lines
