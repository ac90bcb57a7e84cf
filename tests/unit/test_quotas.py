"""Quotas ([limits]): max_jobs and max_pending_runs travel in the commands and are enforced in apply, identically
on every node; the proposer refuses early; the config section parses with its defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import RejectedError
from raftsched.cluster.domain.model import After, Every, JobSpec, RunStatus
from raftsched.cluster.domain.results import Ok, ResourceExhausted
from raftsched.cluster.domain.validation import Limits
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.clock import FakeClock
from raftsched.cluster.node.config import ConfigError, LimitsConfig, parse_config
from raftsched.cluster.node.job_service import JobService
from raftsched.storage import OutputReader

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000
SPEC = JobSpec(name="q", schedule=Every(60_000), type="noop")


class Log:
    """Commands through their log encoding, applied to two replicas that must agree."""

    def __init__(self) -> None:
        self.replicas = [JobStateMachine(), JobStateMachine()]
        self.index = 0

    def apply(self, cmd: c.Command) -> Any:
        self.index += 1
        data = c.encode(cmd)
        results = [m.apply(data, self.index) for m in self.replicas]
        assert type(results[0]) is type(results[1])
        return results[0]


def test_max_jobs_is_enforced_in_apply_and_an_idempotent_retry_still_finds_its_job() -> None:
    log = Log()
    assert isinstance(log.apply(c.CreateJob(T0, "j-1", SPEC, "key-1", max_jobs=2)), Ok)
    assert isinstance(log.apply(c.CreateJob(T0, "j-2", SPEC, max_jobs=2)), Ok)
    full = log.apply(c.CreateJob(T0, "j-3", SPEC, max_jobs=2))
    assert isinstance(full, ResourceExhausted) and "max_jobs = 2" in full.message
    again = log.apply(c.CreateJob(T0, "j-4", SPEC, "key-1", max_jobs=2))
    assert isinstance(again, Ok) and again.value.job_id == "j-1"
    # the value travels in the command: a proposer with a higher limit (another config) decides its own command
    assert isinstance(log.apply(c.CreateJob(T0, "j-5", SPEC, max_jobs=3)), Ok)
    assert isinstance(log.apply(c.CreateJob(T0, "j-6", SPEC)), Ok)  # 0: an entry from before quotas
    assert [len(m.jobs) for m in log.replicas] == [4, 4]


def test_max_pending_runs_refuses_triggers_and_skips_due_instants() -> None:
    log = Log()
    log.apply(c.CreateJob(T0, "j-1", SPEC))
    log.apply(c.CreateJob(T0, "j-2", JobSpec(name="o", schedule=After(1000))))
    assert isinstance(log.apply(c.TriggerJob(T0, "j-1", max_pending=1)), Ok)
    refused = log.apply(c.TriggerJob(T0, "j-1", max_pending=1))
    assert isinstance(refused, ResourceExhausted) and "max_pending_runs = 1" in refused.message
    report = log.apply(c.Fire(T0 + 1000, (("j-2", T0 + 1000),), max_pending=1))
    assert isinstance(report, Ok) and report.value.created == [] and report.value.skipped == 1
    for m in log.replicas:
        (skip,) = [r for r in m.runs.values() if r.status is RunStatus.SKIPPED]
        assert skip.job_id == "j-2" and "max_pending_runs = 1" in skip.error
        assert m.jobs["j-2"].next_fire_ms is None  # the one-off instant is handled: never fired later, never twice
    assert isinstance(log.apply(c.TriggerJob(T0, "j-1", max_pending=2)), Ok)


@pytest.mark.parametrize(
    "cmd",
    [
        c.CreateJob(T0, "j-1", SPEC, "k", "fp", max_jobs=7),
        c.TriggerJob(T0, "j-1", max_pending=9),
        c.Fire(T0, (("j-1", T0),), 100, 5000, max_pending=11),
    ],
)
def test_quotas_round_trip_through_the_log(cmd: c.Command) -> None:
    assert c.decode(c.encode(cmd)) == cmd


def test_entries_from_before_quotas_read_as_no_quota() -> None:
    assert c.decode(b'{"op":"trigger_job","job_id":"j","v":1,"now":5}') == c.TriggerJob(5, "j", 0)
    assert b'"qj"' not in c.encode(c.CreateJob(T0, "j-1", SPEC))  # no quota: the entry is as before


def _service(m: JobStateMachine, limits: Limits) -> tuple[JobService, list[Any]]:
    proposed: list[Any] = []

    class Store:
        def read(self, fn: Callable[[JobStateMachine], Any], barrier: bool = True) -> Any:
            return fn(m)

        def execute(self, cmd: c.Command, timeout: float | None = None) -> Any:
            proposed.append(cmd)
            result = m.apply(c.encode(cmd), len(proposed) + 100)
            assert isinstance(result, Ok)
            return result.value

    return JobService(Store(), FakeClock(T0), limits, OutputReader()), proposed  # type: ignore[arg-type]


def test_the_proposer_refuses_early_and_puts_its_limits_in_the_command() -> None:
    m = JobStateMachine()
    svc, proposed = _service(m, Limits(max_jobs=1, max_pending_runs=1))
    job = svc.create_job(SPEC)
    assert proposed[-1].max_jobs == 1
    with pytest.raises(RejectedError) as err:
        svc.create_job(SPEC)
    assert isinstance(err.value.rejected, ResourceExhausted) and "max_jobs = 1" in str(err.value)
    assert len(proposed) == 1  # refused before Raft
    svc.trigger_job(job.job_id)
    assert proposed[-1].max_pending == 1
    with pytest.raises(RejectedError, match="max_pending_runs = 1"):
        svc.trigger_job(job.job_id)
    assert len(proposed) == 2


NODES = '[[nodes]]\nid = "n1"\nraft = "127.0.0.1:7001"\ngrpc = "127.0.0.1:50051"\n'


def test_limits_section_defaults_and_values(tmp_path: Path) -> None:
    path = str(tmp_path / "cluster.toml")
    assert parse_config(NODES, path).limits == LimitsConfig(10_000_000, 10_000_000, 256, 512)
    cfg = parse_config(NODES + "[limits]\nmax_jobs = 5\nmax_pending_runs = 6\nmax_watch_streams = 7\nmax_long_polls = 8\n", path)
    assert cfg.limits == LimitsConfig(5, 6, 7, 8)
    assert cfg.output_dir() == str(tmp_path / "var" / "outputs")
    assert parse_config(NODES + '[logs]\ndir = "out"\n', path).output_dir() == str(tmp_path / "out")


@pytest.mark.parametrize(
    "text, match",
    [
        ("[limits]\nmax_jobs = 0\n", "max_jobs must be positive"),
        ("[limits]\nmax_watch_streams = -1\n", "max_watch_streams must be positive"),
        ("[limits]\nmax_jobs = 1.5\n", "max_jobs must be a int"),
        ("[limits]\nmax_streams = 1\n", "unknown key"),
    ],
)
def test_bad_limits_are_refused(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_config(NODES + text, str(tmp_path / "cluster.toml"))
