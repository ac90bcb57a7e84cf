"""The per-run supervisor of a ``shell`` run: no process of a run outlives its executor.

Started by ``raftsched.cluster.executor.shell`` as ``python -I -S run_supervisor.py``
(a fresh interpreter, stdlib only, no site: it imports nothing of raftsched
and never runs in the executor's threaded process). Its protocol:

* stdin, first: the spec, ``{"argv": [...], "env": {...}, "cwd": "...",
  "grace": seconds, "user": [name, uid, gid, home] or None}`` in
  ``marshal`` form (the same interpreter writes and reads it; cheaper to
  load than ``json``, which costs this process more than its whole start)
  after its length as 8 big-endian bytes. The supervisor itself runs with an
  empty environment; only the run's process gets ``env``.
* stdin, afterwards: any byte asks it to stop the run; **end of file means
  the executor is gone** — the kernel closes the pipe's write end however
  the executor ended, SIGKILL included — and the run is stopped too.
* stdout/stderr are the run's log pipe: the run's process inherits them;
  the supervisor writes to them only when it cannot start the command.
* exit status: the command's exit code, or 128 + the signal that ended it.
* SIGTERM to the supervisor stops the run as a stop request does; it
  ignores SIGINT and SIGHUP (a terminal's signals are the executor's), and
  the command starts with default signal dispositions.

The supervisor is started in a session of its own (by the executor) and
starts the command in a process group of its own inside that session (so
the executor can find every process of the session if the supervisor dies:
``raftsched.cluster.executor.containment``). With ``user``, the command drops to that
user (``initgroups``, ``setgid``, ``setuid``) just before ``exec`` and
starts in ``cwd``, else in the user's home (``/`` if that cannot be
entered); the supervisor stays as it was, so the run cannot signal it.

Stopping the run sends SIGTERM to the command's group and to every other
process of the run, then SIGKILL to whatever is left after ``grace``
seconds. When the command exits by itself, whatever it left running is
stopped the same way before the supervisor exits: a finished run leaves no
process behind. Which processes are the run's:

* **as a PID namespace's init** (PID 1: the executor started it with
  ``unshare --pid --mount-proc``) — every process in the namespace; when
  the supervisor exits, the kernel kills whatever is left, and from inside
  it cannot be killed;
* **otherwise** — the command's group, and the supervisor's own children:
  it is a child subreaper (``PR_SET_CHILD_SUBREAPER``, best effort), so
  processes of the run orphaned by a dying parent — also those that left
  the group with ``setsid`` — are reparented to it; it reaps them, and
  kills those still running at the end. A run that kills the supervisor
  (same user, no namespace) leaves its session to the executor's sweep; a
  process that left the session with ``setsid`` escapes that.

Its own exit is bounded: about ``grace`` seconds after a stop request or
the executor's death.
"""

from __future__ import annotations

# the C module: ``signal`` would import ``enum``, a third of this process's start (no stubs: typed as Any)
import _signal as signal  # type: ignore[import-not-found]
import marshal
import os
import select
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.05


def _become_subreaper() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort: the process-group kill does not depend on it
        pass


def _start(spec: dict) -> int:
    """Fork and exec the command in a process group of its own; return its pid once it runs (or has
    failed to start).

    A close-on-exec pipe tells when the child is past ``setpgid``: from then on
    its pid is its process group's id, and the group can be signalled.
    """
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:  # the child: default signal dispositions, its own group, stdin from /dev/null, the user, the command
            os.close(ready_r)
            for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)  # Python ignores SIGPIPE, and we ignore SIGINT/SIGHUP
            os.setpgid(0, 0)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            _become(spec.get("user"), spec.get("cwd") or "")
            os.execve(spec["argv"][0], spec["argv"], spec["env"])
        except BaseException as exc:  # noqa: BLE001 - tell the run's log why, then leave
            os.write(2, f"raftsched: cannot start the command: {exc}\n".encode())
        os._exit(127)
    os.close(ready_w)
    while os.read(ready_r, 1):  # end of file: exec'd (or exited)
        pass
    os.close(ready_r)
    return pid


def _become(user: list | None, cwd: str) -> None:
    """In the child: drop to ``user`` (name, uid, gid, home) if given, then enter ``cwd`` (with a user and
    no ``cwd``: its home, else /). After the drop, so that the user's own permissions apply."""
    if user:
        name, uid, gid, home = user
        os.initgroups(name, gid)
        os.setgid(gid)
        os.setuid(uid)
        if not cwd:
            try:
                os.chdir(home)
            except OSError:
                os.chdir("/")
    if cwd:
        os.chdir(cwd)


