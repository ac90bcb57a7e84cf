"""The local output store, the spooled run log, URI reading, and the executor's store retries (no network)."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest

from cluster.executor.bounded_log import BoundedLog, LogSettings
from cluster.executor.ports import Finished, Task, TaskContext
from cluster.executor.worker import Executor, _Held
from storage import (
    EMPTY_OUTPUT_URI,
    BytesLogSource,
    LocalOutputStore,
    MemoryOutputStore,
    OutputKey,
    OutputMissing,
    OutputReader,
    OutputStoreError,
    read_file_uri,
)

pytestmark = pytest.mark.unit

KEY = OutputKey("J1", "R1", 2, 42)


def _expected(data: bytes, limit: int) -> bytes:
    if len(data) <= limit:
        return data
    head, ring = limit // 2, limit - limit // 2
    note = f"\n... [{len(data) - limit} bytes of log dropped: over the {limit}-byte limit] ...\n".encode()
    return data[:head] + note + data[-ring:]


# ------------------------------------------------------------------ BoundedLog


@pytest.mark.parametrize("limit", [1024, 1025, 4096])
def test_bounded_log_keeps_head_and_tail_like_a_reference(limit: int) -> None:
    rng = random.Random(limit)
    for _ in range(40):
        log, data = BoundedLog(limit), bytearray()
        for _ in range(rng.randrange(0, 30)):
            chunk = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 7, 100, 600, 3000])))
            log.write(chunk)
            data += chunk
        want = _expected(bytes(data), limit)
        assert log.getvalue() == want
        assert log.size == len(want)
        assert log.dropped == max(0, len(data) - limit)
        with log.open_reader() as r:  # small reads cross the segment borders
            got = b"".join(iter(lambda: r.read(rng.randrange(1, 300)), b""))
        assert got == want
        log.close()


def test_bounded_log_spools_to_disk_and_keeps_memory_small(tmp_path: Path) -> None:
    limit = 8 * 1024 * 1024
    log = BoundedLog(limit, spool_dir=str(tmp_path))
    block = bytes(range(256)) * 4096  # 1 MiB
    for i in range(20):
        log.write(block[i:] + block[:i])
    assert log._on_disk  # past SPOOL_MEMORY_BYTES the log lives in an (unlinked) temp file
    assert os.listdir(tmp_path) == []
    assert log.dropped == 20 * len(block) - limit
    with log.open_reader() as r:
        first = r.read(1024 * 1024)
        assert first == block
        total = len(first) + sum(len(c) for c in iter(lambda: r.read(1024 * 1024), b""))
    assert total == log.size
    tail = log.getvalue()[-len(block) :]
    assert tail == block[19:] + block[:19]
    log.close()
    log.write(b"after close is ignored")
    with pytest.raises(ValueError):
        log.open_reader()


def test_str_writes_and_configured_settings(tmp_path: Path) -> None:
    ctx = TaskContext(LogSettings(2048, str(tmp_path)).new_log())
    assert ctx.log.limit == 2048 and ctx.log._spool_dir == str(tmp_path)
    ctx.log.write("héllo\n")
    assert ctx.log.getvalue() == "héllo\n".encode()
    with pytest.raises(ValueError):
        LogSettings(10)


# ------------------------------------------------------------------ LocalOutputStore and reading


def test_local_store_layout_and_round_trip(tmp_path: Path) -> None:
    store = LocalOutputStore(str(tmp_path / "out"))
    store.check()
    log = BoundedLog(4096)
    log.write(b"line 1\n" * 1000)
    uri = store.put(KEY, log, b'{"exit_code": 0}')
    path = tmp_path / "out" / "J1" / "R1" / "attempt-2-token-42.log"
    assert uri == f"file://{path}" == store.uri_for(KEY)
    assert path.read_bytes() == log.getvalue()
    assert (tmp_path / "out/J1/R1/attempt-2-token-42.result").read_bytes() == b'{"exit_code": 0}'
    assert not list((tmp_path / "out").rglob("*.tmp"))
    assert read_file_uri(uri) == (log.getvalue(), b'{"exit_code": 0}')
    assert store.put(KEY, b"again", b"") == uri  # the same key overwrites
    assert read_file_uri(uri) == (b"again", b"")


def test_unsafe_ids_stay_inside_the_root(tmp_path: Path) -> None:
    store = LocalOutputStore(str(tmp_path))
    uri = store.put(OutputKey("../../etc", "a/b", 1, 1), BytesLogSource(b"x"), b"")
    assert uri.startswith(f"file://{tmp_path}/") and "/../" not in uri


def test_check_refuses_an_unwritable_root(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    with pytest.raises(OutputStoreError) as err:
        LocalOutputStore(str(blocker / "out")).check()
    assert not err.value.retryable and "cannot create the output directory" in str(err.value)


@pytest.mark.parametrize(
    "uri,needle",
    [
        ("file:///etc/passwd", "not a raftsched run log"),
        ("file://relative/attempt-1-token-1.log", "not a raftsched run log"),
        ("file:///x/../etc/attempt-1-token-1.log", "not a raftsched run log"),
        ("file:///nonexistent/J/R/attempt-1-token-1.log", "cannot be read on this node"),
        ("http://example.com/attempt-1-token-1.log", "scheme this node cannot read"),
        ("s3://bucket/attempt-1-token-1.log", "no S3 reader"),
    ],
)
def test_reader_reports_missing_output_with_a_reason(uri: str, needle: str) -> None:
    with pytest.raises(OutputMissing) as err:
        OutputReader().read(uri)
    assert needle in str(err.value)


def test_reader_cuts_a_large_log_to_head_and_tail(tmp_path: Path) -> None:
    store = LocalOutputStore(str(tmp_path))
    data = b"a" * 6000 + b"b" * 6000
    uri = store.put(KEY, data, b"r")
    log, result = OutputReader(max_bytes=4000).read(uri)
    assert log.startswith(b"a" * 2000 + b"\n... [8000 bytes") and log.endswith(b"b" * 2000)
    assert uri in log.decode() and result == b"r"


# ------------------------------------------------------------------ the executor's retries


class FakeApi:
    def __init__(self) -> None:
        self.completions: list[tuple[bool, bytes, str, str]] = []

    def acquire(self, queues: list[str], max_runs: int, wait_ms: int) -> list[Task]:
        return []

    def renew(self, leases: list[tuple[str, int]]) -> list:
        return []

    def complete(self, finished: Finished) -> None:
        self.completions.append((finished.succeeded, finished.result, finished.error, finished.log_uri))


def _held(text: bytes = b"hello\n") -> _Held:
    task = Task("L1", 42, "R1", "J1", 2, "shell", b"", 0, 0, 0)
    ctx = TaskContext()
    ctx.log.write(text)
    return _Held(task, ctx, 30.0)


def _executor(store: MemoryOutputStore, retry_s: float) -> tuple[Executor, FakeApi]:
    api = FakeApi()
    ex = Executor(api, ["q"], output=store, output_retry_s=retry_s)  # type: ignore[arg-type]
    return ex, api


def test_store_failures_are_retried_then_the_output_lands() -> None:
    store = MemoryOutputStore(failures=2)
    ex, api = _executor(store, 30.0)
    held = _held()
    ex._finish(held, True, b"res", "")
    assert store.puts == 3
    assert api.completions == [(True, b"res", "", "mem://J1/R1/attempt-2-token-42.log")]
    assert store.get(api.completions[0][3]) == (b"hello\n", b"res")
    assert held.ctx.log._file.closed  # the spool is freed


def test_an_attempt_with_no_output_stores_nothing_and_reads_back_empty() -> None:
    store = MemoryOutputStore(failures=10_000)  # never asked: a call would fail
    ex, api = _executor(store, 30.0)
    ex._finish(_held(b""), True, b"", "")
    assert store.puts == 0
    assert api.completions == [(True, b"", "", EMPTY_OUTPUT_URI)]
    assert OutputReader().read(EMPTY_OUTPUT_URI) == (b"", b"")
    working = MemoryOutputStore()
    ex.output = working
    ex._finish(_held(b""), True, b"r", "")  # a result alone is stored
    assert working.puts == 1 and working.get(api.completions[1][3]) == (b"", b"r")


def test_a_store_down_past_the_budget_completes_with_output_missing() -> None:
    store = MemoryOutputStore(failures=10_000)
    ex, api = _executor(store, 1.5)
    started = time.monotonic()
    ex._finish(_held(), True, b"res", "")
    assert 1.4 <= time.monotonic() - started < 4
    assert store.puts >= 2
    ((ok, result, error, uri),) = api.completions
    assert ok and result == b"res" and uri == ""
    assert error.startswith("output missing: storing the log at mem://J1/R1/attempt-2-token-42.log failed")
    assert "the fake store is down" in error


def test_a_permanent_store_failure_is_not_retried_and_keeps_the_handler_error() -> None:
    store = MemoryOutputStore(failures=10_000, retryable=False)
    ex, api = _executor(store, 60.0)
    ex._finish(_held(), False, b"", "command exited with code 3")
    assert store.puts == 1
    ((ok, _, error, uri),) = api.completions
    assert not ok and uri == ""
    assert error.startswith("command exited with code 3; output missing:") and "not retryable" in error


def test_stopping_cuts_the_retries_short() -> None:
    store = MemoryOutputStore(failures=10_000)
    ex, api = _executor(store, 60.0)
    threading.Timer(0.3, ex._stopping.set).start()
    started = time.monotonic()
    ex._finish(_held(), True, b"", "")
    assert time.monotonic() - started < 3
    assert api.completions and api.completions[0][3] == "" and "output missing" in api.completions[0][2]


def test_a_spool_that_cannot_be_created_keeps_the_head_and_says_what_was_lost(tmp_path: Path) -> None:
    log = BoundedLog(8 * 1024 * 1024, spool_dir=str(tmp_path / "missing-dir"))
    log.write(b"a" * 1000)
    log.write(b"b" * (1024 * 1024))  # past the in-memory part: the temp file cannot be made
    log.write(b"c" * 10)
    value = log.getvalue()
    assert value.startswith(b"a" * 1000)
    assert value.endswith(
        f"[the last {1024 * 1024 + 10} bytes of log were lost: spooling failed: No such file or directory] ...\n".encode()
    )
    assert log.size == len(value)
