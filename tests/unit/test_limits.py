"""Every limit of ``raftsched.cluster.domain.limits``, one row each: over it the call is INVALID_ARGUMENT naming the field
(and the limit), and nothing is proposed to Raft. Plus the spans and instants that would overflow a Timestamp,
and the API page's table (docs/api.md, "Limits") kept in step with the code's."""

from __future__ import annotations

import os
from typing import Any, Callable

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.model import After, At, Cron, Every, JobSpec, RetryPolicy
from raftsched.cluster.domain.output_location import OutputLocation
from raftsched.cluster.domain.validation import Limits
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.clock import FakeClock
from raftsched.cluster.node.job_service import JobService
from raftsched.cluster.node.lease_service import Completion, LeaseService
from raftsched.storage import OutputReader

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000
BASE = JobSpec(name="j", schedule=Every(60_000), type="shell", payload=b'{"command": "true"}')
YEAR_MS = 365 * 86_400_000


class NoRaft:
    """The part of Replica the services use: reads work, any proposal fails the test."""

    def __init__(self) -> None:
        self.machine = JobStateMachine()
        self.on_applied: list[Any] = []
        self.proposed: list[Any] = []

    def read(self, fn: Callable[[JobStateMachine], Any], barrier: bool = True) -> Any:
        return fn(self.machine)

    def execute(self, cmd: c.Command, timeout: float | None = None) -> Any:
        self.proposed.append(cmd)
        raise AssertionError(f"proposed to Raft: {type(cmd).__name__}")

    def execute_each(self, items: list[Any], build: Callable[[Any], Any]) -> list[Any]:
        self.proposed.extend(items)
        raise AssertionError(f"proposed {len(items)} commands to Raft")


@pytest.fixture()
def store() -> NoRaft:
    return NoRaft()


def jobs(store: NoRaft) -> JobService:
    return JobService(store, FakeClock(T0), Limits(max_payload_bytes=100), OutputReader())  # type: ignore[arg-type]


def leases(store: NoRaft) -> LeaseService:
    location = OutputLocation(local_dir="/srv/raftsched/outputs")
    return LeaseService(store, FakeClock(T0), max_result_bytes=100, outputs=location)  # type: ignore[arg-type]


def spec(**changes: Any) -> JobSpec:
    return BASE._replace(**changes)


LOG = "file:///srv/raftsched/outputs/J/R/attempt-1-token-1001.log"
OVER_SPAN = lim.MAX_SPAN_MS + 1

