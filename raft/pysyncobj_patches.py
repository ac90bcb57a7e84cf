"""What raftsched changes inside pysyncobj 0.3.17, installed by one explicit, idempotent call.

``install()`` runs when a ``RaftNode`` is built (and from ``build_conf``,
whose conf relies on it); importing this module changes nothing. Each patch
replaces one module-level name pysyncobj looks up at call time; re-check
each on a pysyncobj upgrade:

* ``syncobj.createJournal``: also accepts an already open journal object
  (our ``LmdbJournal`` rides in ``conf.journalFile``).
* ``syncobj.getEncryptor``: ``raftsched.raft.cipher.RaftCipher`` instead of Fernet.
* ``transport.TcpConnection`` and ``tcp_server.TcpConnection``:
  ``raftsched.raft.connection.RaftConnection`` (per-connection keys, bounded reads).
* ``serializer.atomicReplace``: ``durable_replace``, so a snapshot received
  from the leader (written to ``<dump>.1.tmp``, then renamed) is fsynced,
  ``0600``, and its directory fsynced before it replaces anything (the old
  dump is freed in the background, not on the tick thread). A
  snapshot this node writes is written in the background
  (``raftsched.raft.snapshotter``) and leaves no ``<dump>.tmp``: with none, pysyncobj's
  rename right after the serializer returns does nothing (the checker puts
  the snapshot in place once it is written). A snapshot received from the
  leader is checked first (header, size, checksum): a damaged one is not
  renamed, pysyncobj drops it (``setTransmissionData`` answers False), the
  follower keeps its state and answers the leader's next entries with a
  mismatch, and the leader sends its snapshot again.
* ``Serializer.getTransmissionData``: pysyncobj pauses sending the dump to a
  follower while it writes a snapshot (it wrote the dump in place, in a
  forked child); ours are written beside it and renamed whole, so sending
  goes on (the leader otherwise spun sending empty snapshot messages for as
  long as a snapshot took to write). Each piece it hands out carries its
  offset in the file (``_PIECE_MARK`` + 8 bytes), and
  ``Serializer.setTransmissionData`` on the follower checks it: a piece lost
  on the way (pysyncobj goes on with the next one when a connection drops
  and comes back between two sends) drops the transfer there, instead of a
  whole file being written short and refused at its end. The leader starts
  a transfer over when the connection to its follower drops
  (``cancel_transfers_on_disconnect``). Pieces without the mark (a node of an
  older version) pass unchecked. When a transfer starts, the node's match
  index goes back to 0 (``forget_match_on_dump_sent``), and the dump is read
  ahead of the tick thread (``raftsched.storage.disk.paced_io.ReadAhead``); the follower syncs
  what it receives every few MiB (``raftsched.storage.disk.paced_io.PacedWrites``).
* ``TCPTransport.send``: the journal's open transaction is committed (with
  fsync by default) before any Raft message leaves the node, except
  forwarded commands and their index replies, which promise nothing about
  the log. So a vote, an AppendEntries answer, or an AppendEntries that a
  follower could acknowledge never leaves before the log, term and vote it
  depends on are on disk. While the journal is not durable (a commit the
  disk refused: ``LmdbJournal.durable``) no such message leaves at all: it
  is dropped, as a lost message would be (pysyncobj sends again what a
  peer still needs). Probes (``raftsched.raft.peer_probe``) are sent on the
  connections directly and go on, so peers keep hearing this node and what
  it says of its disk.
* ``socket.inet_ntop``: importing pysyncobj replaces it, on every OS, with
  a Windows-only function that raises (``win_inet_pton``); the C original
  is put back.
* ``TCPTransport._onTick`` (pysyncobj calls it at the end of every tick,
  before waiting for the network): commits the journal too, so a leader
  counts its own log towards a majority only after it is on disk (its
  commit index is computed at the start of the next tick), drops
  connections that broke their bounds (``RaftConnection.sweep``), and
  probes the connected peers (``raftsched.raft.peer_probe``).
* ``TCPTransport._onMessageReceived`` (every message from an identified
  peer passes through it): probes and their answers are consumed by
  ``raftsched.raft.peer_probe`` before pysyncobj sees them. While the journal is not
  durable, AppendEntries are still taken (the entries wait in memory with
  the rest, unacknowledged; committed ones are applied), so that once a
  commit succeeds the log is where the leader thinks it is; past
  ``UNWRITTEN_MAX`` bytes of entries waiting they are dropped unread, and
  the leader, finding the log shorter than it thought, sends the rest
  later. Entries the log's map has no room for (``LogFullError``) end that
  AppendEntries there, unanswered, rather than the whole tick. An
  AppendEntries from a leader this node follows is first trimmed of the
  entries the log already holds (``raftsched.raft.log_overlap``): pysyncobj
  would delete every entry past ``prevLogIdx``, matching ones too, where
  Raft deletes only from a conflict; when all of them match and the log goes
  further, it is acknowledged here, up to the last entry the leader sent.
* ``TcpServer.__onNewConnection``: pysyncobj's closes the listening socket
  for good on any error while accepting (a peer that reset its connect
  before it was accepted, a process out of file descriptors), after which
  no peer can ever connect to this node again; ours drops that one
  connection, logs why, and goes on listening (and accepts every pending
  connection, not one per poll).

A commit that fails (a full disk or map, an I/O error) does not stop the
process: no acknowledgement may follow a write that is not on disk, so
nothing that depends on the log leaves until the journal has committed
every change again (``raftsched.raft.lmdb_journal``: it never trusts the failed
commit, it redoes the changes in a fresh transaction). Only a log the file
no longer holds as last committed (damaged) stops it
(``EXIT_LOG_WRITE_FAILED``).
"""

