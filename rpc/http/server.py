"""The node's HTTP server: one event-loop thread for every connection, a few threads for the WSGI app.

The endpoint lives in the node's process, beside Raft and gRPC, and answers
whoever reaches its address, so no client may grow what the process holds.
No number of connections adds a thread:

* **Threads.** One thread (``http``) runs an asyncio loop that accepts, reads
  and writes every connection, TLS handshakes included. The WSGI app runs on
  at most ``WORKERS`` threads (``http-worker``), and ``/healthz`` and
  ``/metrics`` (``FAST_PATHS``) on ``FAST_WORKERS`` others (``http-ops``): a
  probe never waits behind pages (a page's read waits for a leader; a probe
  must say promptly that there is none).
* **Connections.** At most ``max_connections`` (``MAX_CONNECTIONS``) are
  open. A new one over it takes the place of the connection that has waited
  longest for the bytes of its request (a slow or silent client); when every
  open connection is being answered, the new one gets 503 at once (under TLS
  it is closed at once).
* **Deadlines, in total, never per read.** A request's line, headers and
  body must have arrived within ``REQUEST_DEADLINE_S`` of the connection's
  accept (its TLS handshake included) or, on a kept-alive connection, of the
  request's first byte; a kept-alive connection waits ``KEEPALIVE_IDLE_S`` at
  most for that byte and serves ``KEEPALIVE_REQUESTS`` requests at most; a
  client has ``WRITE_DEADLINE_S`` to take an answer. Past one, the
  connection is dropped.
* **Sizes.** Request heads and bodies as ``raftsched.rpc.http.wire`` bounds them.

The app is plain WSGI (``raftsched.rpc.http.router.Router``), called on a worker
thread once the whole request has been read; its answer is gathered there
and written by the loop, so a client that reads slowly holds no thread.

TLS: with ``tls=(cert_file, key_file)`` it serves HTTPS with the node's gRPC
certificate and key (``[tls]``). Client certificates are never asked for,
also under ``[tls] client_auth`` (Prometheus and probes rarely have them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from raftsched.rpc.http import wire

log = logging.getLogger("raftsched.http")

#: seconds from a connection's accept (or a kept-alive request's first byte) to its request's last byte
REQUEST_DEADLINE_S = 10.0
#: seconds a kept-alive connection may stay silent between requests
KEEPALIVE_IDLE_S = 5.0
#: requests served on one connection before it is closed
KEEPALIVE_REQUESTS = 100
#: seconds a client has to take an answer
WRITE_DEADLINE_S = 10.0
#: connections open at once
MAX_CONNECTIONS = 256
#: threads running the app for pages, and for the operations paths
WORKERS = 8
FAST_WORKERS = 2
FAST_PATHS = frozenset({"/healthz", "/metrics"})
_READ_CHUNK = 16 * 1024
_CLOSE_GRACE_S = 1.0

WsgiApp = Callable[..., Any]
#: (status line, headers, body) as the app answered
Answer = tuple[str, list[tuple[str, str]], bytes]


class _Connection:
    """One open connection: its socket, its task, and since when (loop time) it waits for request bytes (None:
    answering)."""

    __slots__ = ("sock", "task", "waiting_since")

    def __init__(self, sock: socket.socket, since: float) -> None:
        #: the accepted socket: its task closes it, or the server's end does if the task never ran
        self.sock = sock
        self.task: asyncio.Task[None] | None = None
        self.waiting_since: float | None = since


class _Incoming:
    """The bytes of one connection's requests, read against its deadlines."""

    def __init__(self, reader: asyncio.StreamReader, deadline: float, deadline_s: float) -> None:
        self._reader = reader
        self._buf = bytearray()
        #: when the request now being read must be complete (None: waiting for its first byte)
        self.deadline: float | None = deadline
        self._deadline_s = deadline_s

    async def _more(self, until: float) -> bool:
        async with asyncio.timeout_at(until):
            data = await self._reader.read(_READ_CHUNK)
        if data and self.deadline is None:
            self.deadline = asyncio.get_running_loop().time() + self._deadline_s
        self._buf += data
        return bool(data)

    async def head(self, idle_until: float) -> bytes | None:
        """The next request's head; None when the client closed (or sent only part of one before closing)."""
        searched = 0
        while True:
            end = self._buf.find(b"\r\n\r\n", searched)
            if 0 <= end <= wire.MAX_HEAD_BYTES - 4:
                head = bytes(self._buf[: end + 4])
                del self._buf[: end + 4]
                return head
            if end >= 0 or len(self._buf) > wire.MAX_HEAD_BYTES:
                raise wire.BadRequest(431, f"the request line and headers are over {wire.MAX_HEAD_BYTES} bytes")
            searched = max(0, len(self._buf) - 3)
            if self._buf and self.deadline is None:  # a pipelined request: its first byte is already here
                self.deadline = asyncio.get_running_loop().time() + self._deadline_s
            if not await self._more(self.deadline if self.deadline is not None else idle_until):
                return None

    async def body(self, length: int) -> bytes | None:
        """``length`` bytes of body; None when the client closed first."""
        while len(self._buf) < length:
            assert self.deadline is not None
            if not await self._more(self.deadline):
                return None
        body = bytes(self._buf[:length])
        del self._buf[:length]
        return body

    def has(self, length: int) -> bool:
        return len(self._buf) >= length

    def next_request(self) -> None:
        self.deadline = None


