"""The benchmark's per-process readings: CPU seconds and the megabytes a process caused to be written to storage."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.harness.processes import cpu_s, written_mb

pytestmark = pytest.mark.unit


def test_the_megabytes_a_process_writes_are_counted_and_a_missing_process_reads_none(tmp_path: Path) -> None:
    before = written_mb(os.getpid())
    assert before is not None
    with open(tmp_path / "blob", "wb") as f:
        f.write(os.urandom(4 << 20))
        f.flush()
        os.fsync(f.fileno())
    after = written_mb(os.getpid())
    assert after is not None and after - before >= 4.0, (before, after)
    assert written_mb(None) is None and cpu_s(None) is None
    gone = 2**22 + 12345  # above the default pid_max: no such process
    assert written_mb(gone) is None and cpu_s(gone) is None
