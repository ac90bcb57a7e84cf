"""SIGTERM reaches a long-running command even when the kernel hands it to another thread."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.unit

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent(
    """
    import signal, sys, threading, time
    from raftsched.cluster.app.stop_signal import StopSignal

    stop = StopSignal()
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()  # SIGTERM unblocked here
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # so the kernel must deliver it there
    print("ready", flush=True)
    if sys.argv[1] == "plain":
        stop._event.wait()  # what the commands did before: never woken
    else:
        stop.wait()
    print("stopped", flush=True)
    """
)


def _wait_until_main_thread_blocks(pid: int, timeout: float = 10.0) -> None:
    """Until the main thread sleeps in a futex (the event's wait): a signal sent while it still runs
    bytecode (between "ready" and the wait) would be handled there, and prove nothing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read()
        if state == "S" and "futex" in wchan:
            time.sleep(0.05)  # and still there a moment later
            with open(f"/proc/{pid}/wchan") as f:
                if "futex" in f.read():
                    return
        time.sleep(0.01)
    raise AssertionError(f"the main thread of {pid} never blocked in its wait")


def _run(mode: str, timeout: float) -> tuple[bool, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, mode], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        _wait_until_main_thread_blocks(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=timeout)
            return True, out
        except subprocess.TimeoutExpired:
            return False, ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_delivered_to_another_thread_still_stops_the_wait() -> None:
    stopped, out = _run("polling", 10)
    assert stopped and "stopped" in out


def test_a_plain_event_wait_would_miss_it() -> None:
    """The failure StopSignal exists for: proves the setup above really sends the signal elsewhere."""
    stopped, _ = _run("plain", 2)
    assert not stopped