def _scan(pgid: int, main: int) -> tuple[set[int], set[int], set[int]]:
    """From /proc: (living members of group ``pgid``, the run's other living processes, zombie children of
    ours but ``main``). The others: as a PID namespace's init, every process but us; else our children
    other than ``main`` — orphans of the run reparented to us (subreaper)."""
    me = os.getpid()
    init = me == 1
    members: set[int] = set()
    kids: set[int] = set()
    zombies: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # state, ppid, pgrp, ...
        if len(fields) < 3:
            continue
        pid, state, ppid, pgrp = int(name), fields[0], int(fields[1]), int(fields[2])
        if state == b"Z":
            if ppid == me and pid != main:
                zombies.add(pid)
            continue
        if pid == me:
            continue
        if pgrp == pgid:
            members.add(pid)
        elif ppid == me or init:
            kids.add(pid)
    return members, kids, zombies


def _kill_tree(main: int, grace: float) -> None:
    """SIGTERM to the run's group (its id is ``main``'s pid, held while ``main`` is unreaped, so it cannot
    be reused) and to its other processes (``_scan``); SIGKILL to what is left after ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 1.0)):
        signalled: set[int] = set()
        group_signalled = False
        deadline = time.monotonic() + wait
        while True:
            members, kids, zombies = _scan(main, main)
            for pid in zombies:
                os.waitpid(pid, os.WNOHANG)
            if not members and not kids:
                return
            if not group_signalled:
                _send(main, sig, group=True)
                group_signalled = True
            for pid in kids - signalled:  # processes outside the group (setsid, orphans), as they appear
                _send(pid, sig)
            signalled |= kids
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)


def _send(target: int, sig: int, group: bool = False) -> None:
    try:
        if group:
            os.killpg(target, sig)
        else:
            os.kill(target, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _exit_status(pid: int) -> int | None:
    """The command's exit code (128 + signal when a signal ended it) once it exited, without reaping it."""
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    if info is None or info.si_pid == 0:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else 128 + info.si_status


def _watch(pid: int, control: int, grace: float) -> int | None:
    """Wait for the command to exit or for word from the executor: the command's exit code, or None
    when the executor asked for a stop or went away (the run was stopped)."""
    poller = select.poll()
    poller.register(control, select.POLLIN | select.POLLHUP)
    timeout_ms: float | None = POLL_S * 1000
    try:
        pidfd = os.pidfd_open(pid)
        poller.register(pidfd, select.POLLIN)
        timeout_ms = None  # readable when the command exits: no polling
    except (AttributeError, OSError):
        pass
    signal.signal(signal.SIGTERM, _stopped)  # SIGTERM to the supervisor: stop the run, as a stop request does
    try:
        while True:
            for fd, _ in poller.poll(timeout_ms):
                if fd == control:
                    return None
            status = _exit_status(pid)
            if status is not None:
                return status
    except _Stop:
        return None
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


class _Stop(Exception):
    pass


def _stopped(signum: int, frame: object) -> None:
    raise _Stop


def _read_exactly(control: int, size: int) -> bytes:
    buf = b""
    while len(buf) < size:
        chunk = os.read(control, size - len(buf))
        if not chunk:
            raise SystemExit(125)  # the executor went away before it said what to run
        buf += chunk
    return buf


def _read_spec(control: int) -> dict:
    size = int.from_bytes(_read_exactly(control, 8), "big")
    spec = marshal.loads(_read_exactly(control, size))
    assert isinstance(spec, dict)
    return spec


def _stop_asked(control: int) -> bool:
    """Whether a stop request (or the executor's end) is already waiting on stdin."""
    poller = select.poll()
    poller.register(control, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(0))


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the executor's to handle
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    control = sys.stdin.fileno()
    spec = _read_spec(control)
    if _stop_asked(control):
        return 128 + signal.SIGTERM
    grace = float(spec.get("grace", 5.0))
    _become_subreaper()
    pid = _start(spec)
    code = _watch(pid, control, grace)
    _kill_tree(pid, grace)  # a stop, or whatever the command left running when it exited
    if code is None:
        code = _exit_status(pid)
    _reap_main(pid)
    return 128 + signal.SIGKILL if code is None else code


def _reap_main(pid: int) -> None:
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
        except ChildProcessError:
            return
        time.sleep(POLL_S)


if __name__ == "__main__":
    sys.exit(main())
