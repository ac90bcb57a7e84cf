"""Command format 4: an executor's verdicts (not retryable, retry after), heartbeat details on attempts, and the
log_uri a completion may name, checked in apply."""

from __future__ import annotations

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import After, RetryPolicy, Run, RunStatus
from raftsched.cluster.domain.output import OutputKey
from raftsched.cluster.domain.results import FailedPrecondition, InvalidArgument
from raftsched.cluster.domain.run_history import last_heartbeat
from tests.unit.fsm.harness import SEC, T0, Harness, lease, store_kind  # noqa: F401 (both stores)

pytestmark = pytest.mark.unit


def _leased(fmt: int = 4, max_attempts: int = 3) -> tuple[Harness, Run]:
    h = Harness()
    h.ok(c.SetClusterFormat(T0, fmt))
    h.create("j1", After(SEC), retry=RetryPolicy(max_attempts, 1_000, 60_000, 2.0, 0.0))
    h.fire(T0 + SEC)
    (run,) = h.runs("j1")
    return h, lease(h, run.run_id)


def _log(run: Run) -> str:
    return f"file:///out/{OutputKey(run.job_id, run.run_id, run.attempt, run.fencing_token).relpath()}.log"


def _fail(h: Harness, run: Run, **kw: object) -> Run:
    h.ok(c.CompleteRun(h.m.now_ms, run.lease_id, run.fencing_token, False, b"", "boom", _log(run), 0.5, "ex-1", **kw))  # type: ignore[arg-type]
    return h.m.runs[run.run_id]


def test_a_non_retryable_failure_ends_the_run_failed_with_attempts_left() -> None:
    h, run = _leased()
    done = _fail(h, run, non_retryable=True)
    assert done.status is RunStatus.FAILED and done.attempt == 1
    assert done.error == "attempt 1 of 3 failed and is not retryable: boom"
    assert [a.outcome for a in done.attempts] == ["FAILED"]


def test_a_retryable_failure_still_retries_after_the_backoff() -> None:
    h, run = _leased()
    done = _fail(h, run)
    assert done.status is RunStatus.PENDING and done.not_before_ms == h.m.now_ms + 1_000


def test_retry_after_takes_the_backoffs_place_and_attempts_still_count() -> None:
    h, run = _leased(max_attempts=2)
    done = _fail(h, run, retry_after_ms=30 * SEC)
    assert done.status is RunStatus.PENDING and done.not_before_ms == h.m.now_ms + 30 * SEC
    assert "attempt 2 of 2 after a wait of 30 s, as the executor asked" in done.steps_raw[-1][2]
    second = lease(h, run.run_id)
    assert second.attempt == 2
    last = _fail(h, second, retry_after_ms=30 * SEC)
    assert last.status is RunStatus.DEAD_LETTER and last.error == "attempt 2 of 2 failed: boom"


def test_heartbeat_details_stay_on_their_attempt_and_reach_the_next() -> None:
    h, run = _leased()
    renewal = c.RenewLeases(h.m.now_ms + 100, "ex-1", ((run.lease_id, run.fencing_token),), ((run.lease_id, b'{"p":3}'),))
    (answer,) = h.ok(renewal)
    assert answer.ok
    held = h.m.runs[run.run_id]
    assert held.attempts[-1].heartbeat_details == b'{"p":3}' and held.attempts[-1].heartbeat_at_ms == h.m.now_ms
    assert last_heartbeat(held) == (b'{"p":3}', h.m.now_ms)
    _fail(h, held)
    second = lease(h, run.run_id)
    assert last_heartbeat(second) == (b'{"p":3}', T0 + SEC + 100)  # what the grant hands the next attempt
    assert second.attempts[0].heartbeat_details == b'{"p":3}' and second.attempts[1].heartbeat_details == b""


