"""The benchmark's readings of processes and of the disk: CPU seconds, and the megabytes a disk wrote."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bench.harness.processes import cpu_s, device_of, device_written_mb, user_sys_s

pytestmark = pytest.mark.unit


def test_the_megabytes_the_disk_under_a_folder_writes_are_counted(tmp_path: Path) -> None:
    device = device_of(str(tmp_path))
    if device is None:
        pytest.skip(f"{tmp_path} is on a file system without a block device (tmpfs, overlay)")
    before = device_written_mb(device)
    assert before is not None, f"{device} is not in /proc/diskstats"
    with open(tmp_path / "blob", "wb") as f:
        f.write(os.urandom(8 << 20))
        f.flush()
        os.fsync(f.fileno())
    after = device_written_mb(device)
    deadline = time.monotonic() + 5.0  # diskstats counts a request when it completes
    while after is not None and after - before < 8.0 and time.monotonic() < deadline:
        time.sleep(0.1)
        after = device_written_mb(device)
    assert after is not None and after - before >= 8.0, (device, before, after)


def test_a_folder_without_a_device_a_missing_path_and_a_missing_process_read_none(tmp_path: Path) -> None:
    assert device_of(str(tmp_path / "no-such-file")) is None
    assert device_written_mb(None) is None
    assert device_written_mb("no-such-device") is None
    assert device_of("/proc") is None  # procfs: no block device
    assert cpu_s(None) is None
    gone = 2**22 + 12345  # above the default pid_max: no such process
    assert cpu_s(gone) is None
    assert (cpu_s(os.getpid()) or 0.0) > 0.0


def test_a_process_time_in_the_kernel_is_read_apart_from_its_own(tmp_path: Path) -> None:
    """``user_sys_s`` splits what ``cpu_s`` sums: time spent writing a file (the kernel copying each MiB into the
    page cache) shows in the kernel's part."""
    assert user_sys_s(None) is None
    before = user_sys_s(os.getpid())
    assert before is not None
    block = b"x" * (1 << 20)
    fd = os.open(tmp_path / "blob", os.O_WRONLY | os.O_CREAT)
    try:
        began = time.process_time()
        while time.process_time() - began < 0.3:
            os.pwrite(fd, block, 0)
    finally:
        os.close(fd)
    after = user_sys_s(os.getpid())
    assert after is not None and after[1] > before[1] and after[0] >= before[0]
    total = cpu_s(os.getpid())
    assert total is not None and abs(total - sum(user_sys_s(os.getpid()) or (0.0, 0.0))) < 0.05
