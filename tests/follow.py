"""``raftsched run logs --follow`` as a user runs it: a real CLI process whose output is read as it comes.

``Follow`` starts the CLI (stopped by pid at the end) and reads its stdout and
stderr in two threads, so a test can wait for a line with a timeout while the
run is still going (``wait_out``) and then take the whole output (``finish``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time


class Follow:
    def __init__(self, addresses: list[str], run_id: str, interval: float = 0.3) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "raftsched.cluster.app.main",
                "run",
                "logs",
                run_id,
                "--follow",
                "--interval",
                str(interval),
                "--cluster",
                ",".join(addresses),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.out = bytearray()
        self.err = bytearray()
        self._changed = threading.Condition()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._pump, args=(self.proc.stdout.fileno(), self.out), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr.fileno(), self.err), daemon=True),
        ]
        for t in self._readers:
            t.start()

    def _pump(self, fd: int, into: bytearray) -> None:
        while chunk := os.read(fd, 65536):
            with self._changed:
                into += chunk
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def _wait(self, into: bytearray, needle: bytes, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while needle not in into:
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not any(t.is_alive() for t in self._readers)):
                    raise AssertionError(
                        f"{needle!r} did not come within {timeout} s; stdout so far: {bytes(self.out)!r}, "
                        f"stderr: {bytes(self.err).decode(errors='replace')}"
                    )
                self._changed.wait(min(left, 0.1))

    def wait_out(self, needle: bytes, timeout: float) -> None:
        """Wait until stdout holds ``needle`` (AssertionError after ``timeout`` seconds, or if the CLI ended)."""
        self._wait(self.out, needle, timeout)

    def wait_err(self, needle: bytes, timeout: float) -> None:
        self._wait(self.err, needle, timeout)

    def finish(self, timeout: float) -> tuple[int, bytes, str]:
        """Wait for the CLI to exit: (exit status, stdout, stderr)."""
        code = self.proc.wait(timeout)
        for t in self._readers:
            t.join(5)
        return code, bytes(self.out), bytes(self.err).decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
