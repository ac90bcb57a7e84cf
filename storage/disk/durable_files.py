"""Files that survive a power loss, readable by their owner only.

Who calls: the journal, the snapshot writers, pysyncobj's rename of a
snapshot received from the leader (through ``raftsched.raft.pysyncobj_patches``) and
the node's composition root, on any thread. What it promises:

* ``make_private_dir``: every directory it creates is ``0700`` and is made
  durable in its parent (the parent is fsynced), so a power loss cannot take
  away a directory whose files were synced; an existing node directory is
  tightened to ``0700``.
* ``durable_replace``: the source is fsynced and made ``0600`` before it is
  renamed over the destination, and the directory is fsynced after: a power
  loss leaves the old file or the whole new one, never an empty or half one.
* ``fsync_dir``: a rename, a create or an unlink in that directory is on disk.
* ``free_old_later`` (``durable_replace`` and ``replace_freeing_later``):
  the file the destination named before is not freed by the caller but by a
  background thread. Freeing a file of gigabytes — an old snapshot, an old
  state environment — makes the filesystem read its block bitmaps and journal
  every freed extent: on a busy disk that took 1-4 s, measured in the rename
  that replaced a 3.5 GB snapshot, and the caller is pysyncobj's tick thread,
  whose followers elect another leader after a second without heartbeats.
  The old file is kept by a second name (``<name>.old-<ns>``, a hard link)
  until that thread removes it — cut down in steps first (``free_gradually``),
  so no single fsync on the disk carries the whole free; one a crash left
  behind is removed at the next start (``sweep_old``).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time

#: data directories: the owner only
DIR_MODE = 0o700
#: data files: the owner only
FILE_MODE = 0o600
#: a replaced file waiting to be removed in the background: ``<its name><OLD_MARK><ns>``
OLD_MARK = ".old-"

log = logging.getLogger("raftsched.raft")


def fsync_dir(path: str) -> None:
    fd = os.open(path or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_private_dir(path: str, tighten: bool = True) -> bool:
    """Create ``path`` (and missing parents) ``0700``, each made durable in its parent. True if it was created.

    ``tighten``: an existing ``path`` with looser permissions is set to ``0700``.
    """
    path = os.path.abspath(path)
    if os.path.isdir(path):
        if tighten and os.stat(path).st_mode & 0o077:
            os.chmod(path, DIR_MODE)
        return False
    parent = os.path.dirname(path)
    if parent != path and not os.path.isdir(parent):
        make_private_dir(parent, tighten=False)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        return False
    os.chmod(path, DIR_MODE)  # whatever the umask
    fsync_dir(parent)
    return True


def durable_replace(src: str, dst: str, free_old_later: bool = False) -> None:
    """``os.replace(src, dst)`` that a power loss cannot undo or leave half done (see the module docstring);
    with ``free_old_later``, the file ``dst`` named before is freed in the background."""
    fd = os.open(src, os.O_RDONLY)
    try:
        os.fchmod(fd, FILE_MODE)
        os.fsync(fd)
    finally:
        os.close(fd)
    if free_old_later:
        replace_freeing_later(src, dst)
        return
    os.replace(src, dst)
    fsync_dir(os.path.dirname(os.path.abspath(dst)))


def replace_freeing_later(src: str, dst: str) -> None:
    """``os.replace(src, dst)`` and a synced directory, without freeing the file ``dst`` named before here:
    it keeps a second name until a background thread removes it (see the module docstring)."""
    old = f"{dst}{OLD_MARK}{time.time_ns()}"
    try:
        os.link(dst, old)
    except FileNotFoundError:
        old = ""  # nothing to free
    except OSError as exc:  # a filesystem without hard links: free it here, as a plain rename does
        log.debug("cannot keep %s aside (%s): it is freed by the rename", dst, exc)
        old = ""
    os.replace(src, dst)
    fsync_dir(os.path.dirname(os.path.abspath(dst)))
    if old:
        remove_later(old)


def sweep_old(path: str) -> None:
    """Remove, in the background, what ``replace_freeing_later`` kept aside for ``path`` and a crash left."""
    folder, name = os.path.split(os.path.abspath(path))
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for entry in names:
        stamp = entry[len(name) + len(OLD_MARK) :]
        if entry.startswith(name + OLD_MARK) and stamp.isdigit():
            remove_later(os.path.join(folder, entry))


_doomed: queue.Queue[str] = queue.Queue()
_remover: threading.Thread | None = None
_remover_lock = threading.Lock()


def remove_later(path: str) -> None:
    """Unlink ``path`` on the background remover thread (started on first use)."""
    global _remover
    with _remover_lock:
        if _remover is None:
            _remover = threading.Thread(target=_remove_forever, name="old-file-remover", daemon=True)
            _remover.start()
    _doomed.put(path)


def removals_done(timeout: float = 30.0) -> bool:
    """Wait until every file handed to ``remove_later`` is gone (for tests). Whether they all are."""
    deadline = time.monotonic() + timeout
    while _doomed.unfinished_tasks and time.monotonic() < deadline:
        time.sleep(0.01)
    return not _doomed.unfinished_tasks


#: a replaced file is cut down this much at a time before it is unlinked, with this pause between cuts
FREE_STEP, FREE_PAUSE_S = 64 << 20, 0.05


def free_gradually(path: str, step: int = FREE_STEP, pause_s: float = FREE_PAUSE_S) -> None:
    """Unlink ``path``; a big file is first truncated ``step`` bytes at a time, ``pause_s`` apart.

    The filesystem journals what a free changes (block bitmaps, group descriptors) and every fsync on
    the disk commits the journal: a 3.5 GB file freed in one go put that whole change before the next
    Raft log fsync, which then took over a second (an election, measured in the 10M-job run, two
    seconds after two nodes freed their old dumps at once). In cuts, each fsync carries one small one
    (RocksDB's ``DeleteScheduler`` frees its files the same way). A file this process still has open
    (a snapshot transfer reading the old dump) is only unlinked: the reader keeps its data until it
    closes it."""
    st = os.stat(path)
    if st.st_size > step and st.st_nlink == 1 and not _open_here(st):
        fd = os.open(path, os.O_WRONLY)
        try:
            size = st.st_size
            while size > 0:
                size = max(0, size - step)
                os.ftruncate(fd, size)
                time.sleep(pause_s)
        finally:
            os.close(fd)
    os.unlink(path)


def _open_here(st: os.stat_result) -> bool:
    """Whether a descriptor of this process refers to the file ``st`` describes."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return True  # cannot tell: do not cut it
    for fd in fds:
        try:
            other = os.stat(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            return True
    return False


def _remove_forever() -> None:
    while True:
        path = _doomed.get()
        try:
            free_gradually(path)
        except FileNotFoundError:
            pass
        except OSError as exc:  # left for the next start's sweep
            log.warning("cannot remove the replaced file %s: %s", path, exc)
        finally:
            _doomed.task_done()
