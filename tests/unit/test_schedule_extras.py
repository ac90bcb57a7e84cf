"""A spec's schedule bounds and exceptions (command format 5): the shaped schedule (bounds, union of crons),
skip dates and windows, jitter, their validation, label selectors, and their encodings (log, store, blob)."""

from __future__ import annotations

import json
import marshal
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.model import At, Cron, Every, JobSpec, NotifyRule, TimeWindow
from raftsched.cluster.domain.schedule import Shaped, first_fire, job_schedule, next_fire, upcoming
from raftsched.cluster.domain.schedule.exceptions import jitter_ms, local_date, skip_reason
from raftsched.cluster.domain.spec_codec import has_extras, spec_fingerprint, spec_from_plain, spec_to_plain
from raftsched.cluster.domain.spec_extras import matches, parse_selector, validate_extras
from raftsched.cluster.domain.validation import validate_spec
from raftsched.cluster.fsm import layout

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SEC = 1000
DAY = 86_400_000


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


# ------------------------------------------------------------------ the shaped schedule


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 50), st.integers(0, 100), st.integers(0, 100))
def test_bounds_hold_at_exact_instants(every_s: int, start_k: int, span_k: int) -> None:
    anchor = T0
    start = anchor + start_k * every_s * SEC  # on an instant (or the anchor)
    end = start + span_k * every_s * SEC
    s = Shaped(Every(every_s * SEC), (), start, end)
    times = upcoming(s, anchor - 1, anchor, 500)
    assert times == [t for t in upcoming(Every(every_s * SEC), anchor - 1, anchor, 500) if start <= t <= end]
    first = first_fire(s, anchor)
    assert first == (times[0] if times else None)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(["0 9 * * MON", "0 12 * * SAT", "*/30 * * * *", "0 9 * * MON-FRI", "15 3 1 * *"]), min_size=1, max_size=4
    )
)
def test_the_union_of_crons_has_each_instant_once_in_order(exprs: list[str]) -> None:
    crons = [Cron(e, "Europe/Berlin") for e in exprs]
    s = Shaped(crons[0], tuple(crons[1:]))
    got = upcoming(s, T0, T0, 60)
    assert got == sorted(set(got))
    want = sorted({t for cr in crons for t in upcoming(cr, T0, T0, 60)})[:60]
    assert got == want


def test_job_schedule_is_the_plain_schedule_without_bounds_or_extra_crons() -> None:
    assert job_schedule(JobSpec("j", Every(SEC)), 5) == Every(SEC)
    shaped = job_schedule(JobSpec("j", Cron("0 9 * * *"), extra_crons=(Cron("0 18 * * *"),), end_ms=T0), 5)
    assert isinstance(shaped, Shaped) and shaped.end_ms == T0
    assert next_fire(shaped, T0, T0) is None  # nothing after its end


# ------------------------------------------------------------------ exceptions and jitter


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=30), st.integers(0, 2**45), st.integers(1, 10**9))
def test_jitter_is_in_range_and_the_same_on_every_replica(job_id: str, instant: int, jitter: int) -> None:
    offset = jitter_ms(job_id, instant, jitter)
    assert 0 <= offset < jitter
    assert offset == jitter_ms(job_id, instant, jitter)  # a pure function of the job, the instant and the jitter


def test_jitter_spreads_the_runs() -> None:
    offsets = [jitter_ms("j-1", T0 + k * SEC, 60_000) for k in range(2000)]
    assert min(offsets) < 3_000 and max(offsets) > 57_000 and len(set(offsets)) > 1500


def test_skip_dates_are_dates_in_the_zone_of_the_cron_across_dst() -> None:
    # Europe/Berlin leaves DST on 2026-10-25: 00:30 local is 22:30Z the day before, in summer time
    spec = JobSpec("j", Cron("30 0 * * *", "Europe/Berlin"), skip_dates=("2026-10-25", "2026-03-29"))
    before = _ms("2026-10-24T22:30:00Z")  # 00:30 CEST on the 25th
    assert local_date(spec, before) == "2026-10-25" and "2026-10-25" in skip_reason(spec, before)
    after = _ms("2026-10-25T23:30:00Z")  # 00:30 CET on the 26th
    assert skip_reason(spec, after) == ""
    spring = _ms("2026-03-28T23:30:00Z")  # 00:30 CET on the 29th, the day the clocks go forward
    assert "2026-03-29" in skip_reason(spec, spring)
    utc = JobSpec("j", Every(3600 * SEC), skip_dates=("2026-10-25",))
    assert skip_reason(utc, before) == ""  # an interval's dates are UTC dates: still the 24th


