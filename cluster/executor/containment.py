"""How a ``shell`` run is kept in: nothing of it outlives the run, and it cannot reach into its executor.

**Containment** — ``resolve(mode)``; the executor says at start which one it has (``describe()``):

* ``pid-namespace`` (the executor runs as root): each run's supervisor is
  started by ``unshare --pid --fork --kill-child --mount-proc`` as the init
  (PID 1) of a PID namespace of its own, with its own ``/proc``. Every
  process the run starts stays in that namespace whatever it does (double
  forks, ``setsid``, killing its parent). When the namespace's init dies the
  kernel kills every process in it, and from inside, init cannot be sent
  SIGKILL or SIGSTOP (``kill -9 $PPID`` does nothing); ``--kill-child``
  kills init when the ``unshare`` process outside dies. The run sees only
  its own processes: not the executor, its environment or its memory.
* ``user-pid-namespace`` (an unprivileged executor, where the kernel allows
  unprivileged user namespaces): the same inside a user namespace of the
  run's own (``--user --map-root-user``: "root" in there, the executor's
  uid outside).
* ``session`` (neither works: ``unshare`` missing, a container without
  CAP_SYS_ADMIN, user namespaces off, systemd's ``RestrictNamespaces=``, or
  ``--containment session``): the supervisor alone, in a session of its
  own, which starts the command in a process group of that session and is
  its child subreaper (``raftsched.cluster.executor.run_supervisor``). When the
  supervisor dies by a signal the executor kills every process left in its
  session (``kill_session``). **The gap:** a run of the executor's own user
  can kill its supervisor; a process that had left the session with
  ``setsid`` then survives, and the run can read ``/proc`` of every process
  of that user but the executor itself.

``detect()`` probes once per process by running ``unshare ... /bin/true``
(about 2 ms). A namespace changes what a job sees: ``ps``, ``kill`` and
``/proc`` show only the run's own processes (``--containment session``
keeps the host's view, with the gap above).

**The executor's own process** is made non-dumpable at start
(``make_undumpable``: ``prctl(PR_SET_DUMPABLE, 0)``): a process of the same
uid can then neither read its ``/proc/<pid>/environ`` or memory nor ptrace
it (only root can). Its children are dumpable again after ``execve``.

**Another user** (``--run-as USER``, ``run_as(name)``): the supervisor stays
root and the command drops to the user (``initgroups``, ``setgid``,
``setuid``) just before ``exec``; only an executor running as root can.
"""

from __future__ import annotations

import ctypes
import functools
import os
import pwd
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass

PID_NAMESPACE = "pid-namespace"
USER_PID_NAMESPACE = "user-pid-namespace"
SESSION = "session"
#: ``--containment``: auto (the best this process can have), or one required by name
MODES = ("auto", PID_NAMESPACE, SESSION)
_NAMESPACE_FLAGS = ("--pid", "--fork", "--kill-child", "--mount-proc")
_USER_FLAGS = ("--user", "--map-root-user")
PR_SET_DUMPABLE = 4
PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Containment:
    """What each run's supervisor is started in: ``prefix`` goes before its command line."""

    kind: str
    prefix: tuple[str, ...] = ()
    #: why no namespace (``session`` only)
    why: str = ""

    @property
    def namespaced(self) -> bool:
        return self.kind != SESSION

    def describe(self) -> str:
        """One line for the executor's start."""
        if self.kind == PID_NAMESPACE:
            return "shell runs are contained in a PID namespace each (unshare --pid --mount-proc, as root)"
        if self.kind == USER_PID_NAMESPACE:
            return "shell runs are contained in a user and PID namespace each (unshare --user --pid --mount-proc)"
        return (
            f"shell runs are contained by their supervisor's session only ({self.why}): a run that kills its "
            "supervisor can leave behind processes that left the session with setsid, and can read /proc of "
            "other processes of this user (not the executor's)"
        )


SESSION_ONLY = Containment(SESSION, why="--containment session")


def _probe(prefix: tuple[str, ...]) -> str:
    """ "" if ``prefix /bin/true`` runs, else why not."""
    try:
        done = subprocess.run(
            [*prefix, "/bin/true"], stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S, env={}
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return ""
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def namespace_prefix(unshare: str, privileged: bool) -> tuple[str, ...]:
    """The command line a run's supervisor is started after: a PID namespace (and, for an unprivileged
    executor, a user namespace) of its own, with its own /proc."""
    return (unshare, *_NAMESPACE_FLAGS) if privileged else (unshare, *_USER_FLAGS, *_NAMESPACE_FLAGS)


@functools.cache
def detect() -> Containment:
    """The best containment this process can give its runs (probed once)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return Containment(SESSION, why="unshare (util-linux) is not installed")
    if os.geteuid() == 0:
        prefix = namespace_prefix(unshare, privileged=True)
        why = _probe(prefix)
        return Containment(PID_NAMESPACE, prefix) if not why else Containment(SESSION, why=f"unshare refused: {why}")
    prefix = namespace_prefix(unshare, privileged=False)
    why = _probe(prefix)
    if not why:
        return Containment(USER_PID_NAMESPACE, prefix)
    return Containment(SESSION, why=f"not root, and no unprivileged user namespace: {why}")


def resolve(mode: str = "auto") -> Containment:
    """``--containment``: ``auto`` (``detect()``), ``pid-namespace`` (ValueError saying why it is not
    available) or ``session``."""
    if mode == SESSION:
        return SESSION_ONLY
    if mode not in MODES:
        raise ValueError(f"--containment {mode!r}: give one of {', '.join(MODES)}")
    found = detect()
    if mode == PID_NAMESPACE and not found.namespaced:
        raise ValueError(
            f"--containment pid-namespace: not available here ({found.why}); run the executor as root, allow "
            "user namespaces, or give --containment auto"
        )
    return found


@dataclass(frozen=True)
class RunAs:
    """The user shell commands run as (``--run-as``)."""

    name: str
    uid: int
    gid: int
    home: str


def run_as(name: str) -> RunAs:
    """The user ``name``; ValueError saying what to do when this process is not root or there is no such user."""
    if os.geteuid() != 0:
        raise ValueError(
            f"--run-as {name}: only an executor running as root can run commands as another user (this one runs "
            f"as uid {os.geteuid()}): start it as root, or start it as {name} without --run-as"
        )
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ValueError(f"--run-as {name}: there is no user {name!r} on this machine: create it, or name another") from None
    return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def make_undumpable() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)`` for this process; whether it took."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def session_members(sid: int) -> list[int]:
    """The living processes of session ``sid`` (from /proc)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # state, ppid, pgrp, session, ...
        if len(fields) >= 4 and fields[0] != b"Z" and int(fields[3]) == sid:
            found.append(int(name))
    return found


def kill_session(sid: int, within_s: float = 2.0) -> int:
    """SIGKILL every process of session ``sid`` until none is left (or ``within_s`` passed): what a
    supervisor that died by a signal left running. How many were killed. The session's id stays
    reserved while any process is in it, so it cannot name someone else's."""
    killed: set[int] = set()
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        members = session_members(sid)
        if not members:
            break
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)
    return len(killed)
