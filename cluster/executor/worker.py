"""The executor: lease runs, run them, renew the leases, complete with the outcome.

Threads: two acquirers (each long-polls ``acquire`` for the slots free when
it starts and reserves them, so a second call is on its way while the first
waits for its grant to commit; a slot frees when a run's handler and output
upload are done, while its completion is still on its way), one renewer
(renews every held lease in one call, every third of the shortest TTL, and
at once when a lease comes whose TTL is shorter than the renewer's wait; a
refused renewal stops that run and drops its result), and ``concurrency + 1``
worker threads that run one run each at a time. Completions are
group-committed on the way out: those that finish while a ``complete_many``
call is on its way travel together in the next one (one RPC for many runs),
and a worker does not wait for its run's answer. Completion is retried across failovers by
the API client; a refused completion (the lease was lost) is logged and dropped — the
cluster has already given the run to someone else. ``stop(grace)`` stops
acquiring, waits up to ``grace`` for running work, then cancels the rest and
lets their leases expire.

A handler's ``ctx.heartbeat(details)`` wakes the renewer (at most once per
``HEARTBEAT_GAP_S``); the details travel with that renewal, once (details
still unsent when the handler ends go in one last renewal before the
completion). A
``HandlerError`` marked ``non_retryable`` or with ``retry_after_s`` is
completed saying so (``Finished``). When no node answers, the acquirers and
the renewer say so in one line per few seconds between them
(``raftsched.cluster.executor.quiet_log``), not one line each per try.

While a run goes, its new log bytes are shipped to the output store about
once a second as live parts (``raftsched.cluster.executor.live_log``: one more
thread, only with a store that takes parts); once its whole log is stored
they are removed. A run that writes nothing costs the store nothing.

The job types it serves are its handlers' (``types()``): ``noop``, the
user's, and ``shell``/``http`` only when named in ``allow_types``. Every
acquire call names them, and the cluster grants runs of those types only.

Usable as a library: ``Executor(api, queues, handlers={"my-type": fn}, output=store).run()``. An
executor keeps every run's log in its output store: one without a store
refuses to start (``ConfigError``), rather than drop the logs silently.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Iterable

from raftsched.cluster.domain.errors import ConfigError
from raftsched.cluster.executor.bounded_log import LogSettings
from raftsched.cluster.executor.completer import Completer
from raftsched.cluster.executor.handlers import BuiltinSettings, builtin_handlers
from raftsched.cluster.executor.live_log import LiveSettings, LiveShipper
from raftsched.cluster.executor.output_upload import output_key, store_output
from raftsched.cluster.executor.ports import (
    Finished,
    HandlerError,
    LeaseApi,
    LeaseLost,
    LiveOutputStore,
    OutputStore,
    Task,
    TaskContext,
)
from raftsched.cluster.executor.quiet_log import QuietWarning

log = logging.getLogger("raftsched.executor")

ACQUIRE_WAIT_MS = 5_000
#: acquire calls an executor keeps on their way at once: while one waits for its grant to commit,
#: slots freed meanwhile are asked for by the next (each reserves the slots it asks for)
ACQUIRERS = 2
MIN_RENEW_S = 0.05
#: how soon a renewal that was not answered is tried again
RENEW_RETRY_S = 0.1
#: the shortest time between two renewals that a heartbeat asks for (a handler heartbeating in a loop
#: costs one call per this span, whatever its pace)
HEARTBEAT_GAP_S = 0.5
#: how long a failing output store is retried before the run completes with its output missing
OUTPUT_RETRY_S = 120.0


@dataclass
class _Held:
    task: Task
    ctx: TaskContext
    ttl_s: float
    lost: bool = False
    #: still counts against ``concurrency`` (its handler or output upload is running)
    busy: bool = True


class Executor:
    def __init__(
        self,
        api: LeaseApi,
        queues: list[str],
        concurrency: int = 4,
        handlers: dict[str, Callable[[Task, TaskContext], object]] | None = None,
        output: OutputStore | None = None,
        log_settings: LogSettings = LogSettings(),
        output_retry_s: float = OUTPUT_RETRY_S,
        allow_types: Iterable[str] = (),
        builtin: BuiltinSettings = BuiltinSettings(),
        live: LiveSettings = LiveSettings(),
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.api = api
        self.queues = list(queues)
        self.concurrency = concurrency
        # noop, the built-ins allowed by name (shell and http are off unless named), and the user's handlers
        self.handlers = builtin_handlers([t for t in allow_types if t not in (handlers or {})], builtin)
        self.handlers.update(handlers or {})
        self.output = output
        self.log_settings = log_settings
        #: how long a failing output store is retried before a run completes with its output missing
        self.output_retry_s = output_retry_s
        #: ships running attempts' logs as live parts (None: off, or the store takes no parts)
        self._live = LiveShipper(output, live) if live.enabled and isinstance(output, LiveOutputStore) else None
        self._parts_left = 0  # runs whose live parts could not be removed
        self._held: dict[str, _Held] = {}  # every lease held, until its completion is answered
        self._busy = 0  # runs whose handler or output upload is running: what ``concurrency`` bounds
        self._reserved = 0  # slots promised to acquire calls on their way
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        #: set to wake the renewer early: a lease came whose renewal is due before the renewer's next round
        self._renew_soon = threading.Event()
        self._next_renewal = 0.0  # monotonic time of the renewer's next round
        self._threads: list[threading.Thread] = []
        self._runs: queue.SimpleQueue[_Held | None] = queue.SimpleQueue()  # to the worker threads
        self._completer = Completer(api)
        #: the cluster's failures as the acquirers and the renewer meet them: one line per few seconds
        self._unreachable = QuietWarning(log)
        self._heartbeat_asked = False  # a handler asked for a renewal now (``_heartbeat``)
        self._last_renewal = -HEARTBEAT_GAP_S  # monotonic time the renewer's last round began
        self.completed = 0
        self.lost = 0

    def register(self, job_type: str, fn: Callable[[Task, TaskContext], object]) -> None:
        self.handlers[job_type] = fn

    def types(self) -> list[str]:
        """The job types this executor serves (its handlers): the cluster leases it runs of these only."""
        return sorted(self.handlers)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the threads; ``ConfigError`` without an output store (a run's log would be dropped)."""
        if self.output is None:
            raise ConfigError(NO_OUTPUT_STORE)
        loops = [(self._acquire_loop, f"acquire-{i}") for i in range(ACQUIRERS)] + [(self._renew_loop, "renew")]
        # one more worker than slots: a worker whose run is done may be busy sending completions
        loops += [(self._worker_loop, f"worker-{i}") for i in range(self.concurrency + 1)]
        for target, name in loops:
            t = threading.Thread(target=target, name=f"executor-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        if self._live is not None:
            self._live.start()

    def stop(self, grace_s: float = 30.0) -> None:
        """Stop taking work; finish what runs within ``grace_s``; cancel the rest (its leases expire)."""
        self._stopping.set()
        self._renew_soon.set()
        deadline = time.monotonic() + grace_s
        # The long poll is not cancelled: a grant may already be committed and on its way back, and a
        # cancelled call would leave that run leased to nobody for a TTL. It ends within ACQUIRE_WAIT_MS;
        # what it brings is launched and finished like the rest.
        poll_end = time.monotonic() + max(0.0, min(grace_s, ACQUIRE_WAIT_MS / 1000.0 + 1))
        for t in self._threads[:ACQUIRERS]:
            t.join(timeout=max(0.0, poll_end - time.monotonic()))
        with self._lock:
            while self._held and time.monotonic() < deadline:
                self._lock.wait(min(0.2, max(0.0, deadline - time.monotonic())))
            for held in self._held.values():
                held.lost = True  # never complete: let the lease expire so another executor retries
                held.ctx.reason = "the executor is shutting down"
                held.ctx.cancelled.set()
        for _ in range(self.concurrency + 1):
            self._runs.put(None)  # the workers' signal to exit
        for t in self._threads:
            t.join(timeout=2)
        if self._live is not None:
            self._live.stop()

    def run(self) -> None:
        """Run in the foreground until ``stop`` is called from another thread (or a signal handler:
        the wait is sliced so that a handler of the main thread gets to run, see raftsched.cluster.app.stop_signal)."""
        self.start()
        while not self._stopping.wait(0.2):
            pass

    # ------------------------------------------------------------ acquiring

    def _reserve_slots(self) -> int:
        """Wait for free slots and reserve them all for one acquire call (0 when stopping)."""
        with self._lock:
            while self._busy + self._reserved >= self.concurrency and not self._stopping.is_set():
                self._lock.wait(0.5)
            if self._stopping.is_set():
                return 0
            free = self.concurrency - self._busy - self._reserved
            self._reserved += free
            return free

    def _acquire_loop(self) -> None:
        backoff = 0.1
        while not self._stopping.is_set():
            free = self._reserve_slots()
            if free <= 0:
                continue
            tasks: list[Task] = []
            try:
                tasks = self.api.acquire(self.queues, free, ACQUIRE_WAIT_MS, types=self.types())
                backoff = 0.1
                self._unreachable.ok()
            except Exception as exc:  # noqa: BLE001 - the cluster may be failing over
                self._unreachable.warn("acquire failed (%s); retrying in %.1f s", exc, backoff)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                self._launch(tasks, free)

    def _launch(self, tasks: list[Task], reserved: int) -> None:
        """Start the granted tasks in the slots reserved for them; give back the slots left unused."""
        helds = []
        for task in tasks:
            ctx = TaskContext(self.log_settings.new_log(), renew_now=self._heartbeat)
            if task.timeout_ms > 0:
                ctx.deadline = time.monotonic() + task.timeout_ms / 1000.0
            helds.append(_Held(task, ctx, max(0.1, (task.expires_ms - time.time() * 1000) / 1000.0)))
        with self._lock:
            self._reserved -= reserved
            for held in helds:
                self._held[held.task.lease_id] = held
                self._busy += 1
            self._lock.notify_all()
            # under the lock the renewer sets its next round by: either it sees these leases or they see its time
            if any(time.monotonic() + h.ttl_s / 3.0 < self._next_renewal for h in helds):
                self._renew_soon.set()  # a shorter TTL than the renewer waits for: renew on its terms
        if self._live is not None:
            for held in helds:
                self._live.watch(held.task, held.ctx.log)
        for held in helds:  # a reserved slot means a worker thread is free for it
            self._runs.put(held)

    # ------------------------------------------------------------ renewing

    def _renew_loop(self) -> None:
        while not self._stopping.is_set() or self._held:
            with self._lock:
                held = list(self._held.values())
            period = max(MIN_RENEW_S, min([h.ttl_s / 3.0 for h in held], default=0.5))
            # a failed renewal (no node answered within a period) is tried again soon, not a period later
            self._last_renewal = time.monotonic()
            wait = period if not held or self._renew_once(held, period) else RENEW_RETRY_S
            with self._lock:
                # a lease that came during the round (its grant compared its TTL with the last round's time) is
                # renewed on its own terms, not after a period reckoned without it
                asked = {h.task.lease_id for h in held}
                came = [h.ttl_s / 3.0 for lease_id, h in self._held.items() if lease_id not in asked]
                if came:
                    wait = min(wait, max(MIN_RENEW_S, min(came)))
                self._next_renewal = time.monotonic() + wait
            self._renew_soon.wait(wait)  # or sooner: a lease with a shorter TTL (``_launch``), a heartbeat
            self._renew_soon.clear()
            if self._heartbeat_asked and not self._stopping.is_set():
                self._heartbeat_asked = False  # a heartbeat loop is paced: one renewal per HEARTBEAT_GAP_S
                self._stopping.wait(max(0.0, self._last_renewal + HEARTBEAT_GAP_S - time.monotonic()))
            if self._stopping.is_set() and not self._held:
                return

    def _heartbeat(self) -> None:
        """A handler's ``ctx.heartbeat``: renew now (paced by ``_renew_loop``)."""
        self._heartbeat_asked = True
        self._renew_soon.set()

    def _renew_once(self, held: list[_Held], within_s: float) -> bool:
        """Renew every held lease in one call, answered within ``within_s``; whether it was answered."""
        leases = [(h.task.lease_id, h.task.fencing_token) for h in held]
        details = {h.task.lease_id: d for h in held if (d := h.ctx.pending_details()) is not None}
        try:  # (``details`` only when there are some: a lease API from before them takes two arguments)
            results = self.api.renew(leases, within_s, details=details) if details else self.api.renew(leases, within_s)
        except Exception as exc:  # noqa: BLE001 - keep trying: the new leader grants a grace period
            self._unreachable.warn("renewal of %d leases failed (%s); retrying", len(held), exc)
            return False
        self._unreachable.ok()
        by_id = {h.task.lease_id: h for h in held}
        for lease_id, sent in details.items():
            by_id[lease_id].ctx.details_sent(sent)
        for r in results:
            h = by_id.get(r.lease_id)
            if h is None:
                continue
            if not r.ok:
                if not h.busy:  # done, its completion on the way (or just answered): that answer decides
                    continue
                log.warning("lease %s of run %s was lost: %s", r.lease_id, h.task.run_id, r.error)
                h.lost = True
                h.ctx.reason = f"lease lost: {r.error}"
                h.ctx.cancelled.set()
            elif r.cancel_requested and not h.ctx.cancelled.is_set():
                h.ctx.reason = "cancelled by request"
                h.ctx.cancelled.set()
        return True

    # ------------------------------------------------------------ working

    def _worker_loop(self) -> None:
        while (held := self._runs.get()) is not None:
            self._work(held)

    def _work(self, held: _Held) -> None:
        task, ctx = held.task, held.ctx
        succeeded, result, error = False, b"", ""
        verdict: HandlerError | None = None
        try:
            handler = self.handlers.get(task.type)
            if handler is None:
                raise HandlerError(f"this executor has no handler for job type {task.type!r}")
            value = handler(task, ctx)
            result = value if isinstance(value, bytes) else (b"" if value is None else str(value).encode("utf-8"))
            succeeded = True
        except HandlerError as exc:
            error, verdict = str(exc), exc
        except Exception as exc:  # noqa: BLE001 - a user's handler failed
            error = f"{type(exc).__name__}: {exc}"
            ctx.log.write(traceback.format_exc())
        try:
            self._finish(held, succeeded, result, error, verdict)
        except Exception:  # noqa: BLE001 - never lose track of a held lease
            log.exception("run %s: finishing failed", task.run_id)
            self._done_with(held)

    def _release(self, held: _Held) -> None:
        """The run's work is done (its completion may still be on its way): its slot is free."""
        with self._lock:
            if held.busy:
                held.busy = False
                self._busy -= 1
                self._lock.notify_all()

    def _done_with(self, held: _Held) -> None:
        """Nothing more to do for this lease: stop renewing it."""
        if self._live is not None:
            self._live.finish(held.task)  # (already done on the usual paths)
        held.ctx.log.close()
        self._release(held)
        with self._lock:
            self._held.pop(held.task.lease_id, None)
            last = not self._held
            self._lock.notify_all()
        if last and self._stopping.is_set():
            self._renew_soon.set()  # the renewer's last round is done

    def _finish(self, held: _Held, succeeded: bool, result: bytes, error: str, verdict: HandlerError | None = None) -> None:
        """Store the attempt's output and send its completion; ``verdict``: the handler's failure, which may
        say that no retry helps or when the next attempt may start."""
        task = held.task
        parts: list[tuple[int, bool]] = self._live.finish(task) if self._live is not None else []
        if held.lost:
            self.lost += 1
            log.info("run %s: lease %s lost, result dropped", task.run_id, task.lease_id)
            self._drop_parts(task, parts)
            self._done_with(held)
            return
        log_uri, missing = self._store_output(held, result)
        if missing:
            error = f"{error}; {missing}" if error else missing
        else:  # the whole log is stored: its live parts are not needed (if it is not, they are all there is)
            self._drop_parts(task, parts)
        held.ctx.log.close()
        self._send_details(held)
        self._release(held)  # the lease stays renewed until the completion is answered
        non_retryable, retry_after_ms = (verdict.non_retryable, int(verdict.retry_after_s * 1000)) if verdict else (False, 0)
        finished = Finished(task, succeeded, result, error, log_uri, non_retryable, retry_after_ms)
        self._completer.submit(finished, lambda failure: self._completed(held, failure))

    def _send_details(self, held: _Held) -> None:
        """Heartbeat details the renewer has not sent yet go now, before the completion: a retry finds them."""
        details = held.ctx.pending_details()
        if details is None:
            return
        task = held.task
        try:
            self.api.renew([(task.lease_id, task.fencing_token)], max(1.0, held.ttl_s / 3.0), details={task.lease_id: details})
            held.ctx.details_sent(details)
        except Exception as exc:  # noqa: BLE001 - the completion matters more: it goes anyway
            log.warning("run %s: its last heartbeat details were not sent (%s)", task.run_id, exc)

    def _drop_parts(self, task: Task, parts: list[tuple[int, bool]]) -> None:
        if not parts or self._live is None:
            return
        try:
            self._live.store.delete_parts(output_key(task), parts)
        except Exception as exc:  # noqa: BLE001 - leftovers are swept by the janitor or a lifecycle rule
            self._parts_left += 1
            level = logging.WARNING if self._parts_left == 1 else logging.DEBUG  # e.g. no s3:DeleteObject: say it once
            log.log(
                level,
                "run %s: removing %d live log parts failed (left for the retention janitor or a lifecycle rule): %s",
                task.run_id,
                len(parts),
                exc,
            )

    def _completed(self, held: _Held, failure: Exception | None) -> None:
        task = held.task
        if failure is None:
            self.completed += 1
        elif isinstance(failure, LeaseLost):
            self.lost += 1
            log.warning("run %s: completion refused (lease lost): %s", task.run_id, failure)
        else:
            log.error("run %s: completion failed: %s; the lease will expire and the run be retried", task.run_id, failure)
        self._done_with(held)

    def _store_output(self, held: _Held, result: bytes) -> tuple[str, str]:
        """Write the log and result through the store: (log_uri, "") or ("", "output missing: <why>")
        (``raftsched.cluster.executor.output_upload``; given up early when the lease is lost or the executor stops)."""
        if self.output is None:
            return "", ""
        return store_output(
            self.output,
            held.task,
            held.ctx.log,
            result,
            self.output_retry_s,
            give_up=lambda: held.lost or self._stopping.is_set(),
            pause=self._stopping.wait,
        )


NO_OUTPUT_STORE = (
    "an executor needs an output store for its runs' logs, and none was given: pass output= (e.g. "
    "raftsched.storage.LocalOutputStore(dir), dir being where the nodes accept logs: their [logs] dir, default "
    "<data_dir>/outputs; or an S3 store), as `raftsched executor` finds it from --output-dir, --config or the "
    "client config's output_dir"
)
