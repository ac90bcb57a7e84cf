"""A small tmpfs mounted over a directory, for tests of a disk that fills up: it needs root (as CI runs).

``mounted(path, size)`` mounts a fresh tmpfs of ``size`` bytes at ``path`` (``0700``, as a node's data dir
must be), and always unmounts it (lazily, so a process still holding a file cannot keep it mounted). ``fill``
writes a filler file until the filesystem has at most ``leave`` bytes free; ``grow`` remounts it bigger.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from typing import Iterator

import pytest

FILLER = "filler.bin"


def why_not() -> str | None:
    """Why a tmpfs cannot be mounted here (None: it can)."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    return None


def mount(path: str, size: int) -> None:
    """Mount a fresh tmpfs of ``size`` bytes at ``path`` (created if missing), ``0700``."""
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", path], check=True, timeout=30)


def unmount(path: str) -> None:
    subprocess.run(["umount", "-l", path], check=False, timeout=30)


@contextlib.contextmanager
def mounted(path: str, size: int) -> Iterator[str]:
    missing = why_not()
    if missing:
        pytest.skip(f"the full-disk test cannot run here: {missing}")
    mount(path, size)
    try:
        yield path
    finally:
        unmount(path)


def grow(path: str, size: int) -> None:
    """Remount the tmpfs at ``path`` with ``size`` bytes (what it holds stays)."""
    subprocess.run(["mount", "-o", f"remount,size={size}", path], check=True, timeout=30)


def free(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(path: str, leave: int = 0, name: str = FILLER) -> str:
    """Write ``path/name`` until at most ``leave`` bytes are free on its filesystem; the filler's path."""
    filler = os.path.join(path, name)
    chunk = b"\xff" * (1 << 16)
    with open(filler, "ab") as f:
        while free(path) > leave:
            want = min(len(chunk), max(free(path) - leave, 1))
            try:
                f.write(chunk[:want])
                f.flush()
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    return filler