from __future__ import annotations

import _socket
import logging
import os
import socket
import struct
import time
from typing import Any

import pysyncobj.serializer as _serializer_module
import pysyncobj.syncobj as _syncobj_module
import pysyncobj.tcp_server as _tcp_server_module
import pysyncobj.transport as _transport_module
from pysyncobj.journal import Journal
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import CONNECTION_STATE

from raftsched.raft import log_overlap
from raftsched.raft.cipher import cipher_factory
from raftsched.raft.connection import RaftConnection
from raftsched.raft.lmdb_journal import LmdbJournal, LogFullError
from raftsched.raft.snapshot_file import SnapshotError, check_body, read_snapshot
from raftsched.storage.disk.durable_files import durable_replace
from raftsched.storage.disk.paced_io import SYNC_EVERY, PacedWrites, ReadAhead

log = logging.getLogger("raftsched.raft")

#: process exit code when the Raft log on disk is found damaged after a commit failed
EXIT_LOG_WRITE_FAILED = 75
#: while the journal is not durable, AppendEntries are dropped once this many bytes of entries wait in memory
UNWRITTEN_MAX = 64 << 20
#: message types that carry no Raft state of this node: no commit needed before they leave
_NO_COMMIT_NEEDED = frozenset({"apply_command", "apply_command_response"})
_ORIGINAL_CREATE_JOURNAL = _syncobj_module.createJournal
_ORIGINAL_SEND = _transport_module.TCPTransport.send
_ORIGINAL_ON_TICK = _transport_module.TCPTransport._onTick
_ORIGINAL_ON_MESSAGE = _transport_module.TCPTransport._onMessageReceived
_ORIGINAL_TRANSMISSION_DATA = _serializer_module.Serializer.getTransmissionData
_ORIGINAL_SET_TRANSMISSION_DATA = _serializer_module.Serializer.setTransmissionData
#: starts a piece of a snapshot sent by this version: the piece's offset in the file follows (8 bytes)
_PIECE_MARK = b"RSPIECE\x00"
_OFFSET = struct.Struct(">Q")
_PIECE_HEAD = len(_PIECE_MARK) + _OFFSET.size
#: a snapshot received is synced every this many bytes, pausing the tick thread at most this long after
#: each sync (``raftsched.storage.disk.paced_io``): the leader's next pieces wait meanwhile, nothing else does
RECEIVE_SYNC_EVERY, RECEIVE_MAX_YIELD_S = SYNC_EVERY, 0.05


