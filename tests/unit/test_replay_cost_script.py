"""scripts/bench/micro/replay_cost.py: a saved log is what the Raft log held, and its replay finishes its runs
(importable: ``scripts/`` is on pytest's ``pythonpath``)."""

from __future__ import annotations

import gc
import marshal
import pickle
import re
from pathlib import Path

import pytest

import replay_cost
from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import At, JobSpec
from raftsched.raft import batching
from raftsched.raft.lmdb_journal import LmdbJournal

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000


def _entries(jobs: int) -> list[tuple[int, bytes]]:
    """Jobs created, fired, leased and completed, one entry per step as a leader would propose them (the
    completions in one batch)."""
    ids = [f"j-{i:04d}" for i in range(jobs)]
    cmds = [c.SetClusterFormat(T0 - 60_000, 4)]
    cmds += [c.CreateJob(T0 - 60_000, job_id, JobSpec(name=job_id, schedule=At(T0), type="noop")) for job_id in ids]
    cmds.append(c.Fire(T0, tuple((job_id, T0) for job_id in ids), lookahead_ms=100))
    cmds.append(c.AcquireLeases(T0, "bench", ("default",), jobs))
    return [(index, c.encode(cmd)) for index, cmd in enumerate(cmds, start=3)]


def test_a_replay_finishes_the_runs_of_its_log_and_says_what_each_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from raftsched.cluster.fsm.machine import JobStateMachine

    entries = _entries(30)
    probe = JobStateMachine()  # the grants' leases and tokens, to complete them as executors would
    for index, data in entries:
        probe.apply(data, index)
    leased = [run for run in probe.runs.values() if run.lease_id]
    assert len(leased) == 30
    done = [c.encode(c.CompleteRun(T0 + 5, run.lease_id, run.fencing_token, True, executor_id="bench")) for run in leased]
    entries.append((entries[-1][0] + 1, batching.pack(done)))
    log = tmp_path / "replay.log"
    log.write_bytes(marshal.dumps(entries))
    before = gc.get_threshold()
    assert replay_cost.main(["replay", str(log), "--rounds", "2", "--skip", "31"]) == 0
    assert gc.get_threshold() == before
    figure, mechanism = capsys.readouterr().out.strip().splitlines()
    m = re.fullmatch(
        r"replay  3 entries, 30 runs finished: ([\d.]+) us/run \(apply, commit and events; best of 2, node gc\)", figure
    )
    assert m is not None and float(m.group(1)) > 0, figure
    m = re.fullmatch(r"  that round: user ([\d.]+) us, system ([\d.]+) us, (\d+) bytes written per run", mechanism)
    assert m is not None and float(m.group(1)) > 0 and int(m.group(3)) > 0, mechanism  # LMDB wrote its pages


def test_a_replay_as_another_format_switches_to_it_wherever_the_log_did() -> None:
    entries = _entries(3)
    done = [c.encode(c.SetClusterFormat(T0 + 1, 5)), c.encode(c.Barrier(T0 + 1))]
    entries.append((entries[-1][0] + 1, batching.pack(done)))
    again = replay_cost.as_format(entries, 7)
    assert [index for index, _ in again] == [index for index, _ in entries]
    assert c.decode(again[0][1]) == c.SetClusterFormat(T0 - 60_000, 7)
    assert again[1:-1] == entries[1:-1]  # every other entry as it was, byte for byte
    switched, barrier = batching.unpack(again[-1][1])
    assert c.decode(switched) == c.SetClusterFormat(T0 + 1, 7) and barrier == done[1]


def test_a_replay_as_a_format_this_code_does_not_apply_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "replay.log"
    log.write_bytes(marshal.dumps(_entries(3)))
    assert replay_cost.main(["replay", str(log), "--format", str(c.FORMAT_VERSION + 1)]) == 2
    assert f"applies command formats 1 to {c.FORMAT_VERSION}" in capsys.readouterr().err


def test_a_replay_of_the_first_entries_leaves_the_rest_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from raftsched.cluster.fsm.machine import JobStateMachine

    entries = _entries(4)
    probe = JobStateMachine()
    for index, data in entries:
        probe.apply(data, index)
    leased = [run for run in probe.runs.values() if run.lease_id]
    done = [c.encode(c.CompleteRun(T0 + 5, run.lease_id, run.fencing_token, True, executor_id="bench")) for run in leased]
    entries.append((entries[-1][0] + 1, batching.pack(done)))
    log = tmp_path / "replay.log"
    log.write_bytes(marshal.dumps(entries))
    assert replay_cost.main(["replay", str(log), "--rounds", "1", "--skip", "5", "--entries", "8"]) == 0
    assert capsys.readouterr().out.startswith("replay  3 entries, 4 runs finished: ")  # the completions are entry 8
    assert replay_cost.main(["replay", str(log), "--rounds", "1", "--skip", "5", "--entries", "7"]) == 1
    assert "no run finished in the 2 entries replayed" in capsys.readouterr().err  # fired and leased, not completed
    assert replay_cost.main(["replay", str(log), "--entries", "0"]) == 2
    assert "replay at least one entry" in capsys.readouterr().err


def test_a_replay_with_no_finished_run_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "replay.log"
    log.write_bytes(marshal.dumps(_entries(3)))
    assert replay_cost.main(["replay", str(log), "--rounds", "1", "--skip", "0"]) == 1
    assert "no run finished" in capsys.readouterr().err


def test_the_saved_log_is_every_regular_entry_as_the_adapter_hands_it_over(tmp_path: Path) -> None:
    journal = LmdbJournal(str(tmp_path / "raft.lmdb"), sync=False)
    journal.bind_thread()
    journal.add(b"\x01" + pickle.dumps(3), 1, 1)  # pysyncobj's own entries (a no-op, a membership change): left out
    expected = []
    for idx, data in enumerate([b'{"op":"a"}', b'{"op":"b"}'], start=2):
        journal.add(b"\x00" + pickle.dumps((0, (data,))), idx, 1)
        expected.append((idx, data))
    journal.commit()
    journal._destroy()  # pysyncobj's close of a journal
    out = tmp_path / "saved.log"
    assert replay_cost.save_log(str(tmp_path / "raft.lmdb"), str(out)) == 2
    assert marshal.loads(out.read_bytes()) == expected
