"""The history checker (tests/history.py) on hand-made histories: a sound one passes, each kind of breach fails."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pytest

from tests.history import (
    Expected,
    History,
    HistoryViolation,
    IntervalJob,
    LeaseRecord,
    OneOffJob,
    RunRecord,
    check_history,
    replica_disagreements,
    violations,
)
from tests.history_read import applied_entries_deleted, settled

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000  # when the interval job was created
EVERY = 1000
NODES = ("n1", "n2", "n3")


def tick(k: int, status: str = "PENDING") -> RunRecord:
    ms = T0 + k * EVERY
    return RunRecord(f"tick@{ms}", "tick", ms, status)


def sound() -> tuple[History, Expected]:
    """Three nodes that agree: an interval job firing k = 1..10 with k = 4..6 skipped in one record, a one-off
    that fired once and was leased twice (the first lease expired), two acknowledged jobs everywhere."""
    skip = RunRecord(
        f"tick@{T0 + 4 * EVERY}", "tick", T0 + 4 * EVERY, "SKIPPED", skipped_count=3, skipped_until_ms=T0 + 6 * EVERY
    )
    once = RunRecord("once@5000", "once", 5000, "SUCCEEDED", attempt=2, fencing_token=9002, executor_id="b")
    manual = RunRecord("tick@manual-77", "tick", T0 + 2 * EVERY, "PENDING", manual=True)  # TriggerJob: not a fire
    runs = [tick(k) for k in (1, 2, 3, 7, 8, 9, 10)] + [skip, once, manual]
    leases = [LeaseRecord("once@5000", 1, 5001, "a", 10, 20), LeaseRecord("once@5000", 2, 9002, "b", 21, 30)]
    history = History(runs={n: list(runs) for n in NODES}, jobs={n: {"tick", "once", "w-1", "w-2"} for n in NODES}, leases=leases)
    expected = Expected(
        acknowledged=["w-1", "w-2"],
        interval=[IntervalJob("tick", EVERY, first_ms=T0 + EVERY, min_fired=7, fired_after_ms=T0 + 9 * EVERY)],
        one_off=[OneOffJob("once", at_ms=5000, status="SUCCEEDED")],
        nodes=NODES,
    )
    return history, expected


def on_every_node(history: History, change: object) -> History:
    return dataclasses.replace(history, runs={n: change(list(runs)) for n, runs in history.runs.items()})  # type: ignore[operator]


def failure(history: History, expected: Expected) -> str:
    with pytest.raises(HistoryViolation) as err:
        check_history(history, expected)
    return str(err.value)


def test_a_sound_history_passes() -> None:
    history, expected = sound()
    assert violations(history, expected) == []
    check_history(history, expected)


def test_a_double_fire_fails() -> None:
    history, expected = sound()
    twice = on_every_node(history, lambda runs: runs + [RunRecord("tick@again", "tick", T0 + 3 * EVERY, "PENDING")])
    text = failure(twice, expected)
    assert "double fire: job tick on n1 has 2 runs for instant" in text and "tick@again" in text
    assert text.count("double fire") == 3  # once per node, each named


def test_a_run_listed_twice_fails() -> None:
    history, expected = sound()
    assert "double fire: run tick@" in failure(on_every_node(history, lambda runs: runs + [tick(8)]), expected)


def test_a_fire_inside_a_skipped_range_fails() -> None:
    history, expected = sound()
    text = failure(on_every_node(history, lambda runs: runs + [tick(5)]), expected)
    assert "is both skipped and fired" in text


def test_a_gap_fails() -> None:
    history, expected = sound()
    text = failure(on_every_node(history, lambda runs: [r for r in runs if r.run_id != f"tick@{T0 + 8 * EVERY}"]), expected)
    assert "gap: interval job tick (every 1000 ms) on n1: 1 instant(s) neither fired nor skipped" in text
    assert str(T0 + 8 * EVERY) in text


def test_a_gap_before_the_first_observed_run_fails_when_the_first_instant_is_known() -> None:
    history, expected = sound()
    late = on_every_node(history, lambda runs: [r for r in runs if r.run_id != f"tick@{T0 + EVERY}"])
    assert "gap:" in failure(late, expected)
    unanchored = dataclasses.replace(expected, interval=[IntervalJob("tick", EVERY, min_fired=6)])
    assert violations(late, unanchored) == []  # from the first observed instant on, nothing is missing


def test_an_instant_off_the_grid_fails() -> None:
    history, expected = sound()
    assert "off its grid" in failure(
        on_every_node(history, lambda rs: rs + [RunRecord("tick@x", "tick", T0 + 1500, "PENDING")]), expected
    )


def test_skips_fail_where_none_are_allowed_and_a_bad_skip_record_fails() -> None:
    history, expected = sound()
    strict = dataclasses.replace(expected, interval=[dataclasses.replace(expected.interval[0], skips_allowed=False)])
    assert "1 SKIPPED record(s), none allowed" in failure(history, strict)

    def miscounted(runs: list[RunRecord]) -> list[RunRecord]:
        return [dataclasses.replace(r, skipped_count=2) if r.status == "SKIPPED" else r for r in runs]

    text = failure(on_every_node(history, miscounted), expected)
    assert "counts 2 instant(s)" in text and "gap:" in text


def test_a_job_that_stopped_firing_or_fired_too_little_fails() -> None:
    history, expected = sound()
    stopped = on_every_node(history, lambda runs: [r for r in runs if r.run_id != f"tick@{T0 + 10 * EVERY}"])
    text = failure(stopped, expected)
    assert "stopped firing" in text and "fired 6 instant(s), expected at least 7" in text
    silent = on_every_node(history, lambda runs: [r for r in runs if r.job_id != "tick"])
    assert "no run at all (never fired)" in failure(silent, expected)


def test_a_one_off_fired_twice_or_at_the_wrong_instant_or_status_fails() -> None:
    history, expected = sound()
    again = RunRecord("once@6000", "once", 6000, "PENDING")
    assert "one-off job once on n1: fired 2 times, expected once" in failure(
        on_every_node(history, lambda rs: rs + [again]), expected
    )
    wrong = dataclasses.replace(expected, one_off=[OneOffJob("once", at_ms=4000, status="PENDING")])
    text = failure(history, wrong)
    assert "expected 4000 (1970-01-01T00:00:04.000+00:00)" in text and "its run is SUCCEEDED, expected PENDING" in text


def test_a_lost_acknowledged_job_fails() -> None:
    history, expected = sound()
    history.jobs["n3"] = {"tick", "once", "w-1"}
    text = failure(history, expected)
    assert "lost acknowledged write: n3 lost 1 acknowledged job(s), e.g. ['w-2']" in text
    assert "n1 lost" not in text


def test_replicas_that_disagree_fail() -> None:
    history, expected = sound()
    history.runs["n2"] = [
        dataclasses.replace(r, status="LEASED") if r.run_id == f"tick@{T0 + EVERY}" else r for r in history.runs["n2"]
    ]
    history.runs["n3"] = history.runs["n3"][1:]
    text = failure(history, expected)
    assert f"replicas disagree on run tick@{T0 + EVERY}: n1 has" in text
    assert "replicas disagree: 1 run(s) on n1 but not on n3" in text


def test_two_lease_holders_fail() -> None:
    history, expected = sound()
    overlapping = [LeaseRecord("once@5000", 1, 5001, "a", 10, 25), LeaseRecord("once@5000", 2, 9002, "b", 21, 30)]
    text = failure(dataclasses.replace(history, leases=overlapping), expected)
    assert "two lease holders: run once@5000: attempt 1 (token 5001, a) held from 10 to 25 while attempt 2" in text
    never_ended = [LeaseRecord("once@5000", 1, 5001, "a", 10, None), LeaseRecord("once@5000", 2, 9002, "b", 21, 30)]
    assert "two lease holders" in failure(dataclasses.replace(history, leases=never_ended), expected)
    one_token = [LeaseRecord("once@5000", 2, 9002, "a", 10, 20), LeaseRecord("once@5000", 2, 9002, "b", 10, 20)]
    assert "token 9002 was granted to ['a', 'b']" in failure(dataclasses.replace(history, leases=one_token), expected)


def test_leases_whose_tokens_do_not_grow_or_that_went_unobserved_fail() -> None:
    history, expected = sound()
    shrinking = [LeaseRecord("once@5000", 1, 9002, "a", 10, 20), LeaseRecord("once@5000", 2, 5001, "b", 21, 30)]
    assert "attempts and tokens must grow" in failure(dataclasses.replace(history, leases=shrinking), expected)
    first_only = history.leases[:1]
    assert "a lease went unobserved" in failure(dataclasses.replace(history, leases=first_only), expected)


def test_a_node_that_was_not_read_fails() -> None:
    history, expected = sound()
    del history.runs["n3"], history.jobs["n3"]
    text = failure(history, expected)
    assert "node n3: its runs were not read" in text and "node n3: its jobs were not read" in text
    assert "nothing to check" in failure(History(runs={}), expected)


def test_every_violation_is_reported_at_once() -> None:
    history, expected = sound()
    broken = on_every_node(history, lambda runs: [r for r in runs if r.run_id != f"tick@{T0 + 8 * EVERY}"] + [tick(9)])
    broken.jobs["n1"] = set()
    err = pytest.raises(HistoryViolation, check_history, broken, expected).value
    kinds = {v.split(":")[0] for v in err.violations}
    assert {"double fire", "gap", "lost acknowledged write"} <= kinds, err.violations
    assert str(err).startswith(f"history check failed: {len(err.violations)} violation(s) in 3 node(s)")


# ------------------------------------------------------------ readings taken while a command commits


def _reading(*statuses: str) -> History:
    """One reading of the three nodes: the run ``once`` in each node's status, in the order of ``NODES``."""
    return History(runs={n: [RunRecord("once@5000", "once", 5000, s, attempt=1)] for n, s in zip(NODES, statuses)})


