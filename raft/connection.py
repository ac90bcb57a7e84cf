"""One Raft TCP connection: pysyncobj's ``TcpConnection`` with per-connection keys and bounded reads.

``raftsched.raft.pysyncobj_patches`` puts ``RaftConnection`` where pysyncobj 0.3.17's
transport and server make their connections. It keeps that class's
interface and behaviour (constructor, ``connect``, ``send``, ``disconnect``,
``state``, the callbacks, and ``sendRandKey``/``recvRandKey``, which the
transport's own first-message exchange sets), and changes the wire:

* With a secret (``encryptor`` is a ``raftsched.raft.cipher.RaftCipher``) both sides
  first send a hello (``raftsched.raft.cipher``), then frames ``u32 length | AES-GCM``
  of ``zlib(pickle(message))`` under that connection's keys. Messages sent
  before the peer's hello arrived wait in order and leave once it has.
* Before the peer's first frame opens (authenticates), at most
  ``PRE_AUTH_LIMIT`` bytes are read from it, a frame may announce at most
  ``PRE_AUTH_MAX_FRAME`` bytes, and the connection must authenticate within
  its timeout (``sweep`` enforces it for silent peers, and for peers that
  never answered our connect: a dead or unreachable node); anything else drops
  the connection. Nothing an unauthenticated peer sends is decompressed or
  unpickled.
* Every frame, authenticated or not, and every decompressed message is at
  most ``MAX_MESSAGE`` bytes; more drops the connection.
* Without a secret (every address loopback) frames carry the compressed
  pickle in the clear, as pysyncobj does, with the same size limit.

* No connection stays open without carrying messages: one that has not
  delivered a first message within its timeout of being opened (our connect
  never answered, a handshake that stalls, a peer that never says who it is)
  or has read nothing for its timeout since (a frozen or vanished peer, a
  half-open socket) is dropped by ``sweep`` and, by the side that dials,
  dialled again. Healthy links are never idle that long: every node probes
  every peer it is connected to twice a second (``raftsched.raft.peer_probe``).
* ``disconnect`` calls pysyncobj back, which may dial again on this very
  object before it returns; whatever called ``disconnect`` stops there
  (``_gen`` says whether the connection it was working on is still this
  one). pysyncobj's own class went on, and could leave a fresh connect
  without its write interest: the dial never completed, the link stayed
  ESTABLISHED and uncounted on both sides, and a survivor that needed it
  never elected.

What pysyncobj 0.3.17's transport needs from connections (``transport.py``;
each rule has a test in ``tests/unit/test_raft_connection_rules.py``):

* **Who dials whom.** Of two nodes only the one with the greater address
  string dials (``_shouldConnect``); the other only ever accepts. A node
  whose dialled connection is DISCONNECTED dials again every
  ``connectionRetryTime`` (``_connectIfNecessary``, every tick); one in
  any other state is left alone — so a dial that never completes, and is
  never dropped, blocks that link for good.
* **Who counts as connected.** A peer is counted (``__connectedNodes``)
  only once the transport's first messages went through: without a secret
  the dialler sends its address and counts at once, the acceptor counts on
  receiving it; with one, the random keys are exchanged first. An accepted
  connection that never names its node stays in ``_unknownConnections``,
  counted by no one.
* **Connected to anyone.** A follower or candidate starts an election only
  while it counts at least one peer as connected (``__connectedToAnyone``).
  A node whose links are all uncounted never campaigns, and never learns of
  a new term unless someone dials it — which is why every link must either
  work or be dropped and dialled again within a bound.
* **A new connection from a known node replaces the old one** in
  ``_connections`` without closing it; the old one's later close is then
  ignored (``_connToNode`` no longer finds it).

pysyncobj drops a bad connection silently; here the reason is logged (at
most one line per second) with the peer's address. Every method runs on the
node's tick thread.
"""

from __future__ import annotations

import errno
import logging
import socket
import struct
import time
import zlib
from typing import Any, Callable

import pysyncobj.pickle as pickle
from cryptography.exceptions import InvalidTag
from pysyncobj.monotonic import monotonic
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import CONNECTION_STATE, _getAddrType, set_keepalive

from raftsched.raft.cipher import HELLO_SIZE, MAGIC, TAG_SIZE, Handshake, HandshakeError, Session

log = logging.getLogger("raftsched.raft.connection")

