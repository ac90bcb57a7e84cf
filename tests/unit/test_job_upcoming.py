"""A job's next instants as a read shows them (``Job.upcoming``): from its next fire, in order, five at most."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched.cluster.domain.model import After, At, Cron, Every, Job, JobSpec, JobStatus
from raftsched.cluster.domain.schedule.instants import UPCOMING, job_upcoming, next_fire
from raftsched.rpc import convert as cv

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z
MIN = 60_000


def job(schedule: object, next_fire_ms: int | None = T0, status: JobStatus = JobStatus.ACTIVE, anchor_ms: int = T0) -> Job:
    spec = JobSpec(name="j", schedule=schedule, type="noop")  # type: ignore[arg-type]
    return Job("j1", spec, status, anchor_ms, anchor_ms, next_fire_ms, anchor_ms, anchor_ms)


def test_an_interval_lists_its_next_five_instants_from_the_next_fire() -> None:
    assert job_upcoming(job(Every(MIN), next_fire_ms=T0 + MIN)) == [T0 + k * MIN for k in range(1, 6)]


def test_a_zoned_cron_across_a_dst_change_lists_what_it_will_fire() -> None:
    # 02:30 Europe/Berlin every day, around the spring change of 2027-03-28 (02:30 does not exist that day)
    cron = Cron("30 2 * * *", "Europe/Berlin")
    first = next_fire(cron, 1_806_000_000_000, 0)  # 2027-03-26 or so
    assert first is not None
    got = job_upcoming(job(cron, next_fire_ms=first))
    assert got[0] == first and len(got) == UPCOMING
    expected = [first]
    for _ in range(UPCOMING - 1):
        nxt = next_fire(cron, expected[-1], 0)
        assert nxt is not None
        expected.append(nxt)
    assert got == expected and got == sorted(set(got))


@pytest.mark.parametrize("schedule", [At(T0), After(5 * MIN)])
def test_a_one_off_lists_its_one_instant_until_it_fires(schedule: object) -> None:
    assert job_upcoming(job(schedule)) == [T0]
    assert job_upcoming(job(schedule, next_fire_ms=None)) == []


@pytest.mark.parametrize("status", [JobStatus.PAUSED, JobStatus.COMPLETED, JobStatus.DELETED])
def test_a_job_that_will_not_fire_lists_nothing(status: JobStatus) -> None:
    assert job_upcoming(job(Every(MIN), status=status)) == []


def test_the_api_job_carries_them() -> None:
    out = cv.job_to_pb(job(Every(MIN), next_fire_ms=T0 + MIN))
    assert [cv.ts_ms(t) for t in out.upcoming] == [T0 + k * MIN for k in range(1, 6)]
    assert cv.ts_ms(out.upcoming[0]) == cv.ts_ms(out.next_fire_time)
    assert not cv.job_to_pb(job(Every(MIN), status=JobStatus.PAUSED)).upcoming


@given(every=st.integers(1000, 10**9), start=st.integers(0, 10**12))
@settings(max_examples=200, deadline=None)
def test_an_interval_always_lists_five_instants_on_its_grid(every: int, start: int) -> None:
    anchor = T0 - start
    first = next_fire(Every(every), T0, anchor)
    assert first is not None
    got = job_upcoming(job(Every(every), next_fire_ms=first, anchor_ms=anchor))
    assert got == [first + k * every for k in range(UPCOMING)]


def test_the_sdk_job_carries_them_as_datetimes() -> None:
    from raftsched.sdk import from_pb

    got = from_pb.job(cv.job_to_pb(job(Every(MIN), next_fire_ms=T0 + MIN))).upcoming
    assert [round(t.timestamp() * 1000) for t in got] == [T0 + k * MIN for k in range(1, 6)]
    assert got[0].tzinfo is not None
