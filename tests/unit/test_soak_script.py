"""scripts/soak.py keeps working without running a soak: its command line, the faults it draws, its summary
(importable: ``scripts/`` is on pytest's ``pythonpath``)."""

from __future__ import annotations

import random

import pytest

import soak
from tests.elections import Seen

pytestmark = pytest.mark.unit


def test_help_names_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        soak.main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert all(option in out for option in ("--minutes", "--seed", "--keep", "--plan"))


def test_plan_prints_the_faults_of_a_seed_and_starts_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert soak.main(["--plan", "--minutes", "10", "--seed", "7"]) == 0
    first = capsys.readouterr().out.splitlines()
    assert soak.main(["--plan", "--minutes", "10", "--seed", "7"]) == 0
    assert capsys.readouterr().out.splitlines() == first  # the same seed, the same faults
    assert len(first) > 50
    assert sum("SIGKILL the leader" in line for line in first) > 10
    assert sum("SIGKILL a follower" in line for line in first) > 10
    assert any("then SIGKILL the next leader" in line for line in first)
    assert any("SIGSTOP" in line for line in first)


def test_faults_mix_leader_kills_follower_kills_doubles_and_stops() -> None:
    rng = random.Random(1)
    faults = [soak.next_fault(rng) for _ in range(2000)]
    kills = [f for f in faults if f.kind == "kill"]
    assert 0.85 < len(kills) / len(faults) < 0.95
    assert 0.4 < sum(f.leader for f in kills) / len(kills) < 0.6
    assert all(f.leader for f in kills if f.double) and any(f.double for f in kills)
    assert all(2.0 <= f.wait_s <= 6.0 and f.back_after_s > 0 for f in faults)


def _tally(*elections: float | None) -> soak.Tally:
    tally = soak.Tally(kills=len(elections), leader_kills=len(elections))
    tally.losses = [soak.LeaderLoss("SIGKILL", "n1", 1000 * k, e) for k, e in enumerate(elections)]
    tally.rejoins = [0.8] * len(elections)
    return tally


def test_a_clean_soak_passes() -> None:
    text, failed = soak.summary(_tally(1.0, 1.2, 0.9), [], 30.0)
    assert not failed
    assert "median 1.00 s, max 1.20 s (n=3)" in text and "stuck elections      0" in text
    assert text.endswith("RESULT: ok")


@pytest.mark.parametrize(
    ("elections", "found", "line"),
    [
        ((1.0, 5.2), [], "stuck elections      1"),
        ((1.0, None), [], "stuck elections      1"),
        ((1.0,), ["double fire: job j on n1 has 2 runs for instant 5"], "duplicates           1"),
        ((1.0,), ["gap: interval job j (every 1000 ms) on n2: 1 instant(s) neither fired nor skipped"], "gaps                 1"),
        ((1.0,), ["lost acknowledged write: n3 lost 1 acknowledged job(s), e.g. ['j']"], "lost writes          1"),
        ((1.0,), ["replicas disagree: 1 run(s) on n1 but not on n2"], "other violations     1"),
    ],
)
def test_any_violation_fails_the_soak(elections: tuple[float | None, ...], found: list[str], line: str) -> None:
    text, failed = soak.summary(_tally(*elections), found, 30.0)
    assert failed and line in text and text.endswith("RESULT: FAILED"), text


def test_a_slow_rejoin_fails_the_soak() -> None:
    tally = _tally(1.0)
    tally.slow_rejoins.append("restarted n2 named the leader after 12.0 s")
    text, failed = soak.summary(tally, [], 30.0)
    assert failed and "over 10 s: 1" in text


def test_firing_resumed_counts_from_the_first_fire_proposed_after_the_loss() -> None:
    loss = soak.LeaderLoss("SIGKILL", "n1", 10_000, 1.0)
    fires = [_seen(stamped=9_990, seen=10_050), _seen(stamped=11_000, seen=11_300), _seen(stamped=11_200, seen=11_250)]
    soak.resumes([loss], fires)
    assert loss.resumed_s == pytest.approx(1.25)


def _seen(stamped: int, seen: int) -> Seen:
    return Seen("r", "j", stamped, stamped, 0, seen, "n2")