def _create_journal(journal_file: Any) -> Any:
    if isinstance(journal_file, Journal):
        return journal_file
    return _ORIGINAL_CREATE_JOURNAL(journal_file)


def _journal(transport: Any) -> LmdbJournal | None:
    journal = getattr(transport._syncObj.conf, "journalFile", None)
    return journal if isinstance(journal, LmdbJournal) else None


def _commit(transport: Any) -> bool:
    """Commit the journal on the tick thread, which it groups changes for from now on (a failed commit is kept and
    retried: ``LmdbJournal.commit``); whether every change is durable."""
    journal = _journal(transport)
    if journal is None:
        return True
    try:
        journal.bind_thread()
        journal.commit()
    except Exception as exc:
        log.critical("cannot commit the Raft log: %s; stopping this node (nothing it did not write is acknowledged)", exc)
        logging.shutdown()
        os._exit(EXIT_LOG_WRITE_FAILED)
    return journal.durable


def _atomic_replace(src: str, dst: str) -> None:
    if src == dst + ".tmp" and not os.path.lexists(src):
        return  # a snapshot written in the background: raftsched.raft.snapshotter renames it when it is done
    if src == dst + ".1.tmp":  # a snapshot received from the leader: never in place unless whole
        try:
            check_body(src, read_snapshot(src))
        except SnapshotError as exc:
            log.warning("the snapshot received from the leader is refused (%s); it will be sent again", exc)
            raise
    durable_replace(src, dst, free_old_later=True)  # the old dump is freed off the tick thread


def _transmission_data(self: Any, transmission_id: Any) -> Any:
    transmission = self._Serializer__transmissions.get(transmission_id)
    offset = transmission["transmitted"] if transmission is not None else 0
    pid = self._Serializer__pid
    self._Serializer__pid = 0  # our snapshots never write the dump in place (see the module docstring)
    try:
        out = _ORIGINAL_TRANSMISSION_DATA(self, transmission_id)
    finally:
        self._Serializer__pid = pid
    if not out:
        return out
    sent = getattr(self, "_raftsched_sent_at", None)
    if sent is None:
        sent = self._raftsched_sent_at = {}
    sent[transmission_id] = time.monotonic()
    if offset == 0:
        _read_ahead(self, transmission_id)
        on_dump_sent = getattr(self, "_raftsched_on_dump_sent", None)
        if on_dump_sent is not None:
            on_dump_sent(transmission_id)
    piece, first, last = out
    return (_PIECE_MARK + _OFFSET.pack(offset) + piece, first, last)


def _read_ahead(serializer: Any, transmission_id: Any) -> None:
    """Read the dump being sent ahead of the tick thread, in a thread of its own, while that transfer lasts."""
    transmissions = serializer._Serializer__transmissions
    transmission = transmissions.get(transmission_id)
    if transmission is None or "file" not in transmission:
        return  # the whole dump went in one piece, or it is held in memory
    try:
        ReadAhead(
            transmission["file"].fileno(),
            consumed=lambda: int(transmission["transmitted"]),
            alive=lambda: transmissions.get(transmission_id) is transmission,
            name=f"read-ahead-{getattr(transmission_id, 'id', transmission_id)}",
        )
    except OSError as exc:  # only an optimisation
        log.debug("cannot read the dump ahead: %s", exc)


def dump_sent_within(serializer: Any, seconds: float) -> list[Any]:
    """The nodes this serializer handed a piece of its dump to in the last ``seconds`` (tick thread)."""
    sent: dict[Any, float] = getattr(serializer, "_raftsched_sent_at", None) or {}
    since = time.monotonic() - seconds
    for node in [n for n, at in sent.items() if at < since]:
        del sent[node]
    return list(sent)


