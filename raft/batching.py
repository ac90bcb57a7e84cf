"""Group commit: many proposals from one node travel in one Raft entry.

Under load every write used to be its own Raft entry: its own journal
append, its own pickled and encrypted message (twice, when a follower
forwarded it to the leader), its own callback. ``GroupCommitter`` queues
proposals and, while at most ``max_inflight`` entries of this node are on
their way, packs what queued up meanwhile into the next one. An idle node
proposes a lone command at once, unwrapped; a busy one amortises the Raft
costs over the whole batch (the same idea as hashicorp/raft's ``ApplyBatch``
and etcd's batched proposals).

A batch stays under 192 KiB (unless one command alone is larger), below
pysyncobj's 256 KiB ``appendEntriesBatchSizeBytes``, above which it cuts an
entry into chunks.

The entry format is generic (the commands stay opaque bytes):
``MAGIC | u32 count | (u32 length | bytes) * count``. ``MAGIC`` starts with
a NUL byte, which no command encoding we use (JSON objects) can start with.
The adapter unpacks a batch and applies its commands in order, each with
the entry's index and its position in the entry, and answers the proposer
with the list of results.

Weights bound what one entry may hold in a domain unit the batcher does not
understand: ``max_weight`` is given at wiring (``RaftSettings.max_batch_weight``;
the node gives the fencing tokens one entry may hand out, and weighs each
``AcquireLeases`` by the runs it may grant); None bounds nothing.
"""

from __future__ import annotations

import struct
import threading
import time
from collections import deque
from typing import Any, Callable

from raftsched.raft.errors import RaftError

MAGIC = b"\x00RSB1"
_COUNT = struct.Struct(">I")

#: (result, fail_reason) -> None, as pysyncobj calls it
Callback = Callable[[Any, int], None]


class BatchFormatError(RaftError, ValueError):
    """The entry claims to be a batch but is cut short or malformed."""


def is_batch(data: bytes) -> bool:
    return data[:5] == MAGIC


def pack(commands: list[bytes]) -> bytes:
    parts = [MAGIC, _COUNT.pack(len(commands))]
    for cmd in commands:
        parts.append(_COUNT.pack(len(cmd)))
        parts.append(cmd)
    return b"".join(parts)


def unpack(data: bytes) -> list[bytes]:
    if not is_batch(data):
        raise BatchFormatError("not a batch entry")
    view = memoryview(data)
    pos = len(MAGIC)
    if len(data) < pos + 4:
        raise BatchFormatError("batch entry is cut short before its count")
    (count,) = _COUNT.unpack_from(data, pos)
    pos += 4
    out: list[bytes] = []
    for i in range(count):
        if len(data) < pos + 4:
            raise BatchFormatError(f"batch entry is cut short at command {i} of {count}")
        (size,) = _COUNT.unpack_from(data, pos)
        pos += 4
        if len(data) < pos + size:
            raise BatchFormatError(f"batch entry is cut short inside command {i} of {count}")
        out.append(bytes(view[pos : pos + size]))
        pos += size
    if pos != len(data):
        raise BatchFormatError(f"batch entry has {len(data) - pos} stray bytes after its {count} commands")
    return out


class Timeout(RaftError):
    """The proposal was not answered in time; ``proposed`` tells whether it ever left this node."""

    def __init__(self, proposed: bool) -> None:
        super().__init__("proposal timed out")
        self.proposed = proposed


class _Waiter:
    """What one ``submit_many`` call waits on: its event is set once every one of its proposals has its answer.
    One per call, not per proposal: a batch of completions wakes its caller once (each wake-up of a waiting thread
    is a system call on the thread that answers, the Raft tick thread)."""

    __slots__ = ("left", "event")

    def __init__(self, count: int) -> None:
        self.left = count
        self.event = threading.Event()


class _Item:
    __slots__ = ("data", "weight", "waiter", "result", "error", "proposed", "answered")

    def __init__(self, data: bytes, weight: int, waiter: _Waiter) -> None:
        self.data = data
        self.weight = weight
        self.waiter = waiter
        self.result: Any = None
        self.error = 0
        self.proposed = False
        self.answered = False


