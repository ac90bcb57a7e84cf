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
  raises (a raise would be retried forever on every replica).
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
  (``raft.membership``); the cluster in a snapshot is handed back to
  pysyncobj as ``TCPNode`` objects, which it compares with its own node when
  it loads the snapshot (plain address strings would make it count itself as
  a peer).
* A state machine that raises an exception marked ``stops_replica = True``
  (a command this code does not understand; a state store that cannot
  write) stops the process with its ``exit_code`` (default
  ``EXIT_UNSUPPORTED_COMMAND``) before anything after it is applied:
  skipping the entry would let this replica diverge from the others.
* The state machine keeps its state in a store of its own and commits each
  entry there with the entry's index (``commit``): an entry at or below its
  ``committed_index`` is already in it (a restart replays the log from the
  snapshot on, and the machine skips what it holds). Every entry is
  committed before pysyncobj calls back its proposer (and a read barrier's),
  so a reader who heard of an entry sees it.
* Snapshots (``raft.snapshotter``) are copies of that state at the applied
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
  (``raft.snapshotter`` waits for them).
* The rest of what we change in pysyncobj is in ``raft.pysyncobj_patches``,
  installed explicitly when a node is built.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Protocol

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated
from pysyncobj.journal import Journal
from pysyncobj.node import TCPNode

from raft import batching, pysyncobj_patches
from raft.errors import RaftError
from raft.lmdb_journal import MAP_SIZE, LmdbJournal
from raft.membership import RaftMembership
from raft.peer_probe import PeerProbes
from raft.snapshot_file import SnapshotFile, check_body, open_body, read_snapshot
from raft.snapshotter import Snapshotter, StateCopy

log = logging.getLogger("raftsched.raft")

#: process exit code when a snapshot (local or streamed from the leader) cannot be loaded
EXIT_BAD_SNAPSHOT = 74
#: process exit code when the log holds a command this code does not understand (a newer version's)
EXIT_UNSUPPORTED_COMMAND = 76


class StateMachine(Protocol):
    """What the adapter replicates (see the module docstring).

    * ``apply`` is deterministic and raises only to stop the replica;
      ``pos`` is the command's position in its entry (entries may carry a
      batch: ``raft.batching``), so ``(index, pos)`` names a command; an
      entry at or below ``committed_index`` is skipped (answer None).
    * ``commit()`` after the last command of an entry: the entry and its
      index are one unit in the machine's store.
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

    def open_copy(self) -> StateCopy: ...

    def install(self, source: BinaryIO, size: int) -> None: ...

    def restore(self, data: bytes) -> None: ...

    def has_room(self) -> bool: ...

    def full_message(self) -> str: ...


class ProposalError(RaftError):
    """A proposal did not (visibly) commit. ``reason`` is a FAIL_REASON name or 'TIMEOUT'."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


#: how long the leader keeps the log after a dump it sent, waiting for the follower to install it and answer
INSTALL_GRACE_S = 300.0
#: how often applying entries restarts a follower's election timer (``RaftNode._still_hearing_the_leader``)
ELECTION_NUDGE_S = 0.1
#: our own fail reasons: the Raft log (LMDB map) of this node or of the leader has no room; the state has none
LOG_FULL = 100
STATE_FULL = 101
_REASONS = {v: k for k, v in vars(FAIL_REASON).items() if isinstance(v, int)}
_REASONS[LOG_FULL] = "LOG_FULL"
_REASONS[STATE_FULL] = "STATE_FULL"

_MESSAGES = {
    "MISSING_LEADER": "no Raft leader is known right now (an election may be under way); retry shortly",
    "NOT_LEADER": "the node the command was forwarded to is no longer the leader; retry",
    "LEADER_CHANGED": "the leader changed before the command committed; retry",
    "DISCARDED": "the command was overwritten by a new leader's log and did not commit; retry",
    "QUEUE_FULL": "the node's command queue is full; retry with backoff",
    "REQUEST_DENIED": "the leader refused the command",
    "UNKNOWN_OUTCOME": "the command's outcome is unknown; it may or may not have committed",
    "NOT_SENT": "the command could not be proposed in time (this node is overloaded or cannot reach Raft); it did not commit: retry",
    "TIMEOUT": (
        "the command did not commit in time (no leader or no quorum?); it may still commit later: "
        "retry (with the same idempotency key, so a retry cannot act twice)"
    ),
}


@dataclass(frozen=True)
class RaftSettings:
    """Where this replica listens and whom it talks to, and its tuning."""

    self_address: str
    peer_addresses: tuple[str, ...]
    #: where the Raft port listens (``host:port``); None = ``self_address``, never every interface
    listen_address: str | None = None
    #: the Raft log: an LMDB environment directory (``raft.lmdb``); None keeps it in memory only
    journal_file: str | None = None
    #: fsync the log, term and vote before anything depends on them (survives power loss); False only
    #: hands them to the OS (survives SIGKILL)
    journal_fsync: bool = True
    #: the log's LMDB map size: the most the log may hold
    journal_map_size: int = MAP_SIZE
    dump_file: str | None = None
    #: snapshot writers given the same lock file write one at a time (``raft.snapshot_turns``); None: no turns
    snapshot_turn_lock: str | None = None
    password: str | None = None
    #: raft timers (seconds); pysyncobj's defaults are too slow or too twitchy here
    append_entries_period: float = 0.01
    auto_tick_period: float = 0.005
    raft_min_timeout: float = 0.8
    raft_max_timeout: float = 1.6
    leader_fallback_timeout: float = 2.0
    connection_retry_time: float = 0.5
    connection_timeout: float = 3.5
    log_compaction_min_entries: int = 200_000
    log_compaction_min_time: float = 600.0
    extra: dict[str, Any] = field(default_factory=dict)


Serializer = Callable[[str, Any], None]
Deserializer = Callable[[str], Any]


def build_conf(
    s: RaftSettings,
    on_state_changed: Callable[[int, int], None] | None,
    serializer: Serializer | None,
    deserializer: Deserializer | None,
    journal: Journal | None = None,
    checker: Callable[[], int] | None = None,
) -> SyncObjConf:
    """The one place raftsched settings become a ``SyncObjConf``.

    ``journal`` (an open ``LmdbJournal``) rides in ``journalFile``: our
    ``createJournal`` hook hands it to pysyncobj as it is. Installs the
    pysyncobj patches, which such a conf relies on.
    """
    pysyncobj_patches.install()
    kwargs: dict[str, Any] = dict(
        password=s.password,
        bindAddress=_bind_address(s.listen_address or s.self_address),
        autoTickPeriod=s.auto_tick_period,
        appendEntriesPeriod=s.append_entries_period,
        raftMinTimeout=s.raft_min_timeout,
        raftMaxTimeout=s.raft_max_timeout,
        leaderFallbackTimeout=s.leader_fallback_timeout,
        connectionRetryTime=s.connection_retry_time,
        connectionTimeout=max(s.connection_timeout, s.raft_max_timeout),
        commandsWaitLeader=False,
        dynamicMembershipChange=True,
        logCompactionMinEntries=s.log_compaction_min_entries,
        logCompactionMinTime=s.log_compaction_min_time,
        journalFile=journal if journal is not None else s.journal_file,
        fullDumpFile=s.dump_file,
        onStateChanged=on_state_changed,
        appendEntriesBatchSizeBytes=2**18,
        sendBufferSize=2**20,
        recvBufferSize=2**20,
        serializer=serializer,
        deserializer=deserializer,
        serializeChecker=checker,
    )
    kwargs.update(s.extra)
    return SyncObjConf(**kwargs)


def _bind_address(address: str) -> str:
    """``host:port`` as pysyncobj's server wants it: an IPv6 host without brackets."""
    host, port = address.rsplit(":", 1)
    return f"{host.strip('[]')}:{port}"


def log_full_message(map_size: int) -> str:
    return (
        f"the Raft log is full: its LMDB map ([raft] max_log_bytes = {map_size} bytes, {map_size / (1 << 20):.0f} MiB) "
        "has no room for this command on this node or on the leader; nothing was written. Raise [raft] max_log_bytes "
        "on every node and restart them one at a time (or snapshot sooner: [raft] snapshot_min_entries)"
    )


def _stop_replica(index: int, exc: Exception) -> None:
    """The state machine cannot go on (an entry it does not understand, a store that cannot write): stop now,
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


class _Replica(SyncObj):
    def __init__(self, owner: "RaftNode", s: RaftSettings, conf: SyncObjConf) -> None:
        self._owner = owner
        super().__init__(s.self_address, list(s.peer_addresses), conf)
        pysyncobj_patches.cancel_transfers_on_disconnect(self)
        pysyncobj_patches.forget_match_on_dump_sent(self)

    @replicated
    def apply_entry(self, data: bytes) -> Any:
        return self._owner._apply(data, self.raftLastApplied + 1)

    def _applyCommand(self, command: bytes, callback: Any, commandType: Any = None) -> None:
        owner = self._owner
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
        #: keepalives, clock offsets and what each node says of itself, over the Raft links (``raft.peer_probe``)
        self.peer_probes = PeerProbes()
        self._replica = _Replica(self, settings, conf)
        self._replica._SyncObj__transport._raftsched_probes = self.peer_probes
        if self._snapshotter is not None:
            self._snapshotter.behind = self._followers_behind
        self._batcher = batching.GroupCommitter(self.propose_async)
        #: pysyncobj's dynamic membership, leadership transfer and election hold (``raft.membership``)
        self.membership = RaftMembership(self._replica, settings.raft_min_timeout)

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

    def _followers_behind(self, index: int) -> bool:
        """Tick thread, on the leader: whether a connected follower's log matches below ``index``, the dump is being
        sent to one, or one was sent it lately and has not answered past ``index`` yet (pysyncobj's
        ``__raftMatchIndex``, ``__connectedNodes``, its serializer's ``__transmissions``).

        The last: a follower installing a large snapshot answers nothing until it is done (ten seconds at ten
        million jobs), so the leader drops its connection meanwhile; without the wait the leader would compact
        the entries after the dump it sent, and send the whole state again when the follower came back — over
        and over while each transfer and install outlasted the next snapshot (seen with the backlog run)."""
        replica = self._replica
        if not replica._isLeader():
            return False
        serializer = replica._SyncObj__serializer
        if serializer._Serializer__transmissions:
            return True
        matched = replica._SyncObj__raftMatchIndex
        if any(matched.get(node, 0) < index for node in pysyncobj_patches.dump_sent_within(serializer, INSTALL_GRACE_S)):
            return True
        return any(matched.get(node, 0) < index for node in replica._SyncObj__connectedNodes if node in matched)

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
                self._load(path, snap)
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
            if batching.is_batch(data):
                try:
                    commands = batching.unpack(data)
                except batching.BatchFormatError as exc:
                    log.error("entry %d is a damaged batch (%s); it is skipped", index, exc)
                    commands = []
                result: Any = [self._apply_one(cmd, index, pos) for pos, cmd in enumerate(commands)]
            else:
                result = self._apply_one(data, index, 0)
            try:
                self._machine.commit()
            except Exception as exc:  # the entry is not in the store: nothing may follow it
                _stop_replica(index, exc)
        if self._after_apply is not None:
            try:
                self._after_apply()
            except Exception:
                log.exception("after-apply hook failed")
        self._still_hearing_the_leader()
        return result

    def _still_hearing_the_leader(self) -> None:
        """Tick thread, after each entry applied: a follower busy applying what its leader sent it has heard
        from a leader; its election timer starts again (every ``ELECTION_NUDGE_S``).

        pysyncobj applies every committed entry in one tick and looks at the election deadline at the start
        of the next, before it reads what came meanwhile. A follower that had tens of thousands of entries to
        apply — a node rebuilt from the leader's snapshot catching up with the log after it, 34,000 entries
        in the 10M-job run — spent longer than an election timeout applying them, then campaigned with the
        leader's heartbeats waiting unread: the leader stepped down and was elected again (pysyncobj has no
        pre-vote), twice, and the run fired 300 ms late."""
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

        Concurrent proposals are group-committed (``raft.batching``): several
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
                out.append(ProposalError("TIMEOUT", _MESSAGES["TIMEOUT" if answer.proposed else "NOT_SENT"]))
                continue
            result, error = answer
            if error != FAIL_REASON.SUCCESS:
                reason = _REASONS.get(error, "NOT_SENT" if error == -1 else str(error))
                if reason == "LOG_FULL":
                    message = log_full_message(self.settings.journal_map_size)
                elif reason == "STATE_FULL":
                    message = self._machine.full_message()
                else:
                    message = _MESSAGES.get(reason, f"the command failed: {reason}")
                out.append(ProposalError(reason, message))
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
        self._replica.destroy()
        thread = getattr(self._replica, "_SyncObj__thread", None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)
        if self._snapshotter is not None:
            self._snapshotter.abandon()