def test_only_the_latest_attempts_keep_their_details() -> None:
    h, run = _leased(max_attempts=10)
    for n in range(1, 7):
        current = h.m.runs[run.run_id]
        h.ok(c.RenewLeases(h.m.now_ms, "ex-1", ((current.lease_id, current.fencing_token),), ((current.lease_id, b"%d" % n),)))
        _fail(h, h.m.runs[run.run_id])
        if n < 6:
            lease(h, run.run_id)
    kept = [(a.heartbeat_details, a.heartbeat_at_ms > 0) for a in h.m.runs[run.run_id].attempts]
    assert kept == [(b"", True), (b"", True), (b"3", True), (b"4", True), (b"5", True), (b"6", True)]


def test_a_renewal_without_details_keeps_the_earlier_ones() -> None:
    h, run = _leased()
    ref = ((run.lease_id, run.fencing_token),)
    h.ok(c.RenewLeases(h.m.now_ms, "ex-1", ref, ((run.lease_id, b"x"),)))
    h.ok(c.RenewLeases(h.m.now_ms + 500, "ex-1", ref))
    assert h.m.runs[run.run_id].attempts[-1].heartbeat_details == b"x"


@pytest.mark.parametrize(
    "uri",
    [
        "file:///out/other-job/other-run/attempt-1-token-1.log",
        "file:///out/{job}/{run}/attempt-2-token-{token}.log",
        "file:///out/{job}/{run}/../{run}x/attempt-1-token-{token}.log",
    ],
)
def test_from_format_4_a_log_uri_must_be_the_attempts_own(uri: str) -> None:
    h, run = _leased()
    named = uri.format(job=run.job_id, run=run.run_id, token=run.fencing_token)
    refused = h.rejected(
        c.CompleteRun(h.m.now_ms, run.lease_id, run.fencing_token, True, b"", "", named, 0.5, "ex-1"), InvalidArgument
    )
    assert f"is not the output of attempt 1 of run {run.run_id}" in refused.message
    assert h.m.runs[run.run_id].status is RunStatus.LEASED  # nothing changed: the executor may complete it again
    for ok_uri in (_log(run), "data:,"):
        h2, run2 = _leased()
        h2.ok(
            c.CompleteRun(
                h2.m.now_ms,
                run2.lease_id,
                run2.fencing_token,
                True,
                b"",
                "",
                ok_uri.replace(run.run_id, run2.run_id),
                0.5,
                "ex-1",
            )
        )


def test_before_format_4_entries_apply_as_they_always_did() -> None:
    h, run = _leased(fmt=3)
    other = "file:///out/other-job/other-run/attempt-1-token-1.log"
    h.ok(c.CompleteRun(h.m.now_ms, run.lease_id, run.fencing_token, True, b"", "", other, 0.5, "ex-1"))
    assert h.m.runs[run.run_id].log_uri == other
    h, run = _leased(fmt=3)
    refused = h.rejected(
        c.CompleteRun(h.m.now_ms, run.lease_id, run.fencing_token, False, b"", "no", "", 0.5, "ex-1", non_retryable=True),
        FailedPrecondition,
    )
    assert "needs command format 4, but the cluster still uses format 3" in refused.message


def test_run_explain_and_the_web_view_show_an_attempts_heartbeat() -> None:
    from raftsched.cluster.node.explain import explain
    from raftsched.rpc.http.web.run_sections import attempt_rows

    h, run = _leased()
    details = b'{"page": 3,\n "of": 9}'
    h.ok(c.RenewLeases(h.m.now_ms + 250, "ex-1", ((run.lease_id, run.fencing_token),), ((run.lease_id, details),)))
    _fail(h, h.m.runs[run.run_id])
    done = h.m.runs[run.run_id]
    kinds = [(s.kind, s.detail) for s in explain(done).steps]
    assert kinds[1:3] == [
        ("leased", f"attempt 1 leased to executor 'ex-1' (lease {run.lease_id}, token {run.fencing_token})"),
        ("heartbeat", 'attempt 1\'s latest heartbeat details: {"page": 3, "of": 9}'),
    ]
    (row,) = attempt_rows(done) or []
    assert row.heartbeat == '{"page": 3, "of": 9} (at 2026-01-01 00:00:01.250 UTC)'  # as the page shows every time