class GroupCommitter:
    """Queues proposals and sends them as batches, at most ``max_inflight`` entries at a time.

    ``propose_async(data, callback)`` is the Raft proposal primitive. A batch
    whose answer never comes (a forward lost with the leader) stops counting
    against ``max_inflight`` after ``stale_s``; its callers time out on their own.
    """

    def __init__(
        self,
        propose_async: Callable[[bytes, Callback], None],
        max_inflight: int = 4,
        max_commands: int = 256,
        max_bytes: int = 192 * 1024,
        max_weight: int | None = None,
        stale_s: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._propose_async = propose_async
        self._max_inflight = max_inflight
        self._max_commands = max_commands
        self._max_bytes = max_bytes
        self._max_weight = max_weight
        self._stale_s = stale_s
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._queue: deque[_Item] = deque()
        self._inflight: dict[int, float] = {}  # batch number -> when it was proposed
        self._next = 0
        #: counters for status and tests
        self.entries = 0
        self.commands = 0

    def submit(self, data: bytes, timeout: float, weight: int = 0) -> tuple[Any, int]:
        """Propose ``data``; ``(result, fail_reason)`` once this node applied it. Raises ``Timeout``."""
        answer = self.submit_many([(data, weight)], timeout)[0]
        if isinstance(answer, Timeout):
            raise answer
        return answer

    def submit_many(self, proposals: list[tuple[bytes, int]], timeout: float) -> list[tuple[Any, int] | Timeout]:
        """Propose several ``(data, weight)`` together (adjacent in the queue, so they share
        entries as far as the limits allow); an answer or a ``Timeout`` for each, in order."""
        waiter = _Waiter(len(proposals))
        items = [_Item(data, weight, waiter) for data, weight in proposals]
        with self._lock:
            self._queue.extend(items)
        self._flush()
        deadline = self._monotonic() + timeout
        while not waiter.event.wait(min(0.25, max(0.0, deadline - self._monotonic()))):
            if self._monotonic() >= deadline:
                break
            self._flush()  # a batch may have gone stale: do not leave the queue stranded
        answers: list[tuple[Any, int] | Timeout] = []
        with self._lock:  # answers are written under it: none half-read
            for item in items:
                if item.answered:
                    answers.append((item.result, item.error))
                elif not item.proposed:  # never left this node: it certainly did not commit
                    self._queue.remove(item)
                    answers.append(Timeout(proposed=False))
                else:
                    answers.append(Timeout(proposed=True))
        return answers

    def _take(self) -> list[_Item] | None:
        """Under the lock: the next batch, or None when nothing may or needs to go now."""
        if not self._queue:
            return None
        if len(self._inflight) >= self._max_inflight:
            now = self._monotonic()
            for n in [n for n, t in self._inflight.items() if now - t > self._stale_s]:
                del self._inflight[n]
            if len(self._inflight) >= self._max_inflight:
                return None
        batch = [self._queue.popleft()]
        size, weight = len(batch[0].data), batch[0].weight
        while self._queue and len(batch) < self._max_commands:
            nxt = self._queue[0]
            if size + len(nxt.data) > self._max_bytes or (
                self._max_weight is not None and weight + nxt.weight > self._max_weight
            ):
                break
            batch.append(self._queue.popleft())
            size += len(nxt.data)
            weight += nxt.weight
        for item in batch:
            item.proposed = True
        return batch

    def _flush(self) -> None:
        while True:
            with self._lock:
                batch = self._take()
                if batch is None:
                    return
                number = self._next
                self._next += 1
                self._inflight[number] = self._monotonic()
                self.entries += 1
                self.commands += len(batch)
            self._send(number, batch)

    def _send(self, number: int, batch: list[_Item]) -> None:
        data = batch[0].data if len(batch) == 1 else pack([item.data for item in batch])

        def done(result: Any, error: int) -> None:
            if error != 0 or len(batch) == 1:
                answers: Any = [(result, error)] * len(batch)
            elif isinstance(result, list) and len(result) == len(batch):
                answers = [(one, 0) for one in result]
            else:  # the entry was applied as something else than our batch: tell everyone the same
                answers = [(result, 0)] * len(batch)
            with self._lock:
                self._inflight.pop(number, None)
                ready = self._answer(batch, answers)
            for waiter in ready:
                waiter.event.set()
            self._flush()

        try:
            self._propose_async(data, done)
        except Exception:  # noqa: BLE001 - the proposal never left: free the slot, fail the callers
            with self._lock:
                self._inflight.pop(number, None)
                ready = self._answer(batch, [(None, -1)] * len(batch))
            for waiter in ready:
                waiter.event.set()

    @staticmethod
    def _answer(batch: list[_Item], answers: list[tuple[Any, int]]) -> list[_Waiter]:
        """Under the lock: each item's answer; the waiters whose every item now has one."""
        ready: list[_Waiter] = []
        for item, (result, error) in zip(batch, answers):
            if item.answered:
                continue
            item.result, item.error, item.answered = result, error, True
            waiter = item.waiter
            waiter.left -= 1
            if waiter.left == 0:
                ready.append(waiter)
        return ready
