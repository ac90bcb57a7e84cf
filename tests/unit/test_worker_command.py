"""``raftsched worker MODULE:ATTR`` without a cluster: the flags given (and only those) override the Worker
object's settings, and a target that names no worker is refused saying why."""

from __future__ import annotations

import os

import pytest

from raftsched import Worker
from raftsched.cluster.app.main import build_parser
from raftsched.cluster.app.worker_main import load_worker, overrides
from raftsched.cluster.domain.errors import ConfigError

pytestmark = pytest.mark.unit


def test_only_the_flags_given_override_the_workers_settings() -> None:
    worker = Worker(queues=["reports"], concurrency=2, cluster="127.0.0.1:1", grace=7)
    worker.configure(**overrides(build_parser().parse_args(["worker", "m:w"])))
    s = worker.settings
    assert (s.queues, s.concurrency, s.grace, s.connection.cluster, s.log_limit_mb) == (("reports",), 2, 7, "127.0.0.1:1", 64.0)

    args = ["worker", "m:w", "--queue", "a", "--queue", "b", "--concurrency", "16", "--cluster", "127.0.0.1:2"]
    args += ["--executor-id", "w1/a", "--token-file", "/t", "--grace", "3", "--log-limit-mb", "8", "--output-dir", "/o"]
    worker.configure(**overrides(build_parser().parse_args(args)))
    s = worker.settings
    assert (s.queues, s.concurrency, s.executor_id, s.grace, s.log_limit_mb, s.output_dir) == (("a", "b"), 16, "w1/a", 3, 8, "/o")
    assert (s.connection.cluster, s.connection.token_file) == ("127.0.0.1:2", "/t")
    with pytest.raises(TypeError, match="unknown worker setting"):
        worker.configure(colour="blue")


def test_a_target_that_names_no_worker_is_refused(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(str(tmp_path))
    with open(os.path.join(str(tmp_path), "jobs_for_test.py"), "w", encoding="utf-8") as f:
        f.write("from raftsched import Worker\nworker = Worker()\ndef make():\n    return Worker(queues=['x'])\nnumber = 3\n")
    assert isinstance(load_worker("jobs_for_test:worker"), Worker)
    assert load_worker("jobs_for_test:make").settings.queues == ("x",)
    with pytest.raises(ConfigError, match="name the worker as MODULE:ATTR"):
        load_worker("jobs_for_test")
    with pytest.raises(ConfigError, match="jobs_for_test has no other"):
        load_worker("jobs_for_test:other")
    with pytest.raises(ConfigError, match="is not a raftsched.Worker .*: its type is int"):
        load_worker("jobs_for_test:number")
    with pytest.raises(ConfigError, match="cannot import no_such_jobs"):
        load_worker("no_such_jobs:worker")


def test_a_schedule_without_a_queue_goes_to_the_first_queue_the_worker_serves_when_it_starts() -> None:
    worker = Worker(queues=["reports"])
    worker.schedule("nightly", cron="30 2 * * *", task="report")
    worker.schedule("hourly", every="1h", task="report", queue="elsewhere")
    worker.configure(**overrides(build_parser().parse_args(["worker", "m:w", "--queue", "night-shift"])))
    assert [(d.name, d.spec.queue) for d in worker._declarations()] == [("nightly", "night-shift"), ("hourly", "elsewhere")]
