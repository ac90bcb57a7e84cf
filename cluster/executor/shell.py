"""The ``shell`` job type: ``/bin/sh -c <command>`` in a clean environment, stopped as a whole.

**Environment.** A run never sees the executor's own environment (its AWS
keys, tokens, ...). It gets only: ``PATH``, ``HOME``, ``LANG`` and ``TZ``
(from the executor's environment, when set there), the names the operator
passes with ``--pass-env NAME``, the job's own ``env``, and
``RAFTSCHED_RUN_ID``, ``RAFTSCHED_JOB_ID``, ``RAFTSCHED_ATTEMPT`` and
``RAFTSCHED_FENCING_TOKEN`` (these last, so no job can fake them).

**Stopping, and no process outliving the executor.** Each run has its own
tiny supervisor process (``raftsched.cluster.executor.run_supervisor``: a fresh
``python -I -S``, stdlib only, in its own session), started in the
containment ``raftsched.cluster.executor.containment`` found (a PID namespace per run
where the executor may make one; else the session alone). The supervisor
starts the command; its stdin is a pipe whose write end only the executor
holds (close-on-exec, so no other child inherits it), which first carries
what to run and then stays open for the run's life. On a timeout, a cancel
or a lost lease the executor writes a stop byte; the supervisor sends
SIGTERM to every process of the run and SIGKILL to what is left after
``kill_grace_s`` (``--kill-grace``, default 5 s). **When the executor dies
— SIGKILL and OOM kill included — the kernel closes the pipe**, the
supervisor reads end-of-file and stops the run the same way. When the
command exits by itself, whatever it left running is stopped before the run
completes. When the supervisor itself dies by a signal, its PID namespace
dies with it (the kernel kills every process in it); without a namespace
the executor kills every process left in its session
(``containment.kill_session``).

Why this design: ``PR_SET_PDEATHSIG`` on the command alone would kill only
its first process (the signal is not inherited by grandchildren), and setting
it needs ``preexec_fn``, unsafe in the executor's threaded process. A
per-run PID namespace holds every process of the run whatever it does and
costs about 2 ms per run (``unshare``); cgroups would too, but need a
delegated cgroup v2 tree that an executor started by hand does not have.
The pipe watched by a per-run supervisor needs nothing but a fork and works
for every way the executor can end; it costs one small process per running
shell job (10-25 ms of start-up here, next to under 1 ms for a bare
``/bin/sh``).

**Another user.** With ``run_as`` (``--run-as USER``, root only) the
command runs as that user, ``HOME`` set to the user's home (unless the job
sets it), in the job's ``cwd`` or else that home; the supervisor stays root.
"""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Mapping

from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.payloads import parse_shell_payload
from raftsched.cluster.executor import run_supervisor
from raftsched.cluster.executor.bounded_log import BoundedLog
from raftsched.cluster.executor.containment import SESSION, Containment, RunAs, kill_session, resolve
from raftsched.cluster.executor.ports import HandlerError, Task, TaskContext

#: taken from the executor's environment when set there
BASE_ENV = ("PATH", "HOME", "LANG", "TZ")
DEFAULT_KILL_GRACE_S = 5.0
SUPERVISOR = run_supervisor.__file__
#: how often the waiting worker checks the deadline and the cancel flag
TICK_S = 0.02


@dataclass(frozen=True)
class ShellSettings:
    #: names of the executor's environment variables every run gets as well (``--pass-env``)
    pass_env: tuple[str, ...] = ()
    #: seconds between SIGTERM and SIGKILL when a run is stopped (``--kill-grace``)
    kill_grace_s: float = DEFAULT_KILL_GRACE_S
    #: what each run is started in (None: the best this process can have, ``containment.detect()``)
    containment: Containment | None = None
    #: the user commands run as (``--run-as``; None: the executor's own)
    run_as: RunAs | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.kill_grace_s <= 3600:
            raise ValueError(f"kill grace {self.kill_grace_s} s is out of range: give 0 to 3600 seconds")
        for name in self.pass_env:
            if not name or "=" in name or "\x00" in name:
                raise ValueError(f"--pass-env {name!r} is not an environment variable name")


def run_environment(
    task: Task, job_env: Mapping[str, str], settings: ShellSettings, environ: Mapping[str, str]
) -> dict[str, str]:
    """The whole environment of a run: nothing of ``environ`` but the base names and ``pass_env``."""
    env = {name: environ[name] for name in (*BASE_ENV, *settings.pass_env) if name in environ}
    env.update(job_env)
    env.update(
        {
            "RAFTSCHED_RUN_ID": task.run_id,
            "RAFTSCHED_JOB_ID": task.job_id,
            "RAFTSCHED_ATTEMPT": str(task.attempt),
            "RAFTSCHED_FENCING_TOKEN": str(task.fencing_token),
        }
    )
    return env