def _reader(readings: list[History]) -> tuple[list[int], Callable[[], History]]:
    calls = [0]

    def read() -> History:
        calls[0] += 1
        return readings[min(calls[0], len(readings)) - 1]

    return calls, read


def test_a_reading_that_agrees_is_taken_at_once() -> None:
    calls, read = _reader([_reading("PENDING", "PENDING", "PENDING")])
    assert settled(read, settle_s=5, pause_s=0) == _reading("PENDING", "PENDING", "PENDING") and calls[0] == 1


def test_a_commit_between_two_nodes_readings_is_read_again_until_they_agree() -> None:
    # n1 was read before the lease expired, n2 and n3 after: the next reading finds every node past it
    calls, read = _reader([_reading("LEASED", "PENDING", "PENDING"), _reading("PENDING", "PENDING", "PENDING")])
    history = settled(read, settle_s=5, pause_s=0)
    assert history == _reading("PENDING", "PENDING", "PENDING") and calls[0] == 2
    assert not violations(history, Expected(nodes=set(NODES)))


def test_a_disagreement_that_stays_is_checked_and_reported() -> None:
    calls, read = _reader([_reading("LEASED", "PENDING", "PENDING")])  # the same every time: the nodes at rest
    history = settled(read, settle_s=5, pause_s=0)
    assert calls[0] == 2  # read again once: unchanged, so it is the state
    with pytest.raises(HistoryViolation, match="replicas disagree on run once@5000: n1 has"):
        check_history(history, Expected(nodes=set(NODES)))


