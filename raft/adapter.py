"""The pysyncobj adapter: replicate opaque commands into a ``StateMachine``.

It knows nothing of jobs. What it relies on in pysyncobj 0.3.17 (read from
its source):

* One stable ``@replicated apply_entry(data)`` method: method ids are
  positions in a sorted list, so a single method keeps old journals valid.
* A command proposed on a follower is forwarded to the last known leader;
  its callback fires when *this* node applies the entry (read-your-writes on
  the proposing node), with DISCARDED if another term's entry took its
  index, LEADER_CHANGED if the forward was lost with a leader change, and
  never if the forward was silently lost: ``propose`` therefore always has
  a timeout, after which the outcome is unknown (the command may still
  commit; commands must be idempotent).
* ``commandsWaitLeader=False``: with no known leader a proposal fails at
  once (MISSING_LEADER) instead of waiting forever.
* Apply and callbacks run on the single tick thread; ``apply_entry`` never
  raises (a raise would be retried forever on every replica) but to hold
  an entry back: pysyncobj's ``__applyLogEntries`` is replaced by
  ``raftsched.raft.apply_hold.apply_committed`` (see below).
* Leadership is a hint: ``is_leader`` may be true on two nodes for a while.
  Anything that must be decided by one leader is a committed command.
* ``conf.bindAddress``: without it pysyncobj listens on every interface
  (0.0.0.0); we always set it to the node's listen address.
* ``SyncObj._applyCommand(command, callback)`` takes every proposal, local or
  forwarded by a follower, and ``_SyncObj__callErrCallback`` answers one
  with an error (to a follower, as an ``apply_command_response``): a
  proposal the log has no room for is refused there (``LOG_FULL``) instead
  of failing later inside the tick, where its caller would never hear back.
* ``dynamicMembershipChange=True``: membership changes travel in the log
  (``raftsched.raft.membership``); the cluster in a snapshot is handed back to
  pysyncobj as ``TCPNode`` objects, which it compares with its own node when
  it loads the snapshot (plain address strings would make it count itself as
  a peer).
* A state machine that raises an exception marked ``stops_replica = True``
  (a command this code does not understand) stops the process with its
  ``exit_code`` (default ``EXIT_UNSUPPORTED_COMMAND``) before anything after
  it is applied: skipping the entry would let this replica diverge from the
  others.
* A store that cannot write (a full or failing disk, a full map: the
  exception carries ``storage_problem``, the words for the node's health)
  holds the entry back instead (``raftsched.raft.apply_hold``): nothing after it is
  applied and nobody is answered for it until it is stored. If the store
  kept the entry's writes (``kept``) only its commit is tried again, every
  ``RETRY_EVERY_S``; otherwise the machine is rolled back to what its store
  holds (``rollback``) and the entry is applied again at the next try.
  Reads go on serving the state as of the last entry stored.
* A disk that refuses writes — the Raft log's (``LmdbJournal.durable``,
  ``raftsched.raft.pysyncobj_patches``: nothing that depends on the log leaves) or the
  state's — is one ``DiskTrouble`` (``raftsched.raft.disk_trouble``), told to the
  layer above through ``on_storage``. While it stands this replica never
  campaigns (``RaftMembership.hold_elections``), refuses proposals at once
  (``DISK_TROUBLE``, naming the disk), and, leading, steps down in the same
  tick, as pysyncobj's own fallback does (``__setState(FOLLOWER)``, no
  leader): a leader whose log is not on disk must not count itself towards a
  majority at the next tick. The others elect a fit leader within an
  election timeout.
* The state machine keeps its state in a store of its own and commits each
  entry there with the entry's index (``commit``): an entry at or below its
  ``committed_index`` is already in it (a restart replays the log from the
  snapshot on, and the machine skips what it holds). Every entry is
  committed before pysyncobj calls back its proposer (and a read barrier's),
  so a reader who heard of an entry sees it.
* Snapshots (``raftsched.raft.snapshotter``) are copies of that state at the applied
  index, written in a background thread, in a file pysyncobj streams to a
  follower that fell behind. At start, a state behind the snapshot (none
  yet, or one set aside) is installed from it, and a format-2 snapshot (the
  state as one blob, from before the state moved into LMDB) is converted
  (``restore``); a snapshot received from the leader replaces the state
  (``install``), after which this node's election timer starts afresh (an
  install of gigabytes must not make it campaign).
* On the leader, ``_SyncObj__raftMatchIndex`` (how far each follower's log
  matches), ``_SyncObj__connectedNodes`` and the serializer's
  ``_Serializer__transmissions`` (dumps being sent) say whether a follower
  still needs the entries a new snapshot would compact away
  (``raftsched.raft.snapshotter`` waits for them).
* The rest of what we change in pysyncobj is in ``raftsched.raft.pysyncobj_patches``,
  installed explicitly when a node is built.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, BinaryIO, Callable, Protocol

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated
from pysyncobj.node import TCPNode
from pysyncobj.syncobj import _RAFT_STATE

from raftsched.raft import batching, disk_trouble, proposal_errors, pysyncobj_patches
from raftsched.raft.apply_hold import ApplyHold, EntryHeld, apply_committed
from raftsched.raft.disk_trouble import LOG, STATE, DiskTrouble
from raftsched.raft.heartbeats import QuietHeartbeats
from raftsched.raft.lmdb_journal import LmdbJournal
from raftsched.raft.membership import RaftMembership
from raftsched.raft.peer_probe import DISK as DISK_REPORT
from raftsched.raft.peer_probe import PeerProbes
from raftsched.raft.proposal_errors import DISK_TROUBLE, LOG_FULL, STATE_FULL, ProposalError, log_full_message
from raftsched.raft.quiet_ticks import QuietTicks
from raftsched.raft.settings import RaftSettings, build_conf
from raftsched.raft.snapshot_file import SnapshotFile, check_body, open_body, read_snapshot
from raftsched.raft.snapshotter import Snapshotter, StateCopy

__all__ = ["ProposalError", "RaftNode", "RaftSettings", "StateMachine", "build_conf"]

log = logging.getLogger("raftsched.raft")

#: process exit code when a snapshot (local or streamed from the leader) cannot be loaded
EXIT_BAD_SNAPSHOT = 74
#: process exit code when the log holds a command this code does not understand (a newer version's)
EXIT_UNSUPPORTED_COMMAND = 76


class StateMachine(Protocol):
    """What the adapter replicates (see the module docstring).

    * ``apply`` is deterministic and raises only to stop the replica;
      ``pos`` is the command's position in its entry (entries may carry a
      batch: ``raftsched.raft.batching``), so ``(index, pos)`` names a command; an
      entry at or below ``committed_index`` is skipped (answer None).
    * ``commit()`` after the last command of an entry: the entry and its
      index are one unit in the machine's store. It (or ``apply``) raises an
      exception with ``storage_problem`` (and ``kept``) when the store cannot
      take the entry now (see the module docstring).
    * ``rollback()``: drop what the entry being applied changed; the machine
      is again what its store holds (``committed_index``).
    * ``open_copy()`` (tick thread, between entries): the state at
      ``committed_index``, to be written by another thread.
    * ``install(source, size)``: replace the state with ``size`` bytes of a
      copy read from ``source``; ``restore(blob)``: with a format-2 state blob.
    * ``has_room()`` (any thread): False while a proposal could fill the
      store (``full_message()`` says what to raise).
    """

    @property
    def committed_index(self) -> int: ...

    def apply(self, data: bytes, index: int, pos: int) -> Any: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def open_copy(self) -> StateCopy: ...

    def install(self, source: BinaryIO, size: int) -> None: ...

    def restore(self, data: bytes) -> None: ...

    def has_room(self) -> bool: ...

    def full_message(self) -> str: ...


#: how long the leader keeps the log after a dump it sent, waiting for the follower to install it and answer
INSTALL_GRACE_S = 300.0
#: how often applying entries restarts a follower's election timer (``RaftNode._still_hearing_the_leader``)
ELECTION_NUDGE_S = 0.1


def _stop_replica(index: int, exc: Exception) -> None:
    """The state machine cannot go on (an entry it does not understand, a store it cannot roll back): stop now,
    applying nothing after entry ``index`` (the process exits with the exception's ``exit_code``)."""
    code = int(getattr(exc, "exit_code", EXIT_UNSUPPORTED_COMMAND))
    if code == EXIT_UNSUPPORTED_COMMAND:
        log.critical(
            "stopping this node: %s. Nothing from entry %d on was applied; upgrade this node to a version that "
            "understands it and start it again (its data dir is kept as it is)",
            exc,
            index,
        )
    else:
        log.critical("stopping this node: %s. Nothing from entry %d on was applied (its data dir is kept as it is)", exc, index)
    logging.shutdown()
    os._exit(code)


def _file_id(path: str) -> tuple[int, int, int]:
    st = os.stat(path)
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class _Replica(QuietTicks, QuietHeartbeats, SyncObj):
    def __init__(self, owner: "RaftNode", s: RaftSettings, conf: SyncObjConf) -> None:
        self._owner = owner
        super().__init__(s.self_address, list(s.peer_addresses), conf)
        pysyncobj_patches.cancel_transfers_on_disconnect(self)
        pysyncobj_patches.forget_match_on_dump_sent(self)

    @replicated
    def apply_entry(self, data: bytes) -> Any:
        return self._owner._apply(data, self.raftLastApplied + 1)

    def _SyncObj__applyLogEntries(self) -> bool:  # pysyncobj's private name: see raftsched.raft.apply_hold
        return apply_committed(self, self._owner._hold)

    def _applyCommand(self, command: bytes, callback: Any, commandType: Any = None) -> None:
        owner = self._owner
        problem = owner._disk.problem()
        if problem is not None:
            owner._refuse_loudly(problem)
            self._SyncObj__callErrCallback(DISK_TROUBLE, callback)
            return
        journal = owner._journal
        if journal is not None and not journal.has_room(len(command)):
            owner._refuse_loudly(log_full_message(journal.map_size))
            self._SyncObj__callErrCallback(LOG_FULL, callback)
            return
        if not owner._machine.has_room():
            owner._refuse_loudly(owner._machine.full_message())
            self._SyncObj__callErrCallback(STATE_FULL, callback)
            return
        super()._applyCommand(command, callback, commandType)


class RaftNode:
    """One replica. ``lock`` is held while the state machine applies and commits an entry, so readers holding it
    see whole entries."""

    def __init__(
        self,
        settings: RaftSettings,
        machine: StateMachine,
        lock: threading.RLock,
        after_apply: Callable[[], None] | None = None,
        on_role_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.settings = settings
        self._machine = machine
        self._lock = lock
        self._after_apply = after_apply
        self._on_role_change = on_role_change
        self._loaded_snapshot_index = 0
        self._startup: tuple[tuple[int, int, int], SnapshotFile] | None = None
        self._refused_logged = 0.0
        #: what keeps this replica from writing its disk (``raftsched.raft.disk_trouble``), and the entry it holds back
        self._disk = DiskTrouble()
        self._hold = ApplyHold()
        self._stopping = False
        keep_from = None
        if settings.dump_file is not None and os.path.exists(settings.dump_file):
            snap = read_snapshot(settings.dump_file)  # fail fast on a bad file
            self._catch_up(settings.dump_file, snap)
            self._loaded_snapshot_index = snap.index
            self._startup = (_file_id(settings.dump_file), snap)  # pysyncobj loads it next: only its metadata
            keep_from = snap.entries[1][1]  # the log must start at the snapshot's previous entry
        pysyncobj_patches.install()
        journal = None
        if settings.journal_file is not None:
            journal = LmdbJournal(settings.journal_file, settings.journal_fsync, keep_from, settings.journal_map_size)
            journal.on_trouble = lambda problem: self._disk.set(LOG, problem)
        self._journal = journal
        self._snapshotter = (
            Snapshotter(settings.dump_file, machine.open_copy, settings.snapshot_turn_lock) if settings.dump_file else None
        )
        serializer, deserializer = (self._snapshotter.serialize, self._deserialize) if self._snapshotter else (None, None)
        conf = build_conf(
            settings,
            self._state_changed,
            serializer,
            deserializer,
            journal=journal,
            checker=self._snapshotter.check if self._snapshotter else None,
        )
        self._nudged = 0.0  # the last time applying entries restarted the election timer
        #: keepalives, clock offsets and what each node says of itself, over the Raft links (``raftsched.raft.peer_probe``)
        self.peer_probes = PeerProbes()
        self.peer_probes.own = self._disk_report
        self._replica = _Replica(self, settings, conf)
        self._replica._SyncObj__transport._raftsched_probes = self.peer_probes
        if self._snapshotter is not None:
            self._snapshotter.behind = self._followers_behind
        self._batcher = batching.GroupCommitter(self.propose_async, max_weight=settings.max_batch_weight)
        #: pysyncobj's dynamic membership, leadership transfer and election hold (``raftsched.raft.membership``)
        self.membership = RaftMembership(self._replica, settings.raft_min_timeout)
        self._disk_held = False
        self._replica.addOnTickCallback(self._watch_disk)

    # ---------------------------------------------------------- a disk that refuses writes

    def on_storage(self, hook: Callable[[str | None], None]) -> None:
        """Call ``hook(problem)`` now and whenever what keeps this node from writing its disk changes (``problem``:
        ``raftsched.raft.disk_trouble``'s words, None once it writes again); on the tick thread (keep it short)."""
        self._disk.on_change(hook)

    def _disk_report(self) -> dict[str, Any]:
        problem = self._disk.problem()
        return {DISK_REPORT: problem} if problem else {}

    def storage_problem(self) -> str | None:
        """Why this node cannot write its disk now (any thread); None while it can."""
        return self._disk.problem()

    def _watch_disk(self) -> None:
        """Tick thread, after every tick's commit: while the disk refuses writes, hold elections and step down."""
        trouble = self._disk.problem() is not None
        if trouble != self._disk_held:
            self._disk_held = trouble
            self.membership.hold_elections(trouble, "disk")
        if trouble and self._replica._isLeader():
            log.warning("stepping down: %s", self._disk.problem())
            self._replica._SyncObj__setState(_RAFT_STATE.FOLLOWER)
            self._replica._SyncObj__raftLeader = None

    def _refuse_loudly(self, message: str) -> None:
        now = time.monotonic()
        if now - self._refused_logged > 5.0:  # loud, but not a line per refused proposal
            self._refused_logged = now
            log.error("refusing proposals: %s", message)

    # ---------------------------------------------------------- snapshots

    @property
    def last_snapshot_index(self) -> int:
        if self._snapshotter is not None and self._snapshotter.last_index:
            return self._snapshotter.last_index
        return self._loaded_snapshot_index

    def _catch_up(self, path: str, snap: SnapshotFile) -> None:
        """At start: a state behind this node's snapshot (none yet, set aside, or in the format-2 blob of an older
        version) is loaded from it; a state at or past it is kept as it is (the log after it replays)."""
        held = self._machine.committed_index
        if held < snap.index:
            self._load(path, snap)
            log.info("the state (at index %d) was behind snapshot %s: loaded it (index %d)", held, path, snap.index)

    def _load(self, path: str, snap: SnapshotFile) -> None:
        """Replace the state with the snapshot's (raises ``SnapshotError`` for a damaged one, loading nothing)."""
        started = time.monotonic()
        with self._lock:
            if snap.state is not None:  # format 2: the whole state as one blob, from an older version
                self._machine.restore(snap.state)
            else:
                check_body(path, snap)
                with open_body(path, snap) as body:
                    self._machine.install(body, snap.body_size)
        log.info("loaded the state of snapshot %s (index %d) in %.2f s", path, snap.index, time.monotonic() - started)

    def _install(self, path: str, snap: SnapshotFile) -> None:
        """A snapshot received from the leader replaces the state (tick thread). While the disk refuses the copy, it is
        tried again every ``RETRY_EVERY_S``, the tick thread waiting: pysyncobj answers the leader once this returns,
        and the answer says the log and state start at the snapshot. An entry held back goes with the old state."""
        while True:
            try:
                self._load(path, snap)
                break
            except Exception as exc:
                problem = getattr(exc, "storage_problem", "")
                if not problem:
                    raise
                self._disk.set(STATE, problem)
            if self._stopping:
                log.warning("stopping before the snapshot from the leader could be installed; the next start installs it")
                logging.shutdown()
                os._exit(0)
            time.sleep(disk_trouble.RETRY_EVERY_S)
        self._hold.release()
        self._disk.set(STATE, None)

    def _followers_behind(self, index: int) -> bool:
        """Tick thread, on the leader: whether a connected follower's log matches below ``index``, the dump is being
        sent to one, or one was sent it lately and has not answered past ``index`` yet (pysyncobj's
        ``__raftMatchIndex``, ``__connectedNodes``, its serializer's ``__transmissions``).

        The last: a follower installing a large snapshot answers nothing until it is done (ten seconds at ten
        million jobs), so the leader drops its connection meanwhile; without the wait the leader would compact
        the entries after the dump it sent, and send the whole state again when the follower came back — over
        and over while each transfer and install outlasted the next snapshot (seen with the backlog run).

        A connected follower that says it cannot write its disk (``PeerProbes.disk_stuck``) is not waited for: it
        takes nothing until room returns, and the leader's own log would grow meanwhile."""
        replica = self._replica
        if not replica._isLeader():
            return False
        serializer = replica._SyncObj__serializer
        if serializer._Serializer__transmissions:
            return True
        matched = replica._SyncObj__raftMatchIndex
        if any(matched.get(node, 0) < index for node in pysyncobj_patches.dump_sent_within(serializer, INSTALL_GRACE_S)):
            return True
        connected = replica._SyncObj__connectedNodes
        return any(matched.get(node, 0) < index and not self._disk_stuck(node) for node in connected if node in matched)

    def _disk_stuck(self, node: Any) -> bool:
        probes = getattr(self, "peer_probes", None)  # made after the replica, whose tick thread may come first
        return probes is not None and probes.disk_stuck(str(getattr(node, "id", node)))

    def _deserialize(self, path: str) -> Any:
        """pysyncobj's deserializer (tick thread): at start, the snapshot's metadata (``_catch_up`` already made the
        state cover it); a snapshot received from the leader replaces the state."""
        startup, self._startup = self._startup, None
        try:
            if startup is not None and startup[0] == _file_id(path):
                snap = startup[1]
            else:
                snap = read_snapshot(path)
                if self._snapshotter is not None:
                    self._snapshotter.abandon()  # it would describe a state this node no longer has
                self._install(path, snap)
                self.membership.restart_election_timer()
        except Exception as exc:  # pysyncobj would swallow this and run on with a wrong state
            if getattr(exc, "stops_replica", False):  # e.g. the state of a cluster on a newer command format
                _stop_replica(self._machine.committed_index, exc)
            log.critical("cannot load snapshot %s: %s; stopping this node", path, exc)
            logging.shutdown()
            os._exit(EXIT_BAD_SNAPSHOT)
        self._loaded_snapshot_index = snap.index
        return (snap.entries[0], snap.entries[1], [TCPNode(address) for address in snap.cluster])

    # ---------------------------------------------------------- apply path

    def _apply(self, data: bytes, index: int) -> Any:
        with self._lock:
            kept = self._hold.kept(index)
            result = kept.result if kept is not None else self._apply_commands(data, index)
            try:
                self._machine.commit()
            except Exception as exc:  # the entry is not in the store: nothing may follow it
                self._hold_back(index, result, exc)
        if self._hold.held is not None:
            self._hold.release()
            self._disk.set(STATE, None)
        if self._after_apply is not None:
            try:
                self._after_apply()
            except Exception:
                log.exception("after-apply hook failed")
        self._still_hearing_the_leader()
        return result

    def _apply_commands(self, data: bytes, index: int) -> Any:
        if not batching.is_batch(data):
            return self._apply_one(data, index, 0)
        try:
            commands = batching.unpack(data)
        except batching.BatchFormatError as exc:
            log.error("entry %d is a damaged batch (%s); it is skipped", index, exc)
            commands = []
        return [self._apply_one(cmd, index, pos) for pos, cmd in enumerate(commands)]

    def _hold_back(self, index: int, result: Any, exc: Exception) -> None:
        """The store refused entry ``index`` (``exc``): hold it (``raftsched.raft.apply_hold``) and raise ``EntryHeld`` — or stop
        the replica if the failure is not the disk's. Tick thread, under the lock."""
        problem = getattr(exc, "storage_problem", "")
        if not problem:
            _stop_replica(index, exc)
        kept = bool(getattr(exc, "kept", False))
        if not kept:
            try:
                self._machine.rollback()
            except Exception as failed:  # the machine no longer knows what it holds: it cannot go on
                _stop_replica(index, failed)
        first = self._hold.held is None
        self._hold.hold(index, result, kept)
        self._disk.set(STATE, problem)
        if first:
            log.warning("entry %d is held until the state can store it (tried every %g s)", index, disk_trouble.RETRY_EVERY_S)
        raise EntryHeld(problem)

    def _still_hearing_the_leader(self) -> None:
        """Tick thread, after each entry applied: a follower busy applying what its leader sent it has heard
        from a leader; its election timer starts again (every ``ELECTION_NUDGE_S``).

        pysyncobj looks at the election deadline at the start of a tick, before it reads what came meanwhile.
        Its own apply took every committed entry in one tick: a follower that had tens of thousands of entries
        to apply — a node rebuilt from the leader's snapshot catching up with the log after it, 34,000 entries
        in the 10M-job run — spent longer than an election timeout applying them, then campaigned with the
        leader's heartbeats waiting unread: the leader stepped down and was elected again (pysyncobj has no
        pre-vote), twice, and the run fired 300 ms late. A tick now applies for ``APPLY_BUDGET_S`` at most
        (``raftsched.raft.apply_hold``); one entry may still take longer (a large batch), which this covers."""
        now = time.monotonic()
        membership = getattr(self, "membership", None)  # entries may be applied while __init__ still runs
        if membership is None or now - self._nudged < ELECTION_NUDGE_S:
            return
        self._nudged = now
        if not self._replica._isLeader():
            membership.restart_election_timer()

    def _apply_one(self, data: bytes, index: int, pos: int) -> Any:
        try:
            return self._machine.apply(data, index, pos)
        except Exception as exc:  # never let pysyncobj retry an entry forever
            if getattr(exc, "storage_problem", ""):
                self._hold_back(index, None, exc)
            if getattr(exc, "stops_replica", False):
                _stop_replica(index, exc)
            log.exception("state machine raised on entry %d (command %d); the command is skipped", index, pos)
            return None

    def _state_changed(self, old: int, new: int) -> None:
        if self._on_role_change is not None:
            self._on_role_change(new == 2)  # _RAFT_STATE.LEADER

    # ---------------------------------------------------------- proposals

    def propose_async(self, data: bytes, callback: Callable[[Any, int], None]) -> None:
        """Propose; ``callback(result, fail_reason)`` runs on the tick thread (keep it short)."""
        self._replica.apply_entry(data, callback=callback)

    def propose(self, data: bytes, timeout: float, weight: int = 0) -> Any:
        """Propose and wait until this node applied it; returns what ``apply`` returned. Raises ``ProposalError``.

        Concurrent proposals are group-committed (``raftsched.raft.batching``): several
        may share one entry. ``weight`` counts against the batch's weight limit.
        """
        answer = self.propose_many([(data, weight)], timeout)[0]
        if isinstance(answer, ProposalError):
            raise answer
        return answer

    def propose_many(self, proposals: list[tuple[bytes, int]], timeout: float) -> list[Any]:
        """``propose`` for several ``(data, weight)`` at once: what each applied to, or its ``ProposalError``."""
        out: list[Any] = []
        for answer in self._batcher.submit_many(proposals, timeout):
            if isinstance(answer, batching.Timeout):
                out.append(proposal_errors.timed_out(answer.proposed))
                continue
            result, error = answer
            if error != FAIL_REASON.SUCCESS:
                out.append(
                    proposal_errors.failed(
                        error, self.settings.journal_map_size, self._machine.full_message, self._disk.problem()
                    )
                )
            else:
                out.append(result)
        return out

    # ---------------------------------------------------------- status

    def is_leader(self) -> bool:
        return bool(self._replica._isLeader())

    def leader_address(self) -> str | None:
        leader = self._replica._getLeader()
        return None if leader is None else str(leader.id if hasattr(leader, "id") else leader)

    def status(self) -> dict[str, Any]:
        return dict(self._replica.getStatus())

    def is_connected(self, address: str) -> bool:
        for node in self._replica.otherNodes:
            if node.id == address:
                return bool(self._replica.isNodeConnected(node))
        return False

    @property
    def applied_index(self) -> int:
        return int(self._replica.raftLastApplied)

    @property
    def commit_index(self) -> int:
        return int(self._replica.raftCommitIndex)

    @property
    def term(self) -> int:
        return int(self._replica.raftCurrentTerm)

    def has_quorum(self) -> bool:
        """Whether this node is connected to a majority of the members (itself included): pysyncobj's view.
        Read off the tick thread, which may change the sets it looks at meanwhile: then it looks again."""
        for _ in range(3):
            try:
                return bool(self._replica.hasQuorum)
            except RuntimeError:  # "Set changed size during iteration"
                continue
        return False

    def on_snapshot(self, hook: Callable[[int, float], None]) -> None:
        """Call ``hook(index, seconds)`` on the tick thread after each snapshot this node writes (keep it short)."""
        if self._snapshotter is not None:
            self._snapshotter.on_written = hook

    def on_log_commit(self, hook: Callable[[float], None]) -> None:
        """Call ``hook(seconds)`` on the tick thread after each commit of the Raft log (fsynced unless
        ``journal_fsync`` is off): how long the disk takes to make entries durable (keep it short)."""
        if self._journal is not None:
            self._journal.on_commit = hook

    def force_snapshot(self) -> None:
        self._replica.forceLogCompaction()

    @property
    def snapshot_path(self) -> str | None:
        """The snapshot file (``None`` without one): read it through an open descriptor, it is replaced whole."""
        return self.settings.dump_file

    def stop(self) -> None:
        """Stop Raft and wait for its tick thread (and a snapshot being written): the state is then left alone."""
        self._stopping = True
        self._replica.destroy()
        thread = getattr(self._replica, "_SyncObj__thread", None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)
        if self._snapshotter is not None:
            self._snapshotter.abandon()
