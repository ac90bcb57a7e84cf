"""The leader loop: only the Raft leader fires, and firing is a committed command.

On becoming leader (as pysyncobj hints): commit a barrier so this node has
applied everything earlier leaders committed, then repeatedly take the jobs
due within the look-ahead from the state machine's index ordered by next
fire time (never a scan of all jobs) and propose them in batched ``Fire``
commands, pipelined. A fire item names the instant the leader expects; the
state machine ignores it if that instant was already handled, so two nodes
that both think they lead, or a retried proposal, cannot fire twice. On
losing leadership the loop stops proposing.

Nothing is fired, expired or pruned while ``may_act()`` names a reason
(this node's clock is not confirmed by a majority, or stepped; its disk
refuses writes: ``raftsched.cluster.node.fitness``), and a lease is expired only when
its deadline has passed **and** its holder has been silent for its TTL on
this leader's monotonic clock (``raftsched.cluster.node.lease_watch``).
"""

from __future__ import annotations

import logging
import random
import threading
from typing import Any, Callable, NamedTuple

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import RejectedError, Unavailable
from raftsched.cluster.domain.model import SCHEDULES_FORMAT
from raftsched.cluster.fsm.machine import JobStateMachine, due_item
from raftsched.cluster.node.clock import Clock
from raftsched.cluster.node.config import SchedulerConfig
from raftsched.cluster.node.lease_watch import LeaseWatch
from raftsched.cluster.node.replica import Replica

log = logging.getLogger("raftsched.leader")

#: an in-flight fire item with no answer after this long may be proposed again (idempotent)
INFLIGHT_RETRY_S = 5.0
#: at most this many fire batches wait for their commit at once (the pipeline's depth)
MAX_BATCHES_IN_FLIGHT = 4
#: shortest pause between two looks while work is flowing (an apply wakes the loop)
MIN_PAUSE_S = 0.002
#: after proposing fires, the loop looks again this long later (at most a quarter of the look-ahead, so every job
#: still goes out well before its instant): the jobs that come due meanwhile go out together, one Fire of dozens of
#: items instead of many of a few (each command costs every replica its decoding and its apply's fixed part, and
#: each look the leader a read under the state's lock); a batch's commit wakes it early only while the pipeline
#: is full
FIRE_GATHER_S = 0.02
#: longest sleep between looks at the due index
MAX_IDLE_S = 0.05
#: at most this many expired leases per ExpireLeases entry
EXPIRE_BATCH = 1000


class _Look(NamedTuple):
    """What one step of the loop read from the state (``LeaderLoop._look``)."""

    #: how many more fire items the pipeline takes now (<= 0: full, ``due`` was not read)
    fire_room: int
    #: the due index's keys (``due_item``) of jobs due within the look-ahead, earliest first, in-flight ones
    #: included
    due: list[bytes]
    next_due: int | None
    #: (lease_id, fencing token) of leases past their deadline, in-flight expiries included
    expired: list[tuple[str, int]]
    #: the TTL (ms) of each of those leases
    ttls: dict[str, int]
    next_deadline: int | None
    next_prune: int | None
    #: ids of PENDING runs past their job's pending_ttl (in-flight ones included), and the next such deadline
    stale_pending: list[str] = []
    next_pending_deadline: int | None = None


