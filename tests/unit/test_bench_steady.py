"""The steady scenario's load: jobs created at times spaced evenly over a part of a second (scripts/bench/scenarios/steady.py).

``bench`` is importable because pyproject.toml puts ``scripts/`` on pytest's ``pythonpath``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from bench import cli
from bench.scenarios import steady
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb

pytestmark = pytest.mark.unit


def test_busiest_tenth_is_the_share_of_instants_in_the_fullest_tenth_of_their_second() -> None:
    assert steady.busiest_tenth([]) == 0.0
    even = [1_000_000 + i * 10 for i in range(100)]  # one every 10 ms over a second
    assert steady.busiest_tenth(even) == 0.1
    bunched = [5_000_120 + i for i in range(30)] + [7_000_950 + i for i in range(10)]  # 30 in 100-199 ms, 10 in 900-999
    assert steady.busiest_tenth(bunched) == 0.75
    assert steady.busiest_tenth([3_000_000] * 4) == 1.0


class _Stub:
    """CreateJobs answered at once, each job's first instant the time its call came (as every-1s jobs have it)."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, int]] = []
        self._lock = threading.Lock()
        self._next = 0

    def CreateJobs(self, request: Any, timeout: float) -> Any:  # noqa: N802 - the gRPC method's name
        now = time.time()
        with self._lock:
            self.calls.append((time.monotonic(), len(request.jobs)))
            first = self._next
            self._next += len(request.jobs)
        resp = pb.CreateJobsResponse()
        for i, req in enumerate(request.jobs):
            assert req.spec.every.seconds == 1 and req.spec.queue == steady.STEADY_QUEUE and req.idempotency_key
            result = resp.results.add()
            result.job.job_id = f"j{first + i}"
            result.job.next_fire_time.FromMilliseconds(int(now * 1000) + 1000)
        return resp


def test_create_spaces_its_calls_evenly_over_the_spread_whatever_the_creation_takes() -> None:
    stub = _Stub()
    began = time.monotonic()
    ids, busiest = steady._create(stub, 200, 0.3)  # type: ignore[arg-type]
    assert sorted(ids, key=lambda j: int(j[1:])) == [f"j{i}" for i in range(200)]
    assert sum(n for _, n in stub.calls) == 200 and all(n <= steady.CREATE_BATCH for _, n in stub.calls)
    times = sorted(t - began for t, _ in stub.calls)
    assert len(times) == 200 // steady.CREATE_BATCH
    assert times[-1] >= 0.3 * (len(times) - 1) / len(times) - 0.01  # the last call waited for its time
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert min(gaps) >= 0.3 / len(times) * 0.5  # not sent in one go
    assert 0.1 <= busiest <= 0.5  # 0.3 s of instants: three or four tenths of the second hold them


def test_steady_spread_is_a_part_of_a_second(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli._profile(cli.parse_args(["--quick", "--steady-spread", "0.4"])).steady_spread_s == 0.4
    assert cli._profile(cli.parse_args(["--quick"])).steady_spread_s == 1.0
    for bad in ("0", "1.5", "-1"):
        with pytest.raises(SystemExit):
            cli.parse_args(["--steady-spread", bad])
        assert "--steady-spread" in capsys.readouterr().err
