"""SIGTERM reaches a long-running command even when the kernel hands it to another thread."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.unit

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent(
    """
    import signal, sys, threading, time
    from cluster.app.stop_signal import StopSignal

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


def _run(mode: str, timeout: float) -> tuple[bool, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, mode], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
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