def test_readings_that_keep_changing_are_checked_as_the_last_one_when_time_is_up() -> None:
    changing = [_reading("LEASED", "PENDING", s) for s in ("PENDING", "SUCCEEDED", "PENDING", "SUCCEEDED") * 50]
    calls, read = _reader(changing)
    history = settled(read, settle_s=0.05, pause_s=0.01)
    assert 2 <= calls[0] < len(changing) and history == changing[calls[0] - 1]
    assert replica_disagreements(history.runs)


def test_a_node_log_saying_it_deleted_applied_entries_is_found(tmp_path: Path) -> None:
    """What pysyncobj logs when a follower deletes entries it applied is found in that node's log, and only there."""
    logs = {}
    for node in NODES:
        logs[node] = tmp_path / f"{node}.log"
        logs[node].write_text("2026 INFO raftsched.node: started\n")
    with logs["n2"].open("a") as log:
        log.write(
            "2026 CRITICAL pysyncobj.syncobj: truncating already-applied log entries from index 3520 "
            "(last applied: 3522) - state machine may have diverged from other cluster members\n"
        )
    nodes = {node: SimpleNamespace(log_path=str(path)) for node, path in logs.items()}
    nodes["n4"] = SimpleNamespace(log_path=str(tmp_path / "never-started.log"))
    found = applied_entries_deleted(SimpleNamespace(nodes=nodes))  # type: ignore[arg-type]
    assert len(found) == 1 and found[0].startswith("n2: ") and "from index 3520" in found[0]
    logs["n2"].write_text("2026 INFO raftsched.node: started\n")
    assert applied_entries_deleted(SimpleNamespace(nodes=nodes)) == []  # type: ignore[arg-type]


def test_leases_given_as_a_function_are_read_after_the_nodes_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A retry an executor takes while the nodes are read shows in their runs: the lease records must be read
    after them, or that attempt looks unobserved."""
    import tests.history_read as history_read

    order: list[str] = []
    lease = LeaseRecord("r1", 1, 1001, "e1", T0, None)

    def nodes(addresses: object, job_ids: object, job_prefix: object, leases: object, security: object) -> History:
        order.append("runs")
        return History(runs={"n1": []}, leases=list(leases))  # type: ignore[call-overload]

    def leases() -> list[LeaseRecord]:
        order.append("leases")
        return [lease]

    monkeypatch.setattr(history_read, "read_nodes", nodes)
    cluster = SimpleNamespace(nodes={}, client_security=lambda: None)
    history = history_read.read_history(cluster, ["j1"], leases=leases)  # type: ignore[arg-type]
    assert order == ["runs", "leases"] and history.leases == [lease]
    given = history_read.read_history(cluster, ["j1"], leases=[lease])  # type: ignore[arg-type]
    assert order == ["runs", "leases", "runs"] and given.leases == [lease]
