"""The spooled run log (BoundedLog) and the executor's output-store retries (no network).

What every output store must do on its own (put, read back, keys, empty output,
streaming, check) is the contract suite, ``tests/contract/test_output_stores.py``.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest

from raftsched.cluster.executor.bounded_log import BoundedLog, LogSettings
from raftsched.cluster.executor.ports import TaskContext
from raftsched.storage import MemoryOutputStore
from tests.executor_fakes import executor, held

pytestmark = pytest.mark.unit


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


# ------------------------------------------------------------------ the executor's retries


def test_store_failures_are_retried_then_the_output_lands() -> None:
    store = MemoryOutputStore(failures=2)
    ex, api = executor(store, 30.0)
    lease = held()
    ex._finish(lease, True, b"res", "")
    assert store.puts == 3
    assert api.completions == [(True, b"res", "", "mem://J1/R1/attempt-2-token-42.log")]
    assert store.get(api.completions[0][3]) == (b"hello\n", b"res")
    assert lease.ctx.log._file.closed  # the spool is freed


def test_a_store_down_past_the_budget_completes_with_output_missing() -> None:
    store = MemoryOutputStore(failures=10_000)
    ex, api = executor(store, 1.5)
    started = time.monotonic()
    ex._finish(held(), True, b"res", "")
    assert 1.4 <= time.monotonic() - started < 4
    assert store.puts >= 2
    ((ok, result, error, uri),) = api.completions
    assert ok and result == b"res" and uri == ""
    assert error.startswith("output missing: storing the log at mem://J1/R1/attempt-2-token-42.log failed")
    assert "the fake store is down" in error


def test_a_permanent_store_failure_is_not_retried_and_keeps_the_handler_error() -> None:
    store = MemoryOutputStore(failures=10_000, retryable=False)
    ex, api = executor(store, 60.0)
    ex._finish(held(), False, b"", "command exited with code 3")
    assert store.puts == 1
    ((ok, _, error, uri),) = api.completions
    assert not ok and uri == ""
    assert error.startswith("command exited with code 3; output missing:") and "not retryable" in error


def test_stopping_cuts_the_retries_short() -> None:
    store = MemoryOutputStore(failures=10_000)
    ex, api = executor(store, 60.0)
    threading.Timer(0.3, ex._stopping.set).start()
    started = time.monotonic()
    ex._finish(held(), True, b"", "")
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