class LeaderLoop:
    def __init__(
        self,
        replica: Replica,
        clock: Clock,
        cfg: SchedulerConfig,
        max_pending_runs: int = 0,
        node_id: str = "",
        term: Callable[[], int] = lambda: 0,
        may_act: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._replica = replica
        #: why this node must not fire or expire now (None: it may)
        self._may_act = may_act
        self._refused: str | None = None
        #: when this leader last saw each lease granted or renewed, on its monotonic clock
        self.watch = LeaseWatch(clock.monotonic, cfg.lease_grace_s)
        replica.on_applied.append(self.watch.on_applied)
        #: this node's id and its current Raft term, named in every Fire (the runs' explanations)
        self._node_id, self._term = node_id, term
        self._clock = clock
        self._cfg = cfg
        #: ``[limits] max_pending_runs``, carried in every Fire (0: no quota)
        self._max_pending = max_pending_runs
        self._wake = threading.Condition()
        self._stop = threading.Event()
        #: due-index key (``JobStateMachine.due_page``) of each fire item proposed -> when (monotonic)
        self._inflight: dict[bytes, float] = {}
        self._inflight_lock = threading.Lock()
        self._expiring: dict[tuple[str, int], float] = {}
        self._expiring_pending: dict[str, float] = {}
        self._pruning_since = 0.0
        self._leading = False
        self._thread = threading.Thread(target=self._run, name="leader-loop", daemon=True)
        self.fires_proposed = 0
        self._planned_ms: int | None = None  # the next due instant the loop last planned around
        self._pipeline_full = False  # the last look left due jobs waiting for a pipeline slot
        replica.on_applied.append(self._after_apply)

    @property
    def leading(self) -> bool:
        return self._leading

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.wake()
        self._thread.join(timeout=5)

    def wake(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def _after_apply(self, _events: list) -> None:
        """On the tick thread: wake the loop only if a job now comes due earlier than it planned for."""
        if not self._leading:
            return
        head = self._replica.read(lambda m: m.next_due_ms(), barrier=False)
        planned = self._planned_ms
        if head is not None and (planned is None or head < planned):
            self.wake()

    def _sleep(self, seconds: float) -> None:
        with self._wake:
            self._wake.wait(max(0.0, seconds))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except Unavailable as exc:
                log.info("leader loop: %s", exc)
                self._leading = False
                self._sleep(0.1)
            except Exception:
                log.exception("leader loop failed; retrying")
                self._leading = False
                self._sleep(0.5)

    def _step(self) -> None:
        if not self._replica.is_leader():
            if self._leading:
                log.info("no longer the leader: firing stops")
                self.watch.lead(False)
            self._leading = False
            self._sleep(0.05)
            return
        refusal = self._may_act()
        if refusal != self._refused:
            self._refused = refusal
            if refusal is not None:
                log.warning("leader: not firing, granting or expiring leases: %s", refusal)
            elif self._leading:
                log.info("leader: firing again")
        if refusal is not None:
            self._sleep(0.05)
            return
        if not self._leading:
            self._become_leader()
            return
        now = self._clock.now_ms()
        look = self._look(now)
        self._sleep(
            min(
                self._fire_due(now, look),
                self._expire_due(now, look),
                self._prune_due(now, look),
                self._expire_pending(now, look),
            )
        )

    def _look(self, now: int) -> _Look:
        """What is due, in one read: the Raft thread holds the state's lock while it applies an entry (a Fire of
        2,000 items: tens of ms), so each separate read could wait a whole apply while the pipeline drains."""
        cfg = self._cfg
        fire_room = cfg.fire_batch * MAX_BATCHES_IN_FLIGHT - len(self._inflight)
        until = now + int(cfg.fire_lookahead_s * 1000)
        fire_scan = fire_room + len(self._inflight)
        expire_scan = EXPIRE_BATCH + len(self._expiring)

        def read(m: JobStateMachine) -> _Look:
            due = m.due_page(until, fire_scan) if fire_room > 0 else []
            expired = m.expired_leases(now, expire_scan)
            ttls = m.lease_ttls([lease_id for lease_id, _ in expired]) if expired else {}
            stale = (
                m.expired_pending(now, EXPIRE_BATCH + len(self._expiring_pending)) if m.cluster_format >= SCHEDULES_FORMAT else []
            )
            return _Look(
                fire_room, due, m.next_due_ms(), expired, ttls, m.next_lease_deadline(), m.next_prune_ms(), stale,
                m.next_pending_deadline(),
            )  # fmt: skip

        return self._replica.read(read, barrier=False)

    def _become_leader(self) -> None:
        self.watch.lead(True)  # renewals applied from here on are this leader's to see
        try:
            index = self._replica.execute(c.Barrier(self._clock.now_ms()))
            grace_ms = int(self._cfg.lease_grace_s * 1000)
            extended = self._replica.execute(c.GraceLeases(self._clock.now_ms(), grace_ms))
        except RejectedError as exc:  # cannot happen for these commands; never fire on a doubt
            raise Unavailable(f"leader start-up refused: {exc}") from exc
        with self._inflight_lock:
            self._inflight.clear()
            self._expiring.clear()
            self._expiring_pending.clear()
        self._leading = True
        log.info(
            "became leader: barrier committed at index %s, %s live leases given at least %d ms, firing starts",
            index,
            extended,
            grace_ms,
        )

    def _fire_due(self, now: int, look: _Look) -> float:
        """Propose what is due (pipelined batches); return how long to sleep at most."""
        cfg = self._cfg
        lookahead = int(cfg.fire_lookahead_s * 1000)
        limit = look.fire_room
        if limit <= 0:  # the pipeline is full: wait for a commit to free a slot
            self._pipeline_full = True
            return MAX_IDLE_S
        due, next_due = look.due, look.next_due
        self._planned_ms = next_due
        mono = self._clock.monotonic()
        retry_before = mono - INFLIGHT_RETRY_S
        with self._inflight_lock:
            inflight = self._inflight
            ready = [key for key in due if inflight.get(key, 0.0) < retry_before]
            keys = ready[:limit]
            for key in keys:
                inflight[key] = mono
            self._pipeline_full = len(keys) >= limit  # the room is taken: more may be due than the look read
        for start in range(0, len(keys), cfg.fire_batch):
            self._propose(keys[start : start + cfg.fire_batch], now, lookahead)
        if due:  # proposed, or all that is due is on its way: look again once more jobs have come due
            return max(MIN_PAUSE_S, min(FIRE_GATHER_S, lookahead / 4000.0))
        if next_due is None:
            return MAX_IDLE_S
        return min(MAX_IDLE_S, max(0.001, (next_due - lookahead - self._clock.now_ms()) / 1000.0))

    def _prune_due(self, now: int, look: _Look) -> float:
        """Propose the removal of history past its retention, one entry at a time."""
        next_ms = look.next_prune
        if next_ms is None or next_ms > now:
            return MAX_IDLE_S
        mono = self._clock.monotonic()
        if self._pruning_since and mono - self._pruning_since < INFLIGHT_RETRY_S:
            return MAX_IDLE_S

        def done(_result: Any, _error: int) -> None:
            self._pruning_since = 0.0

        self._pruning_since = mono
        self._replica.propose_async(c.PruneHistory(now), done)
        return MAX_IDLE_S

    def _expire_due(self, now: int, look: _Look) -> float:
        """Propose the expiry of leases past their deadline; return how long to sleep at most."""
        limit = EXPIRE_BATCH
        due, next_deadline = look.expired, look.next_deadline
        watch, ttls = self.watch, look.ttls
        due = [d for d in due if d[0] in ttls and watch.may_expire(d[0], ttls[d[0]])]
        mono = self._clock.monotonic()
        with self._inflight_lock:
            items = [d for d in due if self._expiring.get(d, 0.0) < mono - INFLIGHT_RETRY_S][:limit]
            for item in items:
                self._expiring[item] = mono
        if items:
            cmd = c.ExpireLeases(now, tuple((lease_id, token, random.random()) for lease_id, token in items))

            def done(_result: Any, error: int) -> None:
                with self._inflight_lock:
                    for item in items:
                        self._expiring.pop(item, None)

            self._replica.propose_async(cmd, done)
        if items:
            return MIN_PAUSE_S
        if next_deadline is None or next_deadline < now:
            return MAX_IDLE_S
        return min(MAX_IDLE_S, max(0.001, (next_deadline + 1 - now) / 1000.0))

    def _expire_pending(self, now: int, look: _Look) -> float:
        """Propose the end of PENDING runs past their job's pending_ttl; return how long to sleep at most."""
        mono = self._clock.monotonic()
        with self._inflight_lock:
            items = [r for r in look.stale_pending if self._expiring_pending.get(r, 0.0) < mono - INFLIGHT_RETRY_S]
            items = items[:EXPIRE_BATCH]
            for item in items:
                self._expiring_pending[item] = mono
        if items:

            def done(_result: Any, error: int) -> None:
                with self._inflight_lock:
                    for item in items:
                        self._expiring_pending.pop(item, None)

            self._replica.propose_async(c.ExpirePending(now, tuple(items)), done)
            return MIN_PAUSE_S
        nxt = look.next_pending_deadline
        if nxt is None or nxt < now:
            return MAX_IDLE_S
        return min(MAX_IDLE_S, max(0.001, (nxt + 1 - now) / 1000.0))

    def _propose(self, keys: list[bytes], now: int, lookahead: int) -> None:
        items = tuple(due_item(key) for key in keys)
        cmd = c.Fire(
            now, items, lookahead, int(self._cfg.misfire_threshold_s * 1000), self._max_pending, self._node_id, self._term(),
        )  # fmt: skip

        def done(_result: Any, error: int) -> None:
            with self._inflight_lock:
                for key in keys:
                    self._inflight.pop(key, None)
                waiting = self._pipeline_full
            if waiting or error != 0:
                self.wake()  # a pipeline slot is free for the jobs waiting, or the batch must go again
            if error != 0:
                log.debug("fire batch of %d not committed (reason %s); will retry", len(keys), error)

        self._replica.propose_async(cmd, done)
        self.fires_proposed += len(keys)
