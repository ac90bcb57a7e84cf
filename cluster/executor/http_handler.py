"""The ``http`` job type: one HTTP(S) request; a 2xx answer is success.

Payload: ``{"method": "POST", "url": "...", "headers": {...}, "body": "..."}``
(``raftsched.cluster.domain.payloads``). Only ``http://`` and ``https://`` URLs are
fetched, and only from addresses ``raftsched.cluster.executor.http_guard`` allows (no
link-local cloud metadata, no ``--http-deny`` range, no loopback, private or
multicast address unless an ``--http-allow`` range opens it), connecting to
the very addresses it checked. Redirects (301, 302, 303, 307, 308) are followed up
to ``MAX_REDIRECTS`` times, each hop checked the same way (scheme and
addresses); 303 — and 301/302 after a POST — continue as GET without a
body, as browsers do; ``Authorization`` and ``Cookie`` headers are dropped
when a redirect leaves the original host. Proxies from the environment are
not used: a proxy would connect where the checks cannot see.

The answer's status line and body go to the run's log (bounded there); the
first 64 KiB of the final body are the run's result.

**One deadline for the whole run.** The job's ``timeout`` (``DEFAULT_TIMEOUT_S``
for a job without one) bounds everything from the first connect to the last
byte of the last redirect's body, however slowly a server trickles bytes.
A watchdog thread per run (``_Watchdog``) holds a duplicate of each socket
the run opens and shuts it down when the deadline passes or the run is
cancelled or loses its lease (``ctx.cancelled``): a connect, a TLS handshake
or a read blocked on it returns at once, and the run fails with "timed out
after N ms" or the cancel's reason. Only the name lookup (``getaddrinfo``)
cannot be interrupted; the resolver's own timeouts bound it.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from typing import Callable
from urllib.parse import urljoin, urlsplit

from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.payloads import HttpPayload, check_http_url, parse_http_payload
from raftsched.cluster.executor.http_guard import AddressPolicy, GuardedHTTPConnection, GuardedHTTPSConnection, HttpRefused
from raftsched.cluster.executor.ports import HandlerError, Task, TaskContext

MAX_REDIRECTS = 5
REDIRECTS = (301, 302, 303, 307, 308)
#: the whole request's deadline for a job without a ``timeout``
DEFAULT_TIMEOUT_S = 60.0
RESULT_BYTES = 65536
#: how often the watchdog looks at the deadline and the cancel flag
WATCH_S = 0.05
_CREDENTIAL_HEADERS = ("authorization", "cookie", "proxy-authorization")


class HttpHandler:
    """Runs ``http`` jobs under an ``AddressPolicy`` (the executor's ``--http-deny`` and ``--http-allow`` ranges)."""

    def __init__(self, policy: AddressPolicy = AddressPolicy()) -> None:
        self.policy = policy

    def __call__(self, task: Task, ctx: TaskContext) -> bytes:
        try:
            request = parse_http_payload(task.payload, strict=False)
        except ValidationError as exc:
            raise HandlerError(str(exc)) from exc
        return self.send(request, task, ctx)

    def send(self, request: HttpPayload, task: Task, ctx: TaskContext) -> bytes:
        """``request`` and its redirects under the run's deadline (the ``notify`` type's delivery too)."""
        left = ctx.time_left()
        timeout_ms = task.timeout_ms if left is not None else int(DEFAULT_TIMEOUT_S * 1000)
        watchdog = _Watchdog(ctx, time.monotonic() + (DEFAULT_TIMEOUT_S if left is None else left), timeout_ms)
        try:
            return self._follow(request, ctx, watchdog)
        finally:
            watchdog.finish()

    def _follow(self, request: HttpPayload, ctx: TaskContext, watchdog: _Watchdog) -> bytes:
        """The request and its redirects; the final answer's first bytes if it is a 2xx."""
        method, url, headers, body = request.method, request.url, dict(request.headers), request.body
        first_host = urlsplit(url).hostname
        for _ in range(MAX_REDIRECTS + 1):
            status, location, content = self._once(HttpPayload(url, method, headers, body), ctx, watchdog)
            if status not in REDIRECTS or not location:
                break
            target = urljoin(url, location)
            ctx.log.write(f"redirected to {target}\n".encode())
            if status == 303 or (status in (301, 302) and method == "POST"):
                method, body = "GET", None
            if urlsplit(target).hostname != first_host:
                headers = {k: v for k, v in headers.items() if k.lower() not in _CREDENTIAL_HEADERS}
            url = target
        else:
            raise HandlerError(f"{request.method} {request.url}: more than {MAX_REDIRECTS} redirects")
        if not 200 <= status < 300:
            raise HandlerError(f"{method} {url} answered {status}")
        return content

    def _once(self, request: HttpPayload, ctx: TaskContext, watchdog: _Watchdog) -> tuple[int, str, bytes]:
        """One request: (status, Location header, first bytes of the body). ``HandlerError`` if refused,
        failed, past the deadline or cancelled."""
        what = f"{request.method} {request.url}"
        watchdog.check(what)
        try:
            check_http_url(request.url)
        except ValidationError as exc:
            raise HandlerError(f"{what} refused: {exc}") from exc
        parts = urlsplit(request.url)
        cls = GuardedHTTPSConnection if parts.scheme.lower() == "https" else GuardedHTTPConnection
        assert parts.hostname is not None  # check_http_url made sure
        conn = cls(parts.hostname, parts.port, max(0.1, watchdog.left()), self.policy, watchdog.track)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        data = request.body.encode("utf-8") if request.body is not None else None
        try:
            conn.request(request.method, path, body=data, headers=request.headers)
            resp = conn.getresponse()
            watchdog.check(what)
            ctx.log.write(f"{what} -> {resp.status}\n".encode())
            content = _copy_body(resp, ctx, lambda: watchdog.check(what))
            watchdog.check(what)  # a body cut short by the watchdog can look complete
            return resp.status, resp.getheader("Location") or "", content
        except HttpRefused as exc:
            raise HandlerError(f"{what} refused: {exc}") from exc
        except (OSError, http.client.HTTPException, ValueError) as exc:
            watchdog.check(what)  # the watchdog's shutdown is why it failed: say so
            raise HandlerError(f"{what} failed: {exc}") from exc
        finally:
            conn.close()


def _copy_body(resp: http.client.HTTPResponse, ctx: TaskContext, check: Callable[[], None]) -> bytes:
    """Stream an answer's body into the log (bounded there), calling ``check`` before each chunk; return its
    first ``RESULT_BYTES`` for the result."""
    first = bytearray()
    while True:
        check()
        chunk = resp.read1(65536)  # what has arrived, not a full buffer: the check runs per chunk
        if not chunk:
            return bytes(first)
        ctx.log.write(chunk)
        if len(first) < RESULT_BYTES:
            first += chunk[: RESULT_BYTES - len(first)]


class _Watchdog:
    """Ends one run's requests at its deadline or when it is cancelled (see the module docstring).

    ``track(sock)`` keeps a duplicate of each socket the run opens (the same connection, whatever
    wraps or closes the original); the watchdog thread shuts them all down when it fires, and every
    later ``track`` shuts its socket down at once. ``check(what)`` raises ``HandlerError`` once it has
    fired; ``finish()`` stops the thread and closes the duplicates.
    """

    def __init__(self, ctx: TaskContext, deadline: float, timeout_ms: int) -> None:
        self._ctx = ctx
        self._deadline = deadline
        self._timeout_ms = timeout_ms
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._done = threading.Event()
        self.why = ""
        self._thread = threading.Thread(target=self._watch, name="http-watchdog", daemon=True)
        self._thread.start()

    def left(self) -> float:
        return self._deadline - time.monotonic()

    def track(self, sock: socket.socket) -> None:
        dup = sock.dup()
        with self._lock:
            self._socks.append(dup)
            fired = bool(self.why)
        if fired:
            _shut(dup)

    def check(self, what: str) -> None:
        if self.why:
            raise HandlerError(f"{what} {self.why}")

    def finish(self) -> None:
        self._done.set()
        with self._lock:
            socks, self._socks = self._socks, []
        for sock in socks:
            sock.close()

    def _watch(self) -> None:
        while not self._done.is_set():
            left = self.left()
            if self._ctx.cancelled.is_set():
                self._fire(f"stopped: {self._ctx.reason or 'cancelled'}")
                return
            if left <= 0:
                self._fire(f"timed out after {self._timeout_ms} ms")
                return
            self._done.wait(min(WATCH_S, left))

    def _fire(self, why: str) -> None:
        with self._lock:
            self.why = why
            socks = list(self._socks)
        for sock in socks:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    """Shut a connection down both ways: a connect, handshake or read blocked on it returns at once."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected yet, or already closed