class HttpServer:
    """Serves ``app`` on ``address`` (``host:port``; port 0 picks a free one: see ``port``)."""

    def __init__(
        self,
        address: str,
        app: WsgiApp,
        tls: tuple[str, str] | None = None,
        max_connections: int = MAX_CONNECTIONS,
        workers: int = WORKERS,
    ) -> None:
        host, port = address.rsplit(":", 1)
        host = host.strip("[]")
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, int(port)))
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise OSError(f"cannot listen for HTTP on {address}: {exc.strerror or exc}; is the port in use?") from exc
        self._sock = sock
        self._app = app
        self._ssl: ssl.SSLContext | None = None
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(tls[0], tls[1])
            self._ssl = context
        self.scheme = "https" if tls is not None else "http"
        self.address = address
        self.max_connections = max_connections
        #: the limits below are attributes so that a test may shorten them
        self.request_deadline_s = REQUEST_DEADLINE_S
        self.keepalive_idle_s = KEEPALIVE_IDLE_S
        self.write_deadline_s = WRITE_DEADLINE_S
        self._pages = ThreadPoolExecutor(workers, thread_name_prefix="http-worker")
        self._ops = ThreadPoolExecutor(FAST_WORKERS, thread_name_prefix="http-ops")
        self._connections: set[_Connection] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(5)

    def stop(self) -> None:
        loop, stopping = self._loop, self._stopping
        if self._thread.is_alive() and loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop ended already
                loop.call_soon_threadsafe(stopping.set)
            self._thread.join(5)
        self._pages.shutdown(wait=False, cancel_futures=True)
        self._ops.shutdown(wait=False, cancel_futures=True)
        self._sock.close()

    # ------------------------------------------------------------------ the loop thread

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception:  # noqa: BLE001 - said, and the node goes on without its HTTP endpoint
            log.exception("the HTTP server on %s stopped", self.address)
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        stopping = self._stopping = asyncio.Event()
        accepting = asyncio.create_task(self._accept())
        self._ready.set()
        await stopping.wait()
        accepting.cancel()
        tasks = [c.task for c in self._connections if c.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(accepting, *tasks, return_exceptions=True)
        # a connection still here was accepted in the loop's turn that stopped the server: its task was cancelled
        # before it ever ran (so its own ``finally`` never closed it), and the set would keep its socket open
        for conn in self._connections:
            conn.sock.close()
        self._connections.clear()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(self._sock)
            except OSError as exc:  # out of descriptors, say: the listener stays, and tries again
                log.warning("HTTP on %s cannot accept a connection: %s", self.address, exc)
                await asyncio.sleep(0.1)
                continue
            self._admit(sock, peer)

    def _admit(self, sock: socket.socket, peer: Any) -> None:
        if len(self._connections) >= self.max_connections and not self._evict():
            if self._ssl is None:
                answer = wire.plain_response(
                    503,
                    f"this node's HTTP endpoint is answering {self.max_connections} connections, its limit: try again shortly",
                )
                with contextlib.suppress(OSError):
                    sock.send(answer)
            sock.close()
            return
        loop = asyncio.get_running_loop()
        conn = _Connection(sock, loop.time())
        self._connections.add(conn)
        conn.task = loop.create_task(self._serve(conn, sock, peer))

    def _evict(self) -> bool:
        """Drop the connection that has waited longest for its request's bytes; False when none waits."""
        waiting = [c for c in self._connections if c.waiting_since is not None]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: c.waiting_since or 0.0)
        self._connections.discard(oldest)
        if oldest.task is not None:
            oldest.task.cancel()
        log.debug("HTTP on %s: %d connections open, dropped the one waiting longest", self.address, self.max_connections)
        return True

    async def _serve(self, conn: _Connection, sock: socket.socket, peer: Any) -> None:
        loop = asyncio.get_running_loop()
        assert conn.waiting_since is not None
        deadline = conn.waiting_since + self.request_deadline_s
        writer: asyncio.StreamWriter | None = None
        graceful = False
        try:
            reader = asyncio.StreamReader(limit=wire.MAX_HEAD_BYTES, loop=loop)
            protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
            handshake = max(0.1, deadline - loop.time()) if self._ssl is not None else None
            async with asyncio.timeout_at(deadline):
                transport, _ = await loop.connect_accepted_socket(
                    lambda: protocol, sock, ssl=self._ssl, ssl_handshake_timeout=handshake
                )
            writer = asyncio.StreamWriter(transport, protocol, reader, loop)
            graceful = await self._requests(conn, _Incoming(reader, deadline, self.request_deadline_s), writer, peer)
        except (asyncio.CancelledError, TimeoutError, ConnectionError, ssl.SSLError, OSError) as exc:
            log.debug("HTTP connection from %s dropped: %r", peer, exc)
        except Exception:  # noqa: BLE001 - one connection's failure must not end the server
            log.exception("HTTP connection from %s failed", peer)
        finally:
            self._connections.discard(conn)
            await self._close(writer, sock, graceful)

    async def _close(self, writer: asyncio.StreamWriter | None, sock: socket.socket, graceful: bool) -> None:
        if writer is None:
            sock.close()
            return
        if not graceful:
            writer.transport.abort()
            return
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), _CLOSE_GRACE_S)
        except (asyncio.CancelledError, TimeoutError, ConnectionError, ssl.SSLError, OSError):
            writer.transport.abort()

    async def _requests(self, conn: _Connection, incoming: _Incoming, writer: asyncio.StreamWriter, peer: Any) -> bool:
        """Answer the connection's requests until it ends; True when it ends with a whole answer sent."""
        loop = asyncio.get_running_loop()
        stopping = self._stopping
        served = 0
        while True:
            try:
                raw = await incoming.head(loop.time() + self.keepalive_idle_s)
                if raw is None:
                    return False
                head = wire.parse_head(raw)
            except wire.BadRequest as exc:
                await self._send(writer, wire.plain_response(exc.status, str(exc)))
                return True
            whole = head.content_length <= wire.MAX_BODY_BYTES
            body = b""
            if whole and head.content_length:
                if head.expect_continue and not incoming.has(head.content_length):
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                body_read = await incoming.body(head.content_length)
                if body_read is None:
                    return False
                body = body_read
            conn.waiting_since = None
            pool = self._ops if head.path in FAST_PATHS else self._pages
            env = wire.environ(head, body, self._sock.getsockname()[:2], peer, self.scheme)
            status, headers, out = await loop.run_in_executor(pool, self._call, env)
            served += 1
            keep = head.keep_alive and whole and served < KEEPALIVE_REQUESTS and not (stopping and stopping.is_set())
            log.debug('HTTP %s "%s %s %s" %s %d', peer[0], head.method, head.path, head.version, status[:3], len(out))
            await self._send(writer, wire.response(status, headers, out, keep))
            if not keep:
                return True
            conn.waiting_since = loop.time()
            incoming.next_request()

    async def _send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        async with asyncio.timeout(self.write_deadline_s):
            await writer.drain()

    # ------------------------------------------------------------------ a worker thread

    def _call(self, env: dict[str, Any]) -> Answer:
        """The app's answer to one request (a 500 if it fails)."""
        started: list[Any] = []
        written: list[bytes] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
            started[:] = [status, list(headers)]
            return written.append

        try:
            result = self._app(env, start_response)
            try:
                body = b"".join([*written, *result])
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except Exception:  # noqa: BLE001 - a failing app answers 500; the server goes on
            log.exception("HTTP %s %s failed", env.get("REQUEST_METHOD"), env.get("PATH_INFO"))
            started = []
        if not started:
            return "500 Internal Server Error", [("Content-Type", wire.TEXT)], b"internal error: see the node log\n"
        return started[0], started[1], body
