"""The worker's event loop: one thread where every ``async def`` task of a worker runs.

``LoopThread.start()`` starts the loop in a thread of its own. ``run(coro,
cancelled, deadline)`` is called from one of the executor's worker threads:
it schedules the coroutine on the loop and waits for it; when ``cancelled``
is set (the run was cancelled, its lease lost, the worker stops) or the
monotonic ``deadline`` passes, the coroutine is cancelled
(``asyncio.CancelledError`` inside it) and the attempt fails saying why.
``stop()`` cancels whatever still runs and ends the thread.

The executor's slots still bound how many tasks run at once; coroutines
share the loop, so one that blocks (a ``time.sleep``) holds up the others.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from typing import Any, Callable, Coroutine

from raftsched.cluster.executor.ports import HandlerError

log = logging.getLogger("raftsched.worker")

#: how often a waiting worker thread looks at ``cancelled`` and the deadline
CHECK_S = 0.1
#: how long a cancelled coroutine is given to finish its clean-up
CANCEL_WAIT_S = 5.0


class LoopThread:
    """An asyncio loop in its own thread (see the module)."""

    def __init__(self, name: str = "raftsched-worker-loop") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)

    def start(self) -> None:
        """Start the loop's thread."""
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def run(
        self,
        coro: Coroutine[Any, Any, Any],
        cancelled: threading.Event,
        deadline: float | None,
        reason: Callable[[], str] = lambda: "",
    ) -> Any:
        """The coroutine's result, run on the loop; ``HandlerError`` when it was cancelled (see the module)."""
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        while not done.wait(CHECK_S):
            why = ""
            if cancelled.is_set():
                why = f"stopped: {reason() or 'cancelled'}"
            elif deadline is not None and time.monotonic() >= deadline:
                why = "timed out: the job's timeout has passed"
            if why:
                future.cancel()
                done.wait(CANCEL_WAIT_S)
                raise HandlerError(why)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise HandlerError("the task was cancelled") from None

    def stop(self) -> None:
        """Cancel the coroutines still running, stop the loop and its thread."""
        if not self._thread.is_alive():
            self._loop.close()
            return

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_all(), self._loop).result(CANCEL_WAIT_S)
        except Exception as exc:  # noqa: BLE001 - stopping anyway
            log.warning("async tasks did not all end when cancelled: %s", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CANCEL_WAIT_S)
        if not self._thread.is_alive():
            self._loop.close()
