"""``run logs --follow`` against a scripted client: what stderr says of each attempt, whatever the polls saw."""

from __future__ import annotations

import argparse

import pytest

from raftsched.cluster.app.cli.follow import follow_logs
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb

pytestmark = pytest.mark.unit

RUN = "job-1@1000"
EXPIRED = "lease expired: executor 'ex-a' stopped renewing it"


def _attempt(n: int, executor: str, outcome: pb.AttemptOutcome = pb.ATTEMPT_OUTCOME_UNSPECIFIED, error: str = "") -> pb.Attempt:
    at = pb.Attempt(attempt=n, executor_id=executor, fencing_token=n, outcome=outcome, error=error)
    if outcome:
        at.finished_at.FromMilliseconds(2000 + n)
    return at


def _run(status: pb.RunStatus, attempt: int, executor: str, attempts: list[pb.Attempt], error: str = "") -> pb.Run:
    return pb.Run(run_id=RUN, status=status, attempt=attempt, executor_id=executor, error=error, attempts=attempts)


FIRST = _attempt(1, "ex-a")
FIRST_ENDED = _attempt(1, "ex-a", pb.ATTEMPT_OUTCOME_LEASE_EXPIRED, EXPIRED)
SECOND = _attempt(2, "ex-b")
SECOND_ENDED = _attempt(2, "ex-b", pb.ATTEMPT_OUTCOME_SUCCEEDED)
LEASED_1 = _run(pb.RUN_STATUS_LEASED, 1, "ex-a", [FIRST])
BETWEEN = _run(pb.RUN_STATUS_PENDING, 1, "ex-a", [FIRST_ENDED], EXPIRED)
LEASED_2 = _run(pb.RUN_STATUS_LEASED, 2, "ex-b", [FIRST_ENDED, SECOND], EXPIRED)
DONE = _run(pb.RUN_STATUS_SUCCEEDED, 2, "ex-b", [FIRST_ENDED, SECOND_ENDED])


class ScriptedClient:
    """Answers GetRun with the next run of a script (the last one from then on), GetRunOutput with the
    output of the attempt that run is at."""

    def __init__(self, runs: list[pb.Run]) -> None:
        self.runs = runs
        self.run = runs[0]

    def get_run(self, run_id: str) -> pb.Run:
        assert run_id == RUN
        self.run = self.runs.pop(0) if len(self.runs) > 1 else self.runs[0]
        return self.run

    def job(self, method: str, request: pb.GetRunOutputRequest) -> pb.RunOutput:
        assert method == "GetRunOutput"
        n = self.run.attempt
        log = f"out-{n}\n".encode()[request.offset :]
        done = self.run.status == pb.RUN_STATUS_SUCCEEDED
        size = request.offset + len(log)
        return pb.RunOutput(
            run_id=RUN, attempt=n, fencing_token=n, log=log, next_offset=size, size=size,
            live=not done, result=b'{"exit_code": 0}' if done else b"",
        )  # fmt: skip


def _follow(runs: list[pb.Run], capsys: pytest.CaptureFixture[str]) -> list[str]:
    follow_logs(argparse.Namespace(run_id=RUN, output="table", interval=0), ScriptedClient(runs))  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert out == 'out-1\nout-2\n--- result ---\n{"exit_code": 0}\n'
    return err.splitlines()


def test_an_attempt_that_ended_between_two_polls_is_still_said_to_have_ended_and_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _follow([LEASED_1, LEASED_2, DONE], capsys)
    assert err == [
        f"[run {RUN}: LEASED, attempt 1 on ex-a]",
        f"[run {RUN}: attempt 1 on ex-a ended LEASE_EXPIRED: {EXPIRED}]",
        f"[run {RUN}: LEASED, attempt 2 on ex-b]",
        f"[run {RUN}: attempt 2 on ex-b is a new attempt (fencing token 2); its output follows from the start]",
        f"[run {RUN}: SUCCEEDED, attempt 2]",
    ]


def test_an_end_the_polls_saw_is_said_once(capsys: pytest.CaptureFixture[str]) -> None:
    err = _follow([LEASED_1, BETWEEN, LEASED_2, DONE], capsys)
    assert err == [
        f"[run {RUN}: LEASED, attempt 1 on ex-a]",
        f"[run {RUN}: PENDING, attempt 1: {EXPIRED}]",
        f"[run {RUN}: LEASED, attempt 2 on ex-b]",
        f"[run {RUN}: attempt 2 on ex-b is a new attempt (fencing token 2); its output follows from the start]",
        f"[run {RUN}: SUCCEEDED, attempt 2]",
    ]