# (what, call on the job service, field named in the message)
JOB_CALLS: list[tuple[str, Callable[[JobService], Any], str]] = [
    ("name", lambda s: s.create_job(spec(name="n" * (lim.MAX_NAME_CHARS + 1))), "job name is 257 characters long; the limit is 256"),
    ("queue", lambda s: s.create_job(spec(queue="q" * (lim.MAX_QUEUE_CHARS + 1))), "queue name"),
    ("type", lambda s: s.create_job(spec(type="t" * (lim.MAX_TYPE_CHARS + 1))), "job type"),
    ("payload", lambda s: s.create_job(spec(payload=b"x" * 101)), "payload is 101 bytes, over the limit of 100"),
    ("cron", lambda s: s.create_job(spec(schedule=Cron("*" * 566_000))), "cron expression is 566000 characters long; the limit is 256"),
    ("timezone", lambda s: s.create_job(spec(schedule=Cron("* * * * *", "Z" * 65))), "cron timezone is 65 characters long; the limit is 64"),
    ("idempotency key", lambda s: s.create_job(BASE, "k" * 257), "idempotency_key is 257 characters long; the limit is 256"),
    ("idempotency key ESC", lambda s: s.create_job(BASE, "key\x1b[31m"), "idempotency_key contains U+001B (ESC) at position 3"),
    ("request_id BEL", lambda s: s.create_job(BASE, "k", "rq-\x07"), "request_id contains U+0007 (BEL) at position 3"),
    ("name bidi", lambda s: s.create_job(spec(name="a\u202eb")), "name contains U+202E (RIGHT-TO-LEFT OVERRIDE) at position 1"),
    ("at in year 10000", lambda s: s.create_job(spec(schedule=At(lim.MAX_INSTANT_MS + 1))), "at is after 9999-12-31"),
    ("after 2**63-1 s", lambda s: s.create_job(spec(schedule=After((2**63 - 1) * 1000))), "after is 9223372036854775807000 ms, over the limit"),
    ("every huge", lambda s: s.create_job(spec(schedule=Every(OVER_SPAN))), f"every is {OVER_SPAN} ms, over the limit"),
    ("lease_ttl", lambda s: s.create_job(spec(lease_ttl_ms=OVER_SPAN)), "lease_ttl is"),
    ("timeout", lambda s: s.create_job(spec(timeout_ms=OVER_SPAN)), "timeout is"),
    ("catchup_window", lambda s: s.create_job(spec(catchup_window_ms=OVER_SPAN)), "catchup_window is"),
    ("history_ttl", lambda s: s.create_job(spec(history_ttl_ms=OVER_SPAN)), "history_ttl is"),
    ("retry.max_backoff", lambda s: s.create_job(spec(retry=RetryPolicy(max_backoff_ms=OVER_SPAN))), "retry.max_backoff is"),
    ("update", lambda s: s.update_job("j-1", spec(schedule=Cron("0 " * 200))), "cron expression is 400 characters"),
    ("get_job id", lambda s: s.get_job("j" * 257), "job_id is 257 characters long; the limit is 256"),
    ("get_run id", lambda s: s.get_run("r" * 257), "run_id is 257 characters long"),
    ("pause id", lambda s: s.pause_job("j" * 257), "job_id is 257"),
    ("resume id", lambda s: s.resume_job("j" * 257), "job_id is 257"),
    ("delete id", lambda s: s.delete_job("j" * 257), "job_id is 257"),
    ("trigger id", lambda s: s.trigger_job("j" * 257), "job_id is 257"),
    ("cancel id", lambda s: s.cancel_run("r" * 257), "run_id is 257"),
    ("list queue", lambda s: s.list_jobs(queue="q" * 129), "queue is 129 characters long; the limit is 128"),
    ("list name_prefix", lambda s: s.list_jobs(name_prefix="p" * 257), "name_prefix is 257 characters long"),
    ("list page_size", lambda s: s.list_jobs(page_size=-1), "page_size -1 is negative"),
    ("list page_token", lambda s: s.list_jobs(page_token="9" * 5000), "page_token is 5000 characters long; the limit is 1024"),
    ("runs job_id", lambda s: s.list_runs(job_id="j" * 257), "job_id is 257"),
    ("runs page_token", lambda s: s.list_runs(page_token="9" * 5000), "page_token is 5000 characters long"),
    ("create batch", lambda s: s.create_jobs([(BASE, "")] * 1001), "jobs has 1001 items; the limit is 1000"),
    ("preview cron", lambda s: s.preview(Cron("1 " * 300), T0, 5), "cron expression is 600 characters"),
    ("preview after", lambda s: s.preview(Every(1000), lim.MAX_INSTANT_MS + 1, 5), "after is after 9999-12-31"),
    ("preview count", lambda s: s.preview(Every(1000), T0, -1), "count -1 is negative"),
    ("output attempt", lambda s: s.get_run_output("r", -1), "attempt -1 is negative"),
]  # fmt: skip