class ShellHandler:
    """``{"command": "...", "env": {...}, "cwd": "..."}`` run with /bin/sh -c; exit code 0 is success."""

    def __init__(self, settings: ShellSettings = ShellSettings(), environ: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self._environ = os.environ if environ is None else environ
        self.containment = settings.containment or resolve()

    def __call__(self, task: Task, ctx: TaskContext) -> bytes:
        try:
            payload = parse_shell_payload(task.payload, strict=False)
        except ValidationError as exc:
            raise HandlerError(str(exc)) from exc
        if payload.cwd and not os.path.isdir(payload.cwd):
            raise HandlerError(f"cwd {payload.cwd!r} is not a directory on this executor")
        env = run_environment(task, payload.env, self.settings, self._environ)
        user = self.settings.run_as
        if user is not None and "HOME" not in payload.env:
            env["HOME"] = user.home  # not the executor's
        spec = {
            "argv": ["/bin/sh", "-c", payload.command],
            "env": env,
            "cwd": payload.cwd,
            "grace": self.settings.kill_grace_s,
            "user": None if user is None else [user.name, user.uid, user.gid, user.home],
        }
        proc = _start_supervisor(spec, self.containment.prefix)
        pump = threading.Thread(target=_pump, args=(proc.stdout, ctx.log), name=f"log-{task.run_id}", daemon=True)
        pump.start()
        stopped = self._wait(proc, task, ctx)
        died = self._supervisor_died(proc)
        pump.join(timeout=5)  # a process that escaped the run may still hold the pipe: do not wait for it
        if stopped:
            raise HandlerError(stopped)
        if died:
            raise HandlerError(died)
        if proc.returncode != 0:
            raise HandlerError(f"command exited with code {proc.returncode}")
        return json.dumps({"exit_code": 0}).encode()

    def _supervisor_died(self, proc: subprocess.Popen[bytes]) -> str:
        """Why the run failed if its supervisor was killed by a signal ("" if it exited): without a
        namespace, whatever is left in its session is killed here (a namespace died with it)."""
        if proc.returncode is None or proc.returncode >= 0:
            return ""
        why = f"the run's supervisor was killed by signal {-proc.returncode}"
        if self.containment.kind == SESSION:
            left = kill_session(proc.pid)
            if left:
                why += f"; {left} processes left in its session were killed"
        return why

    def _wait(self, proc: subprocess.Popen[bytes], task: Task, ctx: TaskContext) -> str:
        """Wait for the run to end; stop it on timeout or cancel. Returns why it was stopped ("" if not)."""
        stopped = ""
        while True:
            try:
                proc.wait(TICK_S)
                break
            except subprocess.TimeoutExpired:
                pass
            left = ctx.time_left()
            if left is not None and left <= 0:
                stopped = f"timed out after {task.timeout_ms} ms"
            elif ctx.cancelled.is_set():
                stopped = ctx.reason or "cancelled"
            if stopped:
                self._stop(proc)
                break
        _close(proc)
        return stopped

    def _stop(self, proc: subprocess.Popen[bytes]) -> None:
        """Ask the supervisor to stop the run (SIGTERM, SIGKILL after the grace) and wait for it."""
        try:
            assert proc.stdin is not None
            proc.stdin.write(b"stop\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it is already on its way out
        try:
            proc.wait(self.settings.kill_grace_s + 5.0)
        except subprocess.TimeoutExpired:  # a wedged supervisor: end it (closing its pipe stops the run too)
            proc.kill()
            proc.wait()


def _start_supervisor(spec: dict[str, object], prefix: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    """The run's supervisor, started after ``prefix`` (the containment's ``unshare ...``), told ``spec``."""
    try:
        proc = subprocess.Popen(
            [*prefix, sys.executable, "-I", "-S", SUPERVISOR],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={},  # the supervisor needs none; the command gets spec["env"]
            start_new_session=True,  # a terminal's signals to the executor's group are the executor's
        )
    except OSError as exc:
        raise HandlerError(f"cannot start the run's supervisor ({sys.executable}): {exc}") from exc
    assert proc.stdin is not None
    data = marshal.dumps(spec)  # read back by the same interpreter (sys.executable)
    try:
        proc.stdin.write(len(data).to_bytes(8, "big") + data)
        proc.stdin.flush()
    except (BrokenPipeError, OSError) as exc:
        proc.wait()
        raise HandlerError(f"the run's supervisor exited at once (code {proc.returncode}): {exc}") from exc
    return proc


def _close(proc: subprocess.Popen[bytes]) -> None:
    """After the supervisor exited: close our end of its control pipe."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass


def _pump(stream: object, log: BoundedLog) -> None:
    for chunk in iter(lambda: stream.read1(65536), b""):  # type: ignore[attr-defined]
        log.write(chunk)