def test_skip_windows_are_half_open() -> None:
    spec = JobSpec("j", Every(SEC), skip_windows=(TimeWindow(T0, T0 + 10 * SEC),))
    assert "skip window" in skip_reason(spec, T0) and "skip window" in skip_reason(spec, T0 + 9_999)
    assert skip_reason(spec, T0 + 10 * SEC) == "" and skip_reason(spec, T0 - 1) == ""


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"start_ms": T0 + DAY, "end_ms": T0}, "end_time"),
        ({"jitter_ms": 61 * SEC}, "jitter"),
        ({"skip_dates": ("2026-02-30",)}, "skip_dates[0]"),
        ({"skip_dates": ("26-1-1",)}, "skip_dates[0]"),
        ({"skip_windows": (TimeWindow(T0, T0),)}, "skip_windows[0]"),
        ({"extra_crons": (Cron("0 9 * * *"),)}, "extra_crons need a cron schedule"),
        ({"labels": (("Bad", "x"),)}, "label key"),
        ({"labels": tuple((f"k{i:02}", "v") for i in range(17))}, "17 labels"),
        ({"labels": (("k", "v" * 257),)}, "257 characters"),
        ({"max_runs": -1}, "max_runs"),
        ({"priority": 10}, "priority 10 must be between 0"),
        ({"priority": -1}, "priority -1"),
        ({"pending_ttl_ms": 999}, "pending_ttl"),
        ({"concurrency_key": "k"}, "concurrency_limit 0 must be between 1"),
        ({"concurrency_limit": 2}, "concurrency_limit needs a concurrency_key"),
        ({"concurrency_key": "a b", "concurrency_limit": 1}, "concurrency_key 'a b' is not valid"),
        ({"notify": (NotifyRule((), "http://h/"),)}, "notify[0].events is empty"),
        ({"notify": (NotifyRule(("FAILED", "LATE"), "http://h/"),)}, "notify[0].events: 'LATE' is not an event"),
        ({"notify": (NotifyRule(("FAILED",), "file:///etc/passwd"),)}, "notify[0].url"),
        ({"notify": (NotifyRule(("FAILED",), "https://h/", "bad name"),)}, "notify[0].secret_name"),
        ({"notify": tuple(NotifyRule(("FAILED",), f"https://h/{i}") for i in range(9))}, "9 rules"),
    ],
)
def test_bad_extras_are_refused_naming_the_field(change: dict, needle: str) -> None:
    spec = JobSpec("j", Every(60 * SEC), type="noop")._replace(**change)
    with pytest.raises(ValidationError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        validate_spec(spec)


def test_cron_jitter_is_bounded_by_the_shortest_gap_of_the_union() -> None:
    spec = JobSpec("j", Cron("0 9 * * *"), extra_crons=(Cron("0 10 * * *"),), type="noop")
    validate_extras(spec._replace(jitter_ms=3600 * SEC))
    with pytest.raises(ValidationError, match="longer than the schedule's period"):
        validate_extras(spec._replace(jitter_ms=3600 * SEC + 1))
    validate_extras(JobSpec("j", At(T0), jitter_ms=DAY))


def test_label_selectors() -> None:
    labels = (("env", "prod"), ("team", "billing"))
    assert matches(parse_selector(""), labels)
    assert matches(parse_selector("team=billing, env==prod"), labels)
    assert not matches(parse_selector("team=billing,env!=prod"), labels)
    assert matches(parse_selector("tier!=gold"), labels)  # no such label: not equal
    assert matches(parse_selector("team,!tier"), labels) and not matches(parse_selector("!team"), labels)
    for bad in ("Team=x", "a=b,,c", "=x", "a=b=c"):
        with pytest.raises(ValidationError, match="label_selector"):
            parse_selector(bad)


# ------------------------------------------------------------------ encodings

FULL = JobSpec(
    "full", Cron("0 9 * * MON", "Europe/Berlin"), type="noop",
    start_ms=T0, end_ms=T0 + 365 * DAY, jitter_ms=5000, skip_dates=("2026-12-25", "2026-12-26"),
    skip_windows=(TimeWindow(T0 + DAY, T0 + 2 * DAY),), extra_crons=(Cron("0 12 * * SAT", "UTC"),), max_runs=10,
    pause_after_failures=3, trigger_on_create=True, labels=(("a", "1"), ("b", "2")),
)  # fmt: skip


def test_a_spec_without_extras_keeps_its_plain_form_and_fingerprint() -> None:
    plain = JobSpec("j", Every(SEC))
    assert not has_extras(plain) and has_extras(FULL)
    assert set(spec_to_plain(plain)) == {"name", "sched", "queue", "type", "payload", "retry", "ttl", "timeout", "conc",
                                         "misfire", "catchup", "hlimit", "httl"}  # fmt: skip
    assert len(layout.spec_part(plain)) == 13
    assert spec_fingerprint(plain) != spec_fingerprint(plain._replace(labels=(("a", "1"),)))


def test_extras_round_trip_through_the_log_the_store_and_the_blob() -> None:
    assert spec_from_plain(json.loads(json.dumps(spec_to_plain(FULL)))) == FULL
    stored = marshal.loads(marshal.dumps(layout.spec_part(FULL)))
    head = layout.job_head(_job(FULL))
    assert layout.Decoder().spec(head + stored) == FULL
    cmd = c.CreateJob(T0, "j1", FULL)
    assert json.loads(c.encode(cmd))["v"] == 5 and c.decode(c.encode(cmd)) == cmd
    assert json.loads(c.encode(c.CreateJob(T0, "j1", JobSpec("j", Every(SEC)))))["v"] == 1
    old = json.loads(c.encode(cmd))
    old["v"] = 4
    with pytest.raises(c.CommandFormatError, match="format 5"):
        c.decode(json.dumps(old).encode())


def test_one_decoder_decodes_specs_sharing_their_newer_fields_each_as_stored() -> None:
    """The decoder interns the newer fields' decoded form by what is stored: specs that share them (a priority, a
    key, labels, rules) and differ elsewhere each decode to themselves, past the intern table's bound too, and a
    decoded spec's fields are its own (changing one spec's copy changes no other)."""
    decoder = layout.Decoder()
    specs = [
        FULL._replace(name=f"job-{i}", payload=b"x" * (i % 3), priority=i % 4, labels=(("team", f"t{i % 2}"),))
        for i in range(layout.Decoder._SPECS + 50)
    ]
    stored = [layout.job_head(_job(s)) + marshal.loads(marshal.dumps(layout.spec_part(s))) for s in specs]
    decoded = [decoder.spec(t) for t in stored]
    assert decoded == specs
    assert [layout.Decoder().spec(t) for t in stored[:8]] == specs[:8]
    assert decoded[0]._replace(labels=()) != specs[0] and decoder.spec(stored[4]) == specs[4]


def test_twenty_thousand_forms_of_one_shape_stay_interned() -> None:
    """Jobs of one shape over two queues, ten priorities and a thousand concurrency keys (20,000 forms) read
    again decode to the specs read the first time: none is decoded anew (a table that started over would make a
    new spec for each, kept alive by the cache for the collector to walk, on every replica)."""
    decoder = layout.Decoder()
    base = JobSpec("bench-shaped", At(T0), queue="q", type="noop")
    stored = [
        layout.job_head(_job(base._replace(queue=f"q{q}", priority=p, concurrency_key=f"k{k}", concurrency_limit=10)))
        + marshal.loads(marshal.dumps(layout.spec_part(base._replace(
            queue=f"q{q}", priority=p, concurrency_key=f"k{k}", concurrency_limit=10))))
        for q in range(2) for p in range(10) for k in range(1000)
    ]  # fmt: skip
    first = [decoder.spec(t) for t in stored]
    assert len({id(s) for s in first}) == 20_000
    again = [decoder.spec(t) for t in reversed(stored)]
    assert all(a is b for a, b in zip(again, reversed(first)))


def _job(spec: JobSpec):  # type: ignore[no-untyped-def]
    from raftsched.cluster.domain.model import Job, JobStatus

    return Job("j1", spec, JobStatus.ACTIVE, T0, T0, T0 + SEC, T0, T0)


def test_a_cluster_below_format_5_refuses_a_spec_with_these_fields_naming_them() -> None:
    """Until every node runs this version (command format 5), a spec that sets any of these fields is refused with
    FAILED_PRECONDITION naming the fields it sets, and nothing is proposed; a spec without them is taken."""
    from typing import Any, Callable

    from raftsched.cluster.domain.errors import RejectedError
    from raftsched.cluster.domain.model import SCHEDULES_FORMAT
    from raftsched.cluster.domain.results import FailedPrecondition, Ok
    from raftsched.cluster.domain.validation import Limits
    from raftsched.cluster.fsm.machine import JobStateMachine
    from raftsched.cluster.node.clock import FakeClock
    from raftsched.cluster.node.job_service import JobService
    from raftsched.storage import OutputReader

    m = JobStateMachine()
    proposed: list[c.Command] = []

    class Store:
        def read(self, fn: Callable[[JobStateMachine], Any], barrier: bool = True) -> Any:
            return fn(m)

        def execute(self, cmd: c.Command, timeout: float | None = None) -> Any:
            proposed.append(cmd)
            result = m.apply(c.encode(cmd), len(proposed) + 1)
            assert isinstance(result, Ok), result
            return result.value

    svc = JobService(Store(), FakeClock(T0), Limits(), OutputReader())  # type: ignore[arg-type]
    shaped = JobSpec(name="s", schedule=Every(60 * SEC), type="noop", priority=3, concurrency_key="k", concurrency_limit=2)
    assert isinstance(m.apply(c.encode(c.NodeInfo(T0, "n9", "0.0.9", 4)), 1), Ok)  # a member of the version before
    with pytest.raises(RejectedError) as refused:
        svc.create_job(shaped)
    assert isinstance(refused.value.rejected, FailedPrecondition)
    assert refused.value.rejected.message.startswith(
        f"a spec that sets priority, concurrency_key, concurrency_limit needs command format {SCHEDULES_FORMAT}"
    )
    assert proposed == []
    svc.create_job(JobSpec(name="plain", schedule=Every(60 * SEC), type="noop"))
    Store().execute(c.SetClusterFormat(T0, SCHEDULES_FORMAT))
    assert svc.create_job(shaped).spec.priority == 3
