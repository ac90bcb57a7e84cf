"""The ``http`` job type: one HTTP(S) request; a 2xx answer is success.

Payload: ``{"method": "POST", "url": "...", "headers": {...}, "body": "..."}``
(``cluster.domain.payloads``). Only ``http://`` and ``https://`` URLs are
fetched, and only from addresses ``cluster.executor.http_guard`` allows (no
link-local cloud metadata, no ``--http-deny`` range), connecting to the very
addresses it checked. Redirects (301, 302, 303, 307, 308) are followed up
to ``MAX_REDIRECTS`` times, each hop checked the same way (scheme and
addresses); 303 — and 301/302 after a POST — continue as GET without a
body, as browsers do; ``Authorization`` and ``Cookie`` headers are dropped
when a redirect leaves the original host. Proxies from the environment are
not used: a proxy would connect where the checks cannot see.

The answer's status line and body go to the run's log (bounded there); the
first 64 KiB of the final body are the run's result.
"""

from __future__ import annotations

import http.client
from urllib.parse import urljoin, urlsplit

from cluster.domain.errors import ValidationError
from cluster.domain.payloads import HttpPayload, check_http_url, parse_http_payload
from cluster.executor.http_guard import AddressPolicy, GuardedHTTPConnection, GuardedHTTPSConnection, HttpRefused
from cluster.executor.ports import HandlerError, Task, TaskContext

MAX_REDIRECTS = 5
REDIRECTS = (301, 302, 303, 307, 308)
DEFAULT_TIMEOUT_S = 60.0
RESULT_BYTES = 65536
_CREDENTIAL_HEADERS = ("authorization", "cookie", "proxy-authorization")


class HttpHandler:
    """Runs ``http`` jobs under an ``AddressPolicy`` (the executor's ``--http-deny`` ranges)."""

    def __init__(self, policy: AddressPolicy = AddressPolicy()) -> None:
        self.policy = policy

    def __call__(self, task: Task, ctx: TaskContext) -> bytes:
        try:
            request = parse_http_payload(task.payload, strict=False)
        except ValidationError as exc:
            raise HandlerError(str(exc)) from exc
        method, url, headers, body = request.method, request.url, dict(request.headers), request.body
        first_host = urlsplit(url).hostname
        for _ in range(MAX_REDIRECTS + 1):
            status, location, content = self._once(HttpPayload(url, method, headers, body), ctx)
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

    def _once(self, request: HttpPayload, ctx: TaskContext) -> tuple[int, str, bytes]:
        """One request: (status, Location header, first bytes of the body). ``HandlerError`` if refused or failed."""
        what = f"{request.method} {request.url}"
        try:
            check_http_url(request.url)
        except ValidationError as exc:
            raise HandlerError(f"{what} refused: {exc}") from exc
        parts = urlsplit(request.url)
        left = ctx.time_left()
        timeout = max(0.1, left) if left is not None else DEFAULT_TIMEOUT_S
        cls = GuardedHTTPSConnection if parts.scheme.lower() == "https" else GuardedHTTPConnection
        assert parts.hostname is not None  # check_http_url made sure
        conn = cls(parts.hostname, parts.port, timeout, self.policy)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        data = request.body.encode("utf-8") if request.body is not None else None
        try:
            conn.request(request.method, path, body=data, headers=request.headers)
            resp = conn.getresponse()
            ctx.log.write(f"{what} -> {resp.status}\n".encode())
            content = _copy_body(resp, ctx)
            return resp.status, resp.getheader("Location") or "", content
        except HttpRefused as exc:
            raise HandlerError(f"{what} refused: {exc}") from exc
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise HandlerError(f"{what} failed: {exc}") from exc
        finally:
            conn.close()


def _copy_body(resp: http.client.HTTPResponse, ctx: TaskContext) -> bytes:
    """Stream an answer's body into the log (bounded there); return its first ``RESULT_BYTES`` for the result."""
    first = bytearray()
    for chunk in iter(lambda: resp.read(65536), b""):
        ctx.log.write(chunk)
        if len(first) < RESULT_BYTES:
            first += chunk[: RESULT_BYTES - len(first)]
    return bytes(first)
