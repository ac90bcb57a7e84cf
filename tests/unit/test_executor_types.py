"""Which job types an executor serves, what a shell run's environment holds, who it runs as and what it is
contained in (no processes here but the containment probe)."""

from __future__ import annotations

import threading

import pytest

from raftsched.cluster.executor import BuiltinSettings, Executor, ShellSettings, Task, containment
from raftsched.cluster.executor.handlers import builtin_handlers
from raftsched.cluster.executor.http_handler import HttpHandler
from raftsched.cluster.executor.notify_handler import NotifyHandler
from raftsched.cluster.executor.shell import ShellHandler, run_environment
from raftsched.storage import MemoryOutputStore
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
    assert isinstance(both["shell"], ShellHandler) and isinstance(both["http"], HttpHandler) and "notify" not in both
    assert isinstance(builtin_handlers(["notify"])["notify"], NotifyHandler)
    with pytest.raises(ValueError, match="--allow-type report: only the built-in types shell, http, notify need allowing"):
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

    ex = Executor(RecordingApi(), ["q"], allow_types=["shell"], output=MemoryOutputStore())  # type: ignore[arg-type]
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


def test_run_as_is_refused_by_name_unless_root_and_the_user_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(containment.os, "geteuid", lambda: 1000)
    with pytest.raises(ValueError, match="--run-as nobody: only an executor running as root can .* start it as nobody"):
        containment.run_as("nobody")
    monkeypatch.setattr(containment.os, "geteuid", lambda: 0)
    with pytest.raises(ValueError, match="--run-as no-such-user-here: there is no user 'no-such-user-here' on this machine"):
        containment.run_as("no-such-user-here")
    root = containment.run_as("root")
    assert (root.uid, root.gid) == (0, 0)


def test_containment_is_chosen_by_name_and_says_what_it_leaves_open() -> None:
    assert containment.resolve("session") == containment.SESSION_ONLY
    assert not containment.SESSION_ONLY.namespaced and containment.SESSION_ONLY.prefix == ()
    assert "setsid" in containment.SESSION_ONLY.describe()  # the gap is named at every start
    with pytest.raises(ValueError, match="--containment 'cgroup': give one of auto, pid-namespace, session"):
        containment.resolve("cgroup")
    found = containment.detect()
    assert found.namespaced == (found.kind in (containment.PID_NAMESPACE, containment.USER_PID_NAMESPACE))
    if found.namespaced:
        assert found.prefix[0].endswith("unshare") and "--pid" in found.prefix and "--mount-proc" in found.prefix
        assert ShellHandler(ShellSettings()).containment == found  # the best one, unless told otherwise
    else:
        with pytest.raises(ValueError, match="--containment pid-namespace: not available here"):
            containment.resolve("pid-namespace")
