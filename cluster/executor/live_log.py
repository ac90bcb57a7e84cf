"""Live output: ship each running attempt's new log bytes to the output store as it goes.

One ``LiveShipper`` per executor, with one thread. The executor tells it
when a run starts (``watch``) and when its handler has ended (``finish``:
no part is shipped after it returns, so the final ``put`` and the removal of
the parts come after every part). Every ``tick_s`` the thread looks at each
watched run and ships what is new:

* **only when there is new output**: a run that writes nothing costs no
  store call at all (an attempt with no output still stores nothing and
  completes with ``data:,``); watching it is one dict entry, and its
  shipping state is made when its first byte is seen;
* **at most one ship per ``interval_s`` per run** (default 1 s: a line
  shows within about a second of being written, plus the reader's poll); a
  burst goes out in parts of at most ``part_bytes``;
* **bounded**: only the log's head — the first half of the log limit, the
  part every stored log keeps whole — is shipped live, so the live bytes are
  always the beginning of the log stored at the end and the live total never
  exceeds half the limit. When the head is full, one ``.held`` note says
  the rest comes when the attempt ends (``raftsched.cluster.domain.live_output``);
* **never in the way**: a failing store is retried with backoff (up to
  ``max_backoff_s``) and logged once per run; it never fails or slows the
  run, its renewals or its completion.

One thread ships for every run, one after another: with a slow store and
many chatty runs a round takes longer, and each run's output shows later.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from raftsched.cluster.domain.output import OutputKey
from raftsched.cluster.executor.bounded_log import BoundedLog
from raftsched.cluster.executor.ports import LiveOutputStore, Task

log = logging.getLogger("raftsched.executor")

#: how long ``finish`` waits for a part on its way before it lets it land late (it is then a leftover
#: that the janitor or a lifecycle rule removes)
FINISH_WAIT_S = 5.0


@dataclass(frozen=True)
class LiveSettings:
    """How live output is shipped (``--live-interval``; 0 turns it off)."""

    interval_s: float = 1.0
    tick_s: float = 0.2
    part_bytes: int = 4 * 1024 * 1024
    max_backoff_s: float = 30.0

    def __post_init__(self) -> None:
        if self.interval_s < 0 or self.tick_s <= 0 or self.part_bytes < 1 or self.max_backoff_s < self.interval_s:
            raise ValueError(f"live output settings out of range: {self}")

    @property
    def enabled(self) -> bool:
        return self.interval_s > 0


class LiveLog:
    """One attempt's shipping: how much of its head is shipped, the parts named so far, when it may ship next."""

    __slots__ = ("key", "log", "shipped", "parts", "next_at", "failures", "held", "closed", "_lock")

    def __init__(self, key: OutputKey, log: BoundedLog) -> None:
        self.key = key
        self.log = log
        self.shipped = 0
        #: every part a ship was tried for, (offset, held): what the end removes (a failed put may have landed)
        self.parts: list[tuple[int, bool]] = []
        self.next_at = 0.0
        self.failures = 0
        self.held = False
        self.closed = threading.Event()
        self._lock = threading.Lock()

    def has_news(self) -> bool:
        written = self.log.written
        return min(written, self.log.head_cap) > self.shipped or (written > self.log.head_cap and not self.held)

    def ship(self, store: LiveOutputStore, settings: LiveSettings, now: float) -> int:
        """Ship what is new, if its time has come; return the bytes shipped (a failure backs off, never raises)."""
        with self._lock:
            if self.closed.is_set() or now < self.next_at or not self.has_news():
                return 0
            before = self.shipped
            try:
                self._ship(store, settings)
            except Exception as exc:  # noqa: BLE001 - live output is best effort: never the run's problem
                self.failures += 1
                wait = min(settings.max_backoff_s, settings.interval_s * 2**self.failures)
                self.next_at = now + wait
                if self.failures == 1:
                    log.warning(
                        "run %s: live log not shipped (%s); trying again, the whole log is stored at the end",
                        self.key.run_id,
                        exc,
                    )
                return self.shipped - before
            self.failures, self.next_at = 0, now + settings.interval_s
            return self.shipped - before

    def _ship(self, store: LiveOutputStore, settings: LiveSettings) -> None:
        head = self.log.head_cap
        while self.shipped < min(self.log.written, head) and not self.closed.is_set():
            data = self.log.read_head(self.shipped, settings.part_bytes)
            if not data:
                break
            self._name(self.shipped, False)
            store.put_part(self.key, self.shipped, data)
            self.shipped += len(data)
        if self.log.written > head and self.shipped >= head and not self.held and not self.closed.is_set():
            self._name(head, True)
            store.put_part(self.key, head, held_note(self.log, self.key.attempt).encode(), held=True)
            self.held = True

    def _name(self, offset: int, held: bool) -> None:
        if (offset, held) not in self.parts[-2:]:
            self.parts.append((offset, held))

    def close(self, wait_s: float = FINISH_WAIT_S) -> list[tuple[int, bool]]:
        """No more ships; wait (up to ``wait_s``) for one on its way; the parts tried so far."""
        self.closed.set()
        if self._lock.acquire(timeout=wait_s):
            self._lock.release()
        else:
            log.warning(
                "run %s: a live log part is still on its way after %.0f s; it may be left behind", self.key.run_id, wait_s
            )
        return list(self.parts)


def held_note(log: BoundedLog, attempt: int) -> str:
    return (
        f"live output stops after the first {log.head_cap} bytes (half of this executor's {log.limit}-byte log limit); "
        f"the whole log (its head and its latest {log.limit - log.head_cap} bytes) is stored when attempt {attempt} ends"
    )


class LiveShipper:
    """Ships live output for every watched run from one thread (``start``/``stop``), or by ``tick()`` (tests)."""

    def __init__(
        self, store: LiveOutputStore, settings: LiveSettings = LiveSettings(), clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store
        self.settings = settings
        self._clock = clock
        self._runs: dict[str, tuple[Task, BoundedLog]] = {}  # by lease id: every run going
        self._lives: dict[str, LiveLog] = {}  # by lease id: those that wrote something
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, task: Task, log: BoundedLog) -> None:
        """A run started: ship its log as it grows."""
        with self._lock:
            self._runs[task.lease_id] = (task, log)

    def finish(self, task: Task) -> list[tuple[int, bool]]:
        """The run's handler ended: ship nothing more of it; the parts shipped (to remove once its log is stored)."""
        with self._lock:
            self._runs.pop(task.lease_id, None)
            live = self._lives.pop(task.lease_id, None)
        return [] if live is None else live.close()

    def tick(self) -> int:
        """One round over the watched runs; the bytes shipped."""
        with self._lock:
            runs = [(lease_id, task, log) for lease_id, (task, log) in self._runs.items() if log.written]
            for lease_id, task, log in runs:
                if lease_id not in self._lives:
                    self._lives[lease_id] = LiveLog(OutputKey(task.job_id, task.run_id, task.attempt, task.fencing_token), log)
            lives = [self._lives[lease_id] for lease_id, _, _ in runs]
        shipped = 0
        for live in lives:
            if self._stop.is_set():
                break
            shipped += live.ship(self.store, self.settings, self._clock())
        return shipped

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="executor-live-log", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=FINISH_WAIT_S)

    def _loop(self) -> None:
        while not self._stop.wait(self.settings.tick_s):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the shipping thread must outlive any one failure
                log.exception("shipping live output failed")
