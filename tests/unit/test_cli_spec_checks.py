"""What the command line says about a job before it sends it: an --at in the past is refused naming the
instant, the catch-up window and what the cluster would do (unless --allow-past); a 6-field cron whose
seconds (the last field) are '*' is warned of, with the expression likely meant; misfire policy fire_all
with instants less than a minute apart gets a note of how many runs an outage brings."""

from __future__ import annotations

import argparse

import pytest

from raftsched.cluster.app.cli.args import UsageError
from raftsched.cluster.app.cli.cron_hint import six_field_warning
from raftsched.cluster.app.cli.jobs import refuse_past_at, say_surprises
from raftsched.cluster.app.cli.spec_args import add_spec_args, build_spec
from raftsched.cluster.app.cli.spec_checks import age_text, catch_up_note, past_at_refusal
from raftsched.cluster.domain.model import At, Cron, Every, JobSpec, MisfirePolicy

pytestmark = pytest.mark.unit

NOW = 1_795_000_000_000  # 2026-11-18T11:06:40Z


def spec_args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_spec_args(p)
    return p.parse_args(list(argv))


def test_an_at_in_the_past_is_refused_naming_the_instant_the_window_and_what_would_happen() -> None:
    long_ago = past_at_refusal(JobSpec("x", At(1_577_836_800_000)), NOW)
    assert long_ago is not None
    assert long_ago.startswith("--at 2020-01-01T00:00:00Z is 2513d11h in the past")
    assert "older than the job's catch-up window (1d, --catchup-window)" in long_ago
    assert "skip it at once (a SKIPPED run): it would never run" in long_ago and "--allow-past" in long_ago

    recent = past_at_refusal(JobSpec("x", At(NOW - 600_000)), NOW)
    assert recent is not None and "is 10m in the past" in recent
    assert "within the job's catch-up window (1d, --catchup-window), so misfire policy fire_all (--misfire)" in recent
    assert recent.split("(--misfire) ")[1].startswith("would fire it at once, as a missed instant")
    skipped = past_at_refusal(JobSpec("x", At(NOW - 600_000), misfire=MisfirePolicy.SKIP), NOW)
    assert skipped is not None and "misfire policy skip (--misfire) would skip it at once" in skipped
    narrow = past_at_refusal(JobSpec("x", At(NOW - 600_000), catchup_window_ms=60_000), NOW)
    assert narrow is not None and "older than the job's catch-up window (1m, --catchup-window)" in narrow

    assert past_at_refusal(JobSpec("x", At(NOW - 3000)), NOW) is None  # still on time: it fires as any instant does
    assert past_at_refusal(JobSpec("x", At(NOW + 60_000)), NOW) is None
    assert past_at_refusal(JobSpec("x", Every(2000)), NOW) is None
    assert [age_text(ms) for ms in (500, 40_000, 312_000, 90_061_000)] == ["500ms", "40s", "5m12s", "1d1h"]


def test_job_create_refuses_a_past_at_unless_allowed() -> None:
    a = spec_args("--at", "2020-01-01T00:00:00Z", "--payload", "{}")
    with pytest.raises(UsageError, match=r"^--at 2020-01-01T00:00:00Z is .* in the past"):
        refuse_past_at(a, build_spec(a), NOW)
    window = spec_args("--at", "2026-11-18T10:00:00Z", "--catchup-window", "2m", "--misfire", "fire_once")
    with pytest.raises(UsageError, match=r"older than the job's catch-up window \(2m, --catchup-window\)"):
        refuse_past_at(window, build_spec(window), NOW)
    allowed = spec_args("--at", "2020-01-01T00:00:00Z", "--allow-past")
    refuse_past_at(allowed, build_spec(allowed), NOW)
    later = spec_args("--at", "2026-11-18T12:00:00Z")
    refuse_past_at(later, build_spec(later), NOW)


def test_a_six_field_cron_with_every_second_last_is_warned_of_with_what_was_likely_meant() -> None:
    quartz = six_field_warning("*/15 * * * * *")
    assert quartz is not None
    assert "reads them as minute hour day-of-month month day-of-week SECOND (the seconds last)" in quartz
    assert "fires every second of each minute the other fields give: 60 runs in a row" in quartz
    assert quartz.endswith("write '* * * * * */15'")
    noon = six_field_warning("0 0 12 * * *")
    assert noon is not None and noon.endswith("write '0 12 * * * 0' (or with 5 fields: '0 12 * * *')")
    for fine in ("* * * * * *", "0 12 * * * 30", "0 12 * * * */10", "30 2 * * *", "@daily", "not a cron at all"):
        assert six_field_warning(fine) is None, fine


def test_the_warning_goes_to_stderr_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    say_surprises(build_spec(spec_args("--cron", "*/15 * * * * *", "--misfire", "fire_once")), NOW)
    err = capsys.readouterr().err
    assert err.startswith("raftsched: warning: cron '*/15 * * * * *' has 6 fields") and err.count("\n") == 1


def test_fire_all_with_instants_less_than_a_minute_apart_gets_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    note = catch_up_note(JobSpec("tick", Every(2000)), NOW, chosen=False)
    assert note is not None and note.startswith("misfire policy fire_all (the default) fires every instant")
    assert "a minute down brings 30 runs, an hour 1,800, and up to 43,200" in note
    assert "--misfire fire_once fires one run for them all" in note
    cron = catch_up_note(JobSpec("q", Cron("*/15 * * * * *", "UTC")), NOW, chosen=True)
    assert cron is not None and cron.startswith("misfire policy fire_all fires") and "240 instants an hour" in cron
    for quiet in (
        JobSpec("minutely", Every(60_000)),
        JobSpec("cron-minutely", Cron("* * * * *", "UTC")),
        JobSpec("once", Every(2000), misfire=MisfirePolicy.FIRE_ONCE),
        JobSpec("later", At(NOW + 1000)),
    ):
        assert catch_up_note(quiet, NOW, chosen=False) is None, quiet.name

    say_surprises(build_spec(spec_args("--every", "2s", "--payload", "{}")), NOW)
    assert capsys.readouterr().err.startswith("raftsched: note: misfire policy fire_all (the default)")
    say_surprises(build_spec(spec_args("--every", "2s", "--misfire", "fire_once")), NOW)
    say_surprises(build_spec(spec_args("--every", "2s")), NOW, schedule=False, policy=False)  # an update of the payload
    assert capsys.readouterr().err == ""
