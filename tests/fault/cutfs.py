"""A FUSE filesystem that can lose power: what was not fsynced is gone after the cut.

Run as ``python -m tests.fault.cutfs LIVE STORE MOUNTPOINT``. It serves the
files of ``LIVE`` at ``MOUNTPOINT`` (a passthrough: the running processes see
every write at once, as from the page cache) and keeps, beside them, what a
disk would hold after a power loss, by the strictest POSIX reading:

* a file's content is durable as of its last ``fsync``/``fdatasync`` (the
  pages written since are tracked and copied into ``STORE/<file id>``);
* a name (create, rename, link, unlink, mkdir, rmdir) is durable once its
  directory is fsynced; a file whose name is durable but whose content was
  never synced is empty.

When it is unmounted (``fusermount3 -u -z MOUNTPOINT``) it cuts the power:
``LIVE`` is rewritten to hold exactly the durable image, and the process
exits. Mounted again on that ``LIVE``, everything in it starts durable. One
thread serves every request, so the model needs no locks.

Needs the Debian package ``fuse3`` (``fusermount3``, ``libfuse3.so.3``),
``/dev/fuse`` and the PyPI package ``mfusepy``.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import sys
from typing import Any

import mfusepy as fuse

PAGE = 4096


class CutFS(fuse.Operations):  # type: ignore[misc]
    use_ns = True

    def __init__(self, live: str, store: str) -> None:
        self.live, self.store = os.path.abspath(live), os.path.abspath(store)
        os.makedirs(self.store, exist_ok=True)
        self.next_id = 0
        self.ids: dict[str, int] = {}  # live file path -> file id
        self.durable: dict[str, int] = {}  # durable file path -> file id
        self.durable_dirs = {"/"}
        self.dirty: dict[int, set[int]] = {}  # file id -> pages written since its last sync
        self.fds: dict[int, int] = {}  # open file handle -> file id
        self._adopt_existing()

    # ---------------------------------------------------------- the model

    def _adopt_existing(self) -> None:
        """What LIVE holds at mount time is on disk: all of it starts durable."""
        for root, dirs, files in os.walk(self.live):
            rel = "/" + os.path.relpath(root, self.live).lstrip(".")
            rel = "/" if rel in ("/", "//") else rel.rstrip("/")
            for d in dirs:
                self.durable_dirs.add(os.path.join(rel, d))
            for f in files:
                path = os.path.join(rel, f)
                file_id = self._new_id(path)
                shutil.copyfile(os.path.join(root, f), self._stored(file_id))
                self.durable[path] = file_id

    def _new_id(self, path: str) -> int:
        self.next_id += 1
        self.ids[path] = self.next_id
        return self.next_id

    def _stored(self, file_id: int) -> str:
        return os.path.join(self.store, str(file_id))

    def _real(self, path: str) -> str:
        return os.path.join(self.live, path.lstrip("/"))

    def _touch(self, fh: int, start: int, end: int) -> None:
        file_id = self.fds.get(fh)
        if file_id is not None and end > start:
            self.dirty.setdefault(file_id, set()).update(range(start // PAGE, (end - 1) // PAGE + 1))

    def _sync_file(self, fh: int) -> None:
        file_id = self.fds[fh]
        src = os.open(f"/proc/self/fd/{fh}", os.O_RDONLY)  # the handle may be write-only (LMDB's O_DSYNC one)
        out = os.open(self._stored(file_id), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            size = os.fstat(src).st_size
            for page in sorted(self.dirty.pop(file_id, set())):
                start = page * PAGE
                if start < size:
                    os.pwrite(out, os.pread(src, min(PAGE, size - start), start), start)
            os.ftruncate(out, size)
        finally:
            os.close(out)
            os.close(src)

    def _sync_dir(self, path: str) -> None:
        """The names in ``path`` become durable as they are now (its subdirectories' own names do not)."""
        path = path.rstrip("/") or "/"
        children = {os.path.join(path, name) for name in os.listdir(self._real(path))}
        for name in [p for p in self.durable if os.path.dirname(p) == path and p not in children]:
            del self.durable[name]
        for name in [d for d in self.durable_dirs if d != "/" and os.path.dirname(d) == path and d not in children]:
            self.durable_dirs.discard(name)
        for name in children:
            if os.path.isdir(self._real(name)):
                self.durable_dirs.add(name)
            elif name in self.ids:
                self.durable[name] = self.ids[name]

    def cut(self) -> None:
        """The power goes: LIVE becomes exactly the durable image."""
        for name in os.listdir(self.live):
            p = os.path.join(self.live, name)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
        for d in sorted(self.durable_dirs, key=len):
            if d != "/" and os.path.dirname(d) in self.durable_dirs:
                os.mkdir(self._real(d), 0o700)
        for path, file_id in self.durable.items():
            if os.path.dirname(path) in self.durable_dirs:
                if os.path.exists(self._stored(file_id)):
                    shutil.copyfile(self._stored(file_id), self._real(path))
                else:
                    open(self._real(path), "wb").close()
                os.chmod(self._real(path), 0o600)

    # ---------------------------------------------------------- FUSE operations

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        try:
            st = os.lstat(self._real(path))
        except OSError as exc:
            raise fuse.FuseOSError(exc.errno) from None
        keys = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_atime_ns", "st_mtime_ns", "st_ctime_ns")
        attrs = {k.replace("_ns", ""): getattr(st, k) for k in keys}
        attrs["st_blocks"] = st.st_blocks
        return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._real(path))]

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._real(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")
        return {k: getattr(sv, k) for k in keys}

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._real(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._real(path))
        return 0

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        fh = os.open(self._real(path), os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)
        self.fds[fh] = self.ids.get(path) or self._new_id(path)
        self._touch(fh, 0, PAGE)  # its (empty) size is not durable yet either
        return fh

    def open(self, path: str, flags: int) -> int:
        fh = os.open(self._real(path), flags & ~os.O_CREAT)
        self.fds[fh] = self.ids.get(path) or self._new_id(path)
        if flags & os.O_TRUNC:
            self._touch(fh, 0, PAGE)
        return fh

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        n = os.pwrite(fh, data, offset)
        self._touch(fh, offset, offset + n)
        return n

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if fh is not None:
            os.ftruncate(fh, length)
            self._touch(fh, 0, PAGE)
        else:
            os.truncate(self._real(path), length)
            file_id = self.ids.get(path)
            if file_id is not None:
                self.dirty.setdefault(file_id, set()).add(0)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        self.fds.pop(fh, None)
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        self._sync_file(fh)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        self._sync_dir(path)
        return 0

    def unlink(self, path: str) -> int:
        os.unlink(self._real(path))
        self.ids.pop(path, None)
        return 0

    def rename(self, old: str, new: str) -> int:
        os.rename(self._real(old), self._real(new))
        for path in [p for p in self.ids if p == old or p.startswith(old + "/")]:
            self.ids[new + path[len(old) :]] = self.ids.pop(path)
        return 0

    def link(self, target: str, source: str) -> int:
        os.link(self._real(source), self._real(target))
        self.ids[target] = self.ids[source]
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._real(path), stat.S_IMODE(mode))
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._real(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        if times is None:
            os.utime(self._real(path))
        else:
            os.utime(self._real(path), ns=times)
        return 0

    def access(self, path: str, amode: int) -> int:
        if not os.path.lexists(self._real(path)):
            raise fuse.FuseOSError(errno.ENOENT)
        return 0


def main(argv: list[str]) -> int:
    live, store, mountpoint = argv
    fs = CutFS(live, store)
    fuse.FUSE(fs, mountpoint, foreground=True, nothreads=True)
    fs.cut()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