#: the largest frame or decompressed message (a Raft message holds at most one command plus 256 KiB)
MAX_MESSAGE = 256 << 20
#: the largest frame a peer may announce before it has authenticated (its first message is tiny)
PRE_AUTH_MAX_FRAME = 4096
#: the most bytes read from a peer before it has authenticated
PRE_AUTH_LIMIT = HELLO_SIZE + 4 + PRE_AUTH_MAX_FRAME
_LEN = struct.Struct(">I")
_last_log = [0.0]


class _Refused(Exception):
    """The peer broke the protocol; the message says how."""


def _warn(message: str, *args: Any) -> None:
    now = time.monotonic()
    if now - _last_log[0] >= 1.0:
        _last_log[0] = now
        log.warning(message, *args)


def _decompress(data: bytes) -> bytes:
    d = zlib.decompressobj()
    out = d.decompress(data, MAX_MESSAGE)
    if d.unconsumed_tail or not d.eof:
        raise _Refused(f"a message that decompresses to more than {MAX_MESSAGE} bytes (or is cut short)")
    return out


class RaftConnection:
    def __init__(
        self,
        poller: Any,
        onMessageReceived: Callable[[Any], None] | None = None,
        onConnected: Callable[[], None] | None = None,
        onDisconnected: Callable[[], None] | None = None,
        socket: socket.socket | None = None,
        timeout: float = 10.0,
        sendBufferSize: int = 2**13,
        recvBufferSize: int = 2**13,
        keepalive: Any = None,
    ) -> None:
        # pysyncobj's transport reads and sets these
        self.sendRandKey: Any = None
        self.recvRandKey: Any = None
        self.recvLastTimestamp = 0
        self.encryptor: Any = None
        self._poller = poller
        self._on_message = onMessageReceived
        self._on_connected = onConnected
        self._on_disconnected = onDisconnected
        self._timeout = timeout
        self._send_size, self._recv_size = sendBufferSize, recvBufferSize
        self._keepalive = keepalive
        self._sock = socket
        self._fileno: int | None = None
        self._mask = 0
        self._initiator = socket is None
        self._peer = "?"
        #: bumped by every connect and disconnect: a caller that saw it change no longer owns what it was doing
        self._gen = 0
        self._reset_buffers()
        if socket is not None:
            self._fileno = socket.fileno()
            self._state = CONNECTION_STATE.CONNECTED
            try:
                host, port = socket.getpeername()[:2]
                self._peer = f"{host}:{port}"
            except OSError:
                pass
            self._set_keepalive()
            self._subscribe(POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.WRITE | POLL_EVENT_TYPE.ERROR)
        else:
            self._state = CONNECTION_STATE.DISCONNECTED

    def _reset_buffers(self) -> None:
        self._rbuf = bytearray()
        self._wbuf = bytearray()
        self._handshake: Handshake | None = None
        self._session: Session | None = None
        self._authenticated = False
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        #: whether a whole message came from the peer on this connection yet
        self._got_message = False
        self._opened_at = self._last_read = monotonic()

    # ---------------------------------------------------------- pysyncobj's interface

    def setOnConnectedCallback(self, onConnected: Callable[[], None]) -> None:
        self._on_connected = onConnected

    def setOnMessageReceivedCallback(self, onMessageReceived: Callable[[Any], None]) -> None:
        self._on_message = onMessageReceived

    def setOnDisconnectedCallback(self, onDisconnected: Callable[[], None]) -> None:
        self._on_disconnected = onDisconnected

    @property
    def state(self) -> int:
        return int(self._state)

    def fileno(self) -> int | None:
        return self._fileno

    def getSendBufferSize(self) -> int:
        return len(self._wbuf)

    def connect(self, host: str, port: int) -> bool:
        if host is None:
            return False
        self._gen += 1
        self._state = CONNECTION_STATE.DISCONNECTED
        self._fileno = None
        self._peer = f"{host}:{port}"
        sock = socket.socket(_getAddrType(host), socket.SOCK_STREAM)
        self._sock = sock
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_size)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._recv_size)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._set_keepalive()
        sock.setblocking(False)
        self._reset_buffers()
        try:
            sock.connect((host, port))
        except OSError as e:
            if e.errno not in (errno.EINPROGRESS, errno.EWOULDBLOCK):
                sock.close()  # refused at once: the transport dials again after its retry time
                self._sock = None
                return False
        self._fileno = sock.fileno()
        self._state = CONNECTION_STATE.CONNECTING
        self._mask = 0
        self._subscribe(POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.WRITE | POLL_EVENT_TYPE.ERROR)
        return True

    def send(self, message: Any) -> None:
        if self.sendRandKey:
            message = (self.sendRandKey, message)
        data = zlib.compress(pickle.dumps(message), 3)
        if self.encryptor is not None:
            self._start_handshake()
            if self._session is None:  # the peer's hello has not come yet
                self._pending.append(data)
                self._pending_bytes += len(data)
                if self._pending_bytes > MAX_MESSAGE:
                    self._drop("its hello did not come while more than %d bytes waited for it" % MAX_MESSAGE)
                return
            self._queue_frame(self._session.seal(data))
        else:
            self._queue_frame(data)
        self._try_send()

    def disconnect(self) -> None:
        """Close; then tell pysyncobj, which may ``connect`` this object again before this returns."""
        self._gen += 1
        notify = self._on_disconnected is not None and self._state != CONNECTION_STATE.DISCONNECTED
        self.sendRandKey = None
        self.recvRandKey = None
        self.recvLastTimestamp = 0
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._fileno is not None:
            self._poller.unsubscribe(self._fileno)
            self._fileno = None
        self._mask = 0
        self._reset_buffers()
        self._state = CONNECTION_STATE.DISCONNECTED
        if notify:
            self._on_disconnected()  # type: ignore[misc]

    def sweep(self) -> None:
        """Drop the connection if it broke its bounds (see the module docstring); the transport calls this every
        tick: a silent peer, or a connect that never completes, gets no event that would check it."""
        if self._state == CONNECTION_STATE.DISCONNECTED:
            return
        now = monotonic()
        if not self._got_message:
            if now - self._opened_at <= self._timeout:
                return
            if self._state == CONNECTION_STATE.CONNECTING:  # our connect: the peer never answered it
                self._drop(
                    "no answer to the connection within %.1f s: that node is down or unreachable, or a firewall "
                    "drops its Raft port" % self._timeout
                )
            elif self.encryptor is not None and not self._authenticated:
                self._drop("it did not authenticate within %.1f s" % self._timeout)
            else:
                self._drop("it sent no message within %.1f s of connecting" % self._timeout)
            return
        if now - self._last_read > self._timeout and not self._bytes_waiting():
            self._drop(
                "nothing came from it for %.1f s (that node is frozen, overloaded or gone, or the link is "
                "half-open): dialling again" % self._timeout
            )

    def _bytes_waiting(self) -> bool:
        """Whether the peer sent bytes this node has not read yet (its own tick thread was the slow one)."""
        if self._sock is None:
            return False
        try:
            return bool(self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return False

    # ---------------------------------------------------------- events

    def _subscribe(self, mask: int) -> None:
        if self._fileno is not None and mask != self._mask:
            self._mask = mask
            self._poller.subscribe(self._fileno, self._on_event, mask)

    def _set_keepalive(self) -> None:
        if self._sock is not None and self._keepalive is not None:
            set_keepalive(self._sock, *self._keepalive)

    def _on_event(self, descr: int, event: int) -> None:
        if descr != self._fileno:
            self._poller.unsubscribe(descr)
            return
        gen = self._gen
        if event & POLL_EVENT_TYPE.ERROR:
            self.disconnect()
            return
        if self._state == CONNECTION_STATE.CONNECTING:
            if not event & (POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.WRITE):
                return
            if self._sock is None or self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self.disconnect()
                return
            self._start_handshake()
            if self._on_connected is not None:
                self._on_connected()
            if self._gen != gen or self._state == CONNECTION_STATE.DISCONNECTED:
                return
            self._state = CONNECTION_STATE.CONNECTED
            self._last_read = monotonic()
            self._try_send()
            return
        self._start_handshake()
        if event & POLL_EVENT_TYPE.WRITE:
            self._try_send()
            if self._gen != gen:
                return
        if event & POLL_EVENT_TYPE.READ and self._state != CONNECTION_STATE.DISCONNECTED:
            self._read_and_deliver()

    def _read_and_deliver(self) -> None:
        gen = self._gen
        try:
            if not self._try_read():
                return
            while self._gen == gen:
                message = self._next_message()
                if message is None:
                    break
                self._got_message = True
                if self._on_message is not None:
                    self._on_message(message)
            if self._gen != gen:
                return
            if self.encryptor is not None and not self._authenticated and len(self._rbuf) >= PRE_AUTH_LIMIT:
                raise _Refused(f"it sent {PRE_AUTH_LIMIT} bytes or more without authenticating")
        except _Refused as exc:
            if self._gen == gen:
                self._drop(str(exc))

    def _drop(self, why: str) -> None:
        _warn("dropping the Raft connection with %s: %s", self._peer, why)
        self.disconnect()

    # ---------------------------------------------------------- bytes in and out

    def _start_handshake(self) -> None:
        if self.encryptor is not None and self._handshake is None and self._state != CONNECTION_STATE.DISCONNECTED:
            self._handshake = self.encryptor.handshake(self._initiator)
            self._wbuf += self._handshake.hello

    def _queue_frame(self, frame: bytes) -> None:
        self._wbuf += _LEN.pack(len(frame))
        self._wbuf += frame

    def _try_send(self) -> None:
        if self._state == CONNECTION_STATE.DISCONNECTED or self._sock is None:
            return
        while self._wbuf:
            try:
                sent = self._sock.send(self._wbuf)
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                    self.disconnect()
                    return  # this object may already be a new connection: its interest is its own
                break
            if sent <= 0:
                break
            del self._wbuf[:sent]
        mask = POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR
        if self._wbuf or self._state == CONNECTION_STATE.CONNECTING:  # a dial completes with a write event
            mask |= POLL_EVENT_TYPE.WRITE
        self._subscribe(mask)

    def _try_read(self) -> bool:
        """Read what the socket holds; False if the connection was closed meanwhile (EOF, an error)."""
        while self._sock is not None:
            want = self._recv_size
            if self.encryptor is not None and not self._authenticated:
                want = min(want, PRE_AUTH_LIMIT - len(self._rbuf))
                if want <= 0:
                    break  # parse what came; more is read once the peer has authenticated
            try:
                incoming = self._sock.recv(want)
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    break
                self.disconnect()
                return False
            if not incoming:
                self.disconnect()
                return False
            self._rbuf += incoming
            self._last_read = monotonic()
        return self._sock is not None

    def _next_message(self) -> Any:
        """The next whole message, or None until more bytes come. Raises ``_Refused``."""
        if self.encryptor is not None and self._session is None:
            if len(self._rbuf) < HELLO_SIZE:
                return None
            self._accept_hello(bytes(self._rbuf[:HELLO_SIZE]))
            del self._rbuf[:HELLO_SIZE]
        if len(self._rbuf) < _LEN.size:
            return None
        if self.encryptor is None and self._rbuf[: len(MAGIC)] == MAGIC:
            raise _Refused("the peer has a secret_file and this node has none: give every node the same secret_file")
        (size,) = _LEN.unpack_from(self._rbuf)
        limit = MAX_MESSAGE + TAG_SIZE
        if self.encryptor is not None and not self._authenticated:
            limit = PRE_AUTH_MAX_FRAME
        if size > limit:
            raise _Refused(f"it announced a {size}-byte message; the limit is {limit} bytes here")
        if len(self._rbuf) < _LEN.size + size:
            return None
        frame = bytes(self._rbuf[_LEN.size : _LEN.size + size])
        del self._rbuf[: _LEN.size + size]
        if self._session is not None:
            try:
                frame = self._session.open(frame)
            except InvalidTag:
                raise _Refused("a message failed authentication (a different secret, tampering or a replay)") from None
            self._authenticated = True
        try:
            message = pickle.loads(_decompress(frame))
            if self.recvRandKey:
                rand_key, message = message
                if rand_key != self.recvRandKey:
                    raise _Refused("a message carried the wrong connection key")
        except _Refused:
            raise
        except Exception as exc:  # a damaged message from an authenticated peer (or any peer without a secret)
            raise _Refused(f"an unreadable message ({type(exc).__name__})") from None
        return message

    def _accept_hello(self, hello: bytes) -> None:
        assert self._handshake is not None
        try:
            self._session = self._handshake.complete(hello)
        except HandshakeError as exc:
            raise _Refused(str(exc)) from None
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        for data in pending:
            self._queue_frame(self._session.seal(data))
        self._try_send()