def _set_transmission_data(self: Any, data: Any) -> bool:
    if not data:
        return bool(_ORIGINAL_SET_TRANSMISSION_DATA(self, data))
    piece, first, last = data
    if isinstance(piece, bytes) and piece[: len(_PIECE_MARK)] == _PIECE_MARK:
        (offset,) = _OFFSET.unpack_from(piece, len(_PIECE_MARK))
        piece = piece[_PIECE_HEAD:]
        expected = 0 if first else getattr(self, "_raftsched_received", None)
        if offset != expected:
            if expected is not None:  # None: a transfer already dropped, until the leader starts again
                log.warning(
                    "a piece of the snapshot from the leader was lost on the way (byte %d came, %d was due): "
                    "this transfer is dropped and the leader sends the snapshot again",
                    offset,
                    expected,
                )
            _drop_incoming(self)
            return False
        self._raftsched_received = None if last else offset + len(piece)
    if first:
        # synced as it comes, kept in the page cache: it is checked and installed next
        self._raftsched_paced = PacedWrites(RECEIVE_SYNC_EVERY, max_yield_s=RECEIVE_MAX_YIELD_S)
    done = bool(_ORIGINAL_SET_TRANSMISSION_DATA(self, (piece, first, last)))
    incoming = self._Serializer__incomingTransmissionFile
    paced = getattr(self, "_raftsched_paced", None)
    if hasattr(incoming, "fileno") and paced is not None and isinstance(piece, bytes):
        try:
            incoming.flush()
            paced.wrote(incoming.fileno(), len(piece))
        except OSError as exc:  # a full or failing disk: the leader sends the snapshot again later
            log.warning("cannot write the snapshot received from the leader (%s); it will be sent again", exc)
            _drop_incoming(self)
            return False
    return done


def _drop_incoming(serializer: Any) -> None:
    incoming = serializer._Serializer__incomingTransmissionFile
    if incoming is not None:
        name = getattr(incoming, "name", None)
        try:
            incoming.close()
        except OSError:  # its last buffered bytes could not be written: the file goes anyway
            pass
        if isinstance(name, str):
            _remove_quietly(name)  # a dropped transfer must not keep the space it took
    serializer._Serializer__incomingTransmissionFile = None
    serializer._raftsched_received = None


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def cancel_transfers_on_disconnect(replica: Any) -> None:
    """When the connection to a node drops, the snapshot being sent to it starts over on the next
    connection (pysyncobj would go on from the piece after the one that was lost with the connection)."""
    transport = replica._SyncObj__transport
    serializer = replica._SyncObj__serializer
    on_disconnected = transport._onNodeDisconnectedCallback

    def disconnected(node: Any) -> None:
        serializer.cancelTransmisstion(node)
        if on_disconnected is not None:
            on_disconnected(node)

    transport.setOnNodeDisconnectedCallback(disconnected)


def forget_match_on_dump_sent(replica: Any) -> None:
    """When the leader starts sending its dump to a node, that node's match index goes back to 0.

    pysyncobj only ever raises a match index. A node whose data was wiped comes back with an empty log,
    but the leader still holds the index it matched before: it would count that node towards a majority
    for entries it no longer has, and take it for caught up (the snapshot hold in ``raftsched.raft.adapter``) while
    it is still installing the dump — in the 10M-job run the leader then compacted the entries after the
    dump it had just sent, and sent the whole state again. A node sent the dump holds nothing the leader
    can count on until it answers again."""
    matched = replica._SyncObj__raftMatchIndex

    def dump_sent(node: Any) -> None:
        if node in matched:
            matched[node] = 0

    replica._SyncObj__serializer._raftsched_on_dump_sent = dump_sent


def _send(self: Any, node: Any, message: Any) -> bool:
    if not (isinstance(message, dict) and message.get("type") in _NO_COMMIT_NEEDED) and not _commit(self):
        return False  # the log it depends on is not on disk: dropped (see the module docstring)
    return bool(_ORIGINAL_SEND(self, node, message))


def _on_tick(self: Any) -> None:
    _ORIGINAL_ON_TICK(self)
    for conn in list(self._unknownConnections) + list(self._connections.values()):
        sweep = getattr(conn, "sweep", None)
        if sweep is not None:
            sweep()
    probes = getattr(self, "_raftsched_probes", None)
    if probes is not None:
        probes.tick(self._connections, self._syncObj.isNodeConnected, CONNECTION_STATE.CONNECTED)
    _commit(self)