LEASE_CALLS: list[tuple[str, Callable[[LeaseService], Any], str]] = [
    ("executor_id", lambda s: s.acquire("e" * 257, ["q"], 1, 0), "executor_id is required (1-256 characters, got 257)"),
    ("executor_id ESC", lambda s: s.acquire("w\x1b]0;x\x07", ["q"], 1, 0), "executor_id contains U+001B (ESC) at position 1"),
    ("renew executor bidi", lambda s: s.renew("w\u2067", [("L1001", 1001)]), "executor_id contains U+2067 (RIGHT-TO-LEFT ISOLATE)"),
    ("complete executor NUL", lambda s: s.complete(Completion("L1001", 1001, True, executor_id="w\x00")), "executor_id contains U+0000 (NUL)"),
    ("queues", lambda s: s.acquire("e", ["q"] * 101, 1, 0), "queues has 101 items; the limit is 64"),
    ("a queue", lambda s: s.acquire("e", ["q" * 129], 1, 0), "queue name"),
    ("max_runs", lambda s: s.acquire("e", ["q"], 1000, 0), "max_runs 1000 is out of range"),
    ("wait", lambda s: s.acquire("e", ["q"], 1, 60_001), "wait 60001 ms is out of range"),
    ("renew batch", lambda s: s.renew("e", [("L1001", 1001)] * 10_001), "leases has 10001 items; the limit is 10000"),
    ("renew lease_id", lambda s: s.renew("e", [("L" * 33, 1)]), "lease_id is 33 characters long; the limit is 32"),
    ("renew executor", lambda s: s.renew("", [("L1001", 1001)]), "executor_id is required"),
    ("complete lease_id", lambda s: s.complete(Completion("L" * 33, 1, True)), "lease_id is 33 characters long"),
    ("complete result", lambda s: s.complete(Completion("L1001", 1001, True, b"r" * 101)), "result is 101 bytes, over the limit of 100"),
    ("complete log_uri size", lambda s: s.complete(Completion("L1001", 1001, True, log_uri=LOG[:-4] + "x" * 3000 + ".log")), "log_uri is 3"),
    ("complete log_uri elsewhere", lambda s: s.complete(Completion("L1001", 1001, True, log_uri="s3://other/k/attempt-1-token-1.log")), "log_uri 's3://other"),
    ("complete batch", lambda s: s.complete_many([Completion("L1001", 1001, True)] * 1001), "runs has 1001 items; the limit is 1000"),
]  # fmt: skip


@pytest.mark.parametrize("what, call, named", JOB_CALLS, ids=[row[0] for row in JOB_CALLS])
def test_job_service_limits(store: NoRaft, what: str, call: Callable[[JobService], Any], named: str) -> None:
    with pytest.raises(ValidationError) as err:
        call(jobs(store))
    assert named in str(err.value)
    assert len(str(err.value)) < 1000  # never echoes the oversized value back
    assert store.proposed == []


@pytest.mark.parametrize("what, call, named", LEASE_CALLS, ids=[row[0] for row in LEASE_CALLS])
def test_lease_service_limits(store: NoRaft, what: str, call: Callable[[LeaseService], Any], named: str) -> None:
    with pytest.raises(ValidationError) as err:
        call(leases(store))
    assert named in str(err.value)
    assert len(str(err.value)) < 1000
    assert store.proposed == []


def test_spans_and_instants_at_the_limit_pass_validation() -> None:
    from raftsched.cluster.domain.validation import validate_spec

    validate_spec(spec(schedule=At(lim.MAX_INSTANT_MS)))
    validate_spec(spec(schedule=After(lim.MAX_SPAN_MS)))
    validate_spec(spec(schedule=Every(lim.MAX_SPAN_MS)))
    validate_spec(spec(lease_ttl_ms=lim.MAX_SPAN_MS, history_ttl_ms=lim.MAX_SPAN_MS))
    validate_spec(spec(schedule=Cron("*/5 " + "* " * 3 + "*", "America/Argentina/ComodRivadavia")))
    assert lim.MAX_SPAN_MS >= 100 * 365 * 86_400_000
    # the latest instant any job can reach (created now, plus the longest span) is still a valid Timestamp
    assert T0 + 2 * lim.MAX_SPAN_MS < lim.MAX_INSTANT_MS


def test_error_text_is_cut_not_refused() -> None:
    cut = lim.cut_error("e" * 100_000)
    assert len(cut) == lim.MAX_ERROR_CHARS and "cut: 100000 characters" in cut
    assert lim.cut_error("short") == "short"


def test_the_api_page_lists_every_limit() -> None:
    page = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "api.md"), encoding="utf-8").read()
    for field, limit, _ in lim.TABLE:
        assert f"| {field} | {limit} |" in page, f"the Limits table of docs/api.md lacks {field!r}"
