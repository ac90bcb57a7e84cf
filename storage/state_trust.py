"""Whether a node's state environment can be trusted after the node stopped, and the checks before opening it.

The state environment is written with ``sync=False`` (``raftsched.storage.lmdb_state``):
a commit hands its pages to the OS and returns. What that promises:

* The process dies (SIGKILL, OOM, a crash): nothing is lost and nothing is
  damaged. The OS keeps every page the process wrote; LMDB writes a commit's
  data pages before its meta page, so the newest meta page always names a
  whole tree.
* The OS stops (power loss, kernel panic, a VM reset): pages reach the disk
  in any order, so the file may be damaged. A new kernel boot has a new
  ``boot_id`` (``/proc/sys/kernel/random/boot_id``). So the node writes a
  ``<state>.open`` file with its boot id (fsynced) before its first write,
  and removes it after a clean close (``env.sync`` first). At the next open,
  an ``.open`` file of another boot says the OS stopped while the
  environment was being written: it is not trusted, it is moved away, and
  the node rebuilds its state from its snapshot file (fsynced, checksummed)
  and the Raft log after it (fsynced): nothing it acknowledged is lost.

Without a readable boot id the environment is written with ``sync=True,
metasync=False`` instead (LMDB keeps the file whole across a power loss and
may lose only the last commit), and is always trusted.

The checks before opening refuse, naming the file, what LMDB would crash on
(a truncated file: SIGBUS) or what is not ours.
"""

from __future__ import annotations

import os

from raftsched.storage.disk.durable_files import FILE_MODE, fsync_dir

BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
OPEN_SUFFIX = ".open"


def boot_id() -> str:
    """This kernel boot's id, or "" where there is none (not Linux)."""
    try:
        with open(BOOT_ID_FILE, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def untrusted_reason(path: str, current_boot: str) -> str:
    """Why the environment at ``path`` cannot be trusted (""): it was being written when the OS stopped."""
    marker = path + OPEN_SUFFIX
    if not current_boot or not os.path.exists(marker) or not os.path.exists(path):
        return ""
    try:
        with open(marker, encoding="ascii") as f:
            written_in = f.read().strip()
    except OSError as exc:
        return f"its marker {marker} is unreadable ({exc})"
    if written_in == current_boot:
        return ""  # the same boot: only the process stopped, and the OS kept every page it wrote
    return f"it was being written when the machine stopped (boot {written_in or '?'}, now {current_boot})"


def mark_open(path: str, current_boot: str) -> None:
    """Before the first write of this process: the environment at ``path`` is being written in this boot."""
    marker = path + OPEN_SUFFIX
    fd = os.open(marker + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.write(fd, current_boot.encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(marker + ".tmp", marker)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def mark_closed(path: str) -> None:
    """After a clean close (everything synced): the environment is whole whatever happens next."""
    marker = path + OPEN_SUFFIX
    if os.path.exists(marker):
        os.unlink(marker)
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def set_aside(path: str, why: str) -> str:
    """Move an untrusted environment (and its lock and marker files) away; the name it now has."""
    aside = f"{path}.untrusted"
    for suffix in ("", "-lock", OPEN_SUFFIX):
        if os.path.exists(path + suffix):
            os.replace(path + suffix, aside + suffix)
    with open(aside + ".why", "w", encoding="utf-8") as f:
        f.write(why + "\n")
    fsync_dir(os.path.dirname(os.path.abspath(path)))
    return aside