def _on_message(self: Any, node: Any, message: Any) -> None:
    probes = getattr(self, "_raftsched_probes", None)
    if probes is not None and probes.on_message(node, message, self._connections.get(node), CONNECTION_STATE.CONNECTED):
        return
    if not (isinstance(message, dict) and message.get("type") == "append_entries"):
        _ORIGINAL_ON_MESSAGE(self, node, message)
        return
    journal = _journal(self)
    if journal is not None and not journal.durable and journal.unwritten_bytes > UNWRITTEN_MAX:
        return  # no more held in memory while the log cannot be written (see the module docstring)
    syncobj = self._syncObj
    vouched = None
    if "prevLogIdx" in message and message.get("term", -1) >= syncobj._SyncObj__raftCurrentTerm:
        joined = None
        if "transmission" in message:
            pieces = getattr(self, "_raftsched_pieces", None)
            if pieces is None:
                pieces = self._raftsched_pieces = log_overlap.Pieces()
            joined = pieces.feed(message)
        vouched = log_overlap.trim(message, journal if journal is not None else log_overlap.SyncObjLog(syncobj), joined)
    try:
        _ORIGINAL_ON_MESSAGE(self, node, message)
    except LogFullError:  # the log's map has no room for the leader's entries: said by the journal (its problem)
        log.debug("the Raft log has no room for the entries from %s; they are sent again later", node)
        return
    if vouched is not None:  # every entry was already here and the log goes further: acknowledged up to them
        syncobj._SyncObj__sendNextNodeIdx(node, nextNodeIdx=vouched + 1, success=True)


def _on_new_connection(self: Any, descr: int, event: int) -> None:
    """``TcpServer.__onNewConnection``: accept every pending connection; an error costs one connection, never the
    listening socket (see the module docstring)."""
    if event & POLL_EVENT_TYPE.READ:
        for _ in range(64):  # a bound, so a flood of connects cannot hold the tick thread
            try:
                sock, _addr = self._TcpServer__socket.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:  # out of descriptors, say: the peer retries, and so does this on the next poll
                log.warning("cannot accept a Raft connection: %s", exc)
                break
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._TcpServer__sendBufferSize)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._TcpServer__recvBufferSize)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setblocking(False)
                conn = _tcp_server_module.TcpConnection(
                    poller=self._TcpServer__poller,
                    socket=sock,
                    timeout=self._TcpServer__connectionTimeout,
                    sendBufferSize=self._TcpServer__sendBufferSize,
                    recvBufferSize=self._TcpServer__recvBufferSize,
                    keepalive=self._TcpServer__keepalive,
                )
            except OSError as exc:  # the peer reset it before it was set up
                log.info("a Raft connection closed while it was accepted: %s", exc)
                sock.close()
                continue
            self._TcpServer__onNewConnectionCallback(conn)
    if event & POLL_EVENT_TYPE.ERROR:
        log.warning("the Raft port reported an error; listening again")
        self.unbind()
        try:
            self.bind()
        except OSError as exc:
            log.error("cannot listen on the Raft port again: %s", exc)


_PATCHES: tuple[tuple[Any, str, Any], ...] = (
    (_syncobj_module, "createJournal", _create_journal),
    (_syncobj_module, "getEncryptor", cipher_factory),
    (_transport_module, "TcpConnection", RaftConnection),
    (_tcp_server_module, "TcpConnection", RaftConnection),
    (_serializer_module, "atomicReplace", _atomic_replace),
    (socket, "inet_ntop", _socket.inet_ntop),
    (_transport_module.TCPTransport, "send", _send),
    (_transport_module.TCPTransport, "_onTick", _on_tick),
    (_transport_module.TCPTransport, "_onMessageReceived", _on_message),
    (_tcp_server_module.TcpServer, "_TcpServer__onNewConnection", _on_new_connection),
    (_serializer_module.Serializer, "getTransmissionData", _transmission_data),
    (_serializer_module.Serializer, "setTransmissionData", _set_transmission_data),
)


def install() -> None:
    """Install every patch above; calling it again changes nothing."""
    for owner, name, value in _PATCHES:
        if getattr(owner, name) is not value:
            setattr(owner, name, value)


def installed() -> bool:
    return all(getattr(owner, name) is value for owner, name, value in _PATCHES)
