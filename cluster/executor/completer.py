"""Client-side group commit of an executor's completions: many finished runs per CompleteRuns call."""

from __future__ import annotations

import logging
import threading
from typing import Callable

from raftsched.cluster.executor.ports import Finished, LeaseApi

log = logging.getLogger("raftsched.executor")

#: completions in one ``complete_many`` call
MAX_COMPLETE_BATCH = 256


class _Completion:
    __slots__ = ("finished", "answer")

    def __init__(self, finished: Finished, answer: Callable[[Exception | None], None]) -> None:
        self.finished = finished
        self.answer = answer


class Completer:
    """Client-side group commit of completions.

    ``submit(done, answer)`` queues a completion; if no call is on its way the
    submitting thread sends one itself, and keeps sending what queued up
    meanwhile until the queue is empty; otherwise it returns at once and the
    sending thread carries the completion. ``answer(error)`` is called by the
    sender with None or the item's error (``LeaseLost`` when the cluster
    refused it). A batch of several goes in one ``api.complete_many`` call
    (``raftsched.rpc.client.GrpcLeaseApi``: one CompleteRuns RPC) when the API has it,
    else through ``api.complete`` one by one. ``complete`` is the blocking form.
    """

    def __init__(self, api: LeaseApi) -> None:
        self._api = api
        self._lock = threading.Lock()
        self._queue: list[_Completion] = []
        self._sending = False

    def submit(self, finished: Finished, answer: Callable[[Exception | None], None]) -> None:
        with self._lock:
            self._queue.append(_Completion(finished, answer))
            send, self._sending = not self._sending, True
        if send:
            self._drain()

    def complete(self, finished: Finished) -> Exception | None:
        answered = threading.Event()
        box: list[Exception | None] = []

        def answer(error: Exception | None) -> None:
            box.append(error)
            answered.set()

        self.submit(finished, answer)
        answered.wait()
        return box[0]

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._sending = False
                    return
                batch, self._queue = self._queue[:MAX_COMPLETE_BATCH], self._queue[MAX_COMPLETE_BATCH:]
            for item, error in zip(batch, self._send([i.finished for i in batch])):
                try:
                    item.answer(error)
                except Exception:  # noqa: BLE001 - one answer's failure must not strand the others
                    log.exception("handling the answer to a completion failed")

    def _send(self, batch: list[Finished]) -> list[Exception | None]:
        many: Callable[[list[Finished]], list[Exception | None]] | None = getattr(self._api, "complete_many", None)
        if many is not None and len(batch) > 1:
            try:
                return many(batch)
            except Exception as exc:  # noqa: BLE001 - the whole call failed: every item with it
                return [exc] * len(batch)
        out: list[Exception | None] = []
        for finished in batch:
            try:
                self._api.complete(finished)
                out.append(None)
            except Exception as exc:  # noqa: BLE001
                out.append(exc)
        return out
