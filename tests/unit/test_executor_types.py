"""Which job types an executor serves, and what a shell run's environment holds (no processes here)."""

from __future__ import annotations

import threading

import pytest

from cluster.executor import BuiltinSettings, Executor, ShellSettings, Task
from cluster.executor.handlers import builtin_handlers
from cluster.executor.http_handler import HttpHandler
from cluster.executor.shell import ShellHandler, run_environment
from tests.executor_fakes import FakeApi

pytestmark = pytest.mark.unit

TASK = Task("L7", 7042, "job-1@5", "job-1", 3, "shell", b"", 0, 0, 0)
EXECUTOR_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/ex",
    "LANG": "C.UTF-8",
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "RAFTSCHED_TOKEN": "executor-token",
    "HTTP_PROXY": "http://proxy:3128",
}


def test_shell_and_http_are_off_unless_allowed() -> None:
    assert sorted(builtin_handlers()) == ["noop"]
    assert sorted(builtin_handlers(["shell"])) == ["noop", "shell"]
    both = builtin_handlers(["shell", "http", "noop"])
    assert isinstance(both["shell"], ShellHandler) and isinstance(both["http"], HttpHandler)
    with pytest.raises(ValueError, match="--allow-type report: only the built-in types shell, http need allowing"):
        builtin_handlers(["report"])


def test_an_executor_serves_its_handlers_types_and_asks_for_them() -> None:
    assert Executor(FakeApi(), ["q"]).types() == ["noop"]  # type: ignore[arg-type]
    ex = Executor(FakeApi(), ["q"], handlers={"report": lambda t, c: b""}, allow_types=["http", "report"])  # type: ignore[arg-type]
    assert ex.types() == ["http", "noop", "report"]
    ex.register("resize", lambda t, c: None)
    assert "resize" in ex.types()

    asked = threading.Event()
    seen: list[list[str] | None] = []

    class RecordingApi(FakeApi):
        def acquire(self, queues: list[str], max_runs: int, wait_ms: int, types: list[str] | None = None) -> list[Task]:
            seen.append(types)
            asked.set()
            return []

    ex = Executor(RecordingApi(), ["q"], allow_types=["shell"])  # type: ignore[arg-type]
    ex.start()
    try:
        assert asked.wait(5)
    finally:
        ex.stop(0)
    assert seen[0] == ["noop", "shell"]


def test_a_shell_run_gets_a_clean_environment() -> None:
    env = run_environment(TASK, {"GREETING": "hi", "RAFTSCHED_FENCING_TOKEN": "forged"}, ShellSettings(), EXECUTOR_ENV)
    assert env == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/ex",
        "LANG": "C.UTF-8",
        "GREETING": "hi",
        "RAFTSCHED_RUN_ID": "job-1@5",
        "RAFTSCHED_JOB_ID": "job-1",
        "RAFTSCHED_ATTEMPT": "3",
        "RAFTSCHED_FENCING_TOKEN": "7042",  # set last: no job can pass off another token
    }


def test_pass_env_adds_named_variables_only_when_set() -> None:
    env = run_environment(TASK, {}, ShellSettings(pass_env=("HTTP_PROXY", "NOT_SET")), EXECUTOR_ENV)
    assert env["HTTP_PROXY"] == "http://proxy:3128" and "NOT_SET" not in env
    assert not any(name.startswith("AWS_") for name in env)


def test_bad_settings_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="kill grace -1"):
        ShellSettings(kill_grace_s=-1)
    with pytest.raises(ValueError, match="--pass-env 'A=B'"):
        ShellSettings(pass_env=("A=B",))
    assert BuiltinSettings().shell.kill_grace_s == 5.0
