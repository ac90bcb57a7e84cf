"""Files that survive a power loss, readable by their owner only.

Who calls: the journal, the snapshot writers, pysyncobj's rename of a
snapshot received from the leader (through ``raft.pysyncobj_patches``) and
the node's composition root, on any thread. What it promises:

* ``make_private_dir``: every directory it creates is ``0700`` and is made
  durable in its parent (the parent is fsynced), so a power loss cannot take
  away a directory whose files were synced; an existing node directory is
  tightened to ``0700``.
* ``durable_replace``: the source is fsynced and made ``0600`` before it is
  renamed over the destination, and the directory is fsynced after: a power
  loss leaves the old file or the whole new one, never an empty or half one.
* ``fsync_dir``: a rename, a create or an unlink in that directory is on disk.
"""

from __future__ import annotations

import os

#: data directories: the owner only
DIR_MODE = 0o700
#: data files: the owner only
FILE_MODE = 0o600


def fsync_dir(path: str) -> None:
    fd = os.open(path or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
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


def durable_replace(src: str, dst: str) -> None:
    """``os.replace(src, dst)`` that a power loss cannot undo or leave half done (see the module docstring)."""
    fd = os.open(src, os.O_RDONLY)
    try:
        os.fchmod(fd, FILE_MODE)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(src, dst)
    fsync_dir(os.path.dirname(os.path.abspath(dst)))
