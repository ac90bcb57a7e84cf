"""A small WSGI application: routes by method and path to handlers of ``Request`` -> ``Response``.

The node's HTTP endpoint is this app (``raftsched.rpc.http.server`` serves it): the
operations routes (``/metrics``, ``/healthz``: ``raftsched.rpc.http.ops``) and the
web view at ``/`` (``raftsched.rpc.http.web``) are added as routes. A path is matched
segment by segment; a segment ``{name}`` matches any one segment and lands in
``Request.params`` (``/jobs/{job_id}``).

Access: a route added with ``public=True`` is served to anyone (Prometheus
and probes carry no token). Every other route first asks the router's
``authorize(request)`` (None: no check, as when ``[auth]`` is off): it
answers None to let the request through, or why not, which becomes a 401
with that reason (as plain text, or as the page ``refused(request, reason)``
builds: the web view's sign-in form). ``bearer_reader`` builds one from a
token check.

Names (DNS rebinding): with ``allowed_hosts`` set (the app sets the names
and ports the node is reached by: ``allowed_hosts(...)``), a request whose
``Host`` is not one of them is answered 421 before any handler or token
check, so a page of another site whose name was made to resolve to this
node cannot read or post to the web view as if it were that site. A route
added with ``any_host=True`` skips it: the app's ``/metrics`` and
``/healthz``, reached by probes and Prometheus under whatever address
discovery gave them (a pod's IP, a load balancer's name), and showing no
job, run, payload or log.

Requests: a POST's body (a form) is read up to ``MAX_BODY_BYTES`` (a larger
one is a 413 before any handler runs); cookies are parsed on demand.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs

log = logging.getLogger("raftsched.http")

TEXT = "text/plain; charset=utf-8"
#: the largest request body read (a sign-in form is a few hundred bytes)
MAX_BODY_BYTES = 16 * 1024


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    #: header names in lower case
    headers: dict[str, str]
    #: what ``{name}`` segments of the route matched
    params: dict[str, str] = field(default_factory=dict)
    #: the body of a POST (at most ``MAX_BODY_BYTES``)
    body: bytes = b""
    #: the body was larger than ``MAX_BODY_BYTES`` (and was not read)
    body_too_large: bool = False

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)

    def cookie(self, name: str) -> str:
        """The value of cookie ``name`` ("" when absent or the header cannot be parsed)."""
        # by hand, not http.cookies: one odd cookie of another site on this host must not hide ours
        for pair in self.header("cookie").split(";"):
            key, sep, value = pair.strip().partition("=")
            if sep and key == name:
                return value.strip().strip('"')
        return ""

    def form(self) -> dict[str, str]:
        """The fields of an ``application/x-www-form-urlencoded`` body (the first value of each)."""
        if not self.header("content-type").lower().startswith("application/x-www-form-urlencoded"):
            return {}
        fields = parse_qs(self.body.decode("utf-8", "replace"), keep_blank_values=True)
        return {key: values[0] for key, values in fields.items()}

    def with_params(self, params: dict[str, str]) -> "Request":
        return Request(self.method, self.path, self.query, self.headers, params, self.body, self.body_too_large)


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = TEXT
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def text(cls, status: int, text: str) -> "Response":
        return cls(status, text.encode("utf-8") if text.endswith("\n") else (text + "\n").encode("utf-8"))


Handler = Callable[[Request], Response]
#: None to let a request through; else why not (the 401's body)
Authorizer = Callable[[Request], "str | None"]
#: the 401 answer to a refused request, given why (the default: that reason as text)
Refusal = Callable[[Request, str], Response]

_REASONS = {
    200: "OK",
    204: "No Content",
    303: "See Other",
    304: "Not Modified",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    421: "Misdirected Request",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class Route:
    segments: tuple[str, ...]
    handler: Handler
    methods: frozenset[str]
    public: bool
    #: served whatever the request's Host (see the module docstring)
    any_host: bool = False

    def match(self, parts: list[str]) -> dict[str, str] | None:
        if len(parts) != len(self.segments):
            return None
        params: dict[str, str] = {}
        for want, got in zip(self.segments, parts):
            if want.startswith("{") and want.endswith("}"):
                params[want[1:-1]] = got
            elif want != got:
                return None
        return params


def _split(path: str) -> list[str]:
    return [p for p in path.split("/") if p]


def _refused_as_text(request: Request, reason: str) -> Response:
    return Response(401, (reason + "\n").encode())


class Router:
    def __init__(self, authorize: Authorizer | None = None) -> None:
        self.authorize = authorize
        #: builds the 401 of a refused request (the web view sets its sign-in page here)
        self.refused: Refusal = _refused_as_text
        #: the ``Host`` values served (lower case); None: any (``allowed_hosts`` builds it)
        self.allowed_hosts: frozenset[str] | None = None
        #: where to send a person whose request named another host (in the 421's text)
        self.home = ""
        self._routes: list[Route] = []

    def add(
        self, path: str, handler: Handler, methods: Iterable[str] = ("GET",), public: bool = False, any_host: bool = False
    ) -> None:
        """Serve ``path`` with ``handler`` (HEAD is served wherever GET is, without the body)."""
        wanted = {m.upper() for m in methods}
        if "GET" in wanted:
            wanted.add("HEAD")
        self._routes.append(Route(tuple(_split(path)), handler, frozenset(wanted), public, any_host))

    def misdirected(self, request: Request) -> Response | None:
        """The 400 or 421 of a request whose ``Host`` this node does not answer to; None when it does."""
        if self.allowed_hosts is None:
            return None
        host = request.header("host").strip().lower()
        if not host:
            return Response.text(400, "the request has no Host header: send the address you reached this node at")
        if host in self.allowed_hosts:
            return None
        where = f" open {self.home}" if self.home else " use the node's http address"
        return Response.text(
            421,
            f"this node does not answer to the name {host!r} (the request's Host header):{where} or localhost "
            "instead. Only the names in its config are served, so that another site's page cannot reach it under "
            "a name of its own (DNS rebinding)",
        )

    def dispatch(self, request: Request) -> Response:
        parts = _split(request.path)
        allowed: set[str] = set()
        for route in self._routes:
            params = route.match(parts)
            if params is None:
                continue
            if request.method not in route.methods:
                allowed |= route.methods
                continue
            wrong_host = None if route.any_host else self.misdirected(request)
            if wrong_host is not None:
                return wrong_host
            if not route.public and self.authorize is not None:
                refusal = self.authorize(request)
                if refusal is not None:
                    page = self.refused(request, refusal)
                    challenge = ("WWW-Authenticate", 'Bearer realm="raftsched"')
                    return Response(401, page.body, page.content_type, (challenge, *page.headers))
            if request.body_too_large:
                return Response.text(413, f"the request body is over {MAX_BODY_BYTES} bytes: send less")
            return route.handler(request.with_params(params))
        if allowed:
            return Response(
                405,
                f"{request.method} is not allowed on {request.path}\n".encode(),
                headers=(("Allow", ", ".join(sorted(allowed))),),
            )
        return Response.text(404, f"no such page: {request.path}")

    # ------------------------------------------------------------------ WSGI

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        request = request_of(environ)
        try:
            response = self.dispatch(request)
        except Exception as exc:  # noqa: BLE001 - a failing page must not take the server down
            log.exception("HTTP %s %s failed", request.method, request.path)
            response = Response.text(500, f"internal error serving {request.path}: {exc!r}; see the node log")
        headers = [("Content-Type", response.content_type), ("Content-Length", str(len(response.body))), *response.headers]
        if not any(name.lower() == "x-content-type-options" for name, _ in headers):
            headers.append(("X-Content-Type-Options", "nosniff"))  # text is text: no browser may guess HTML in it
        start_response(f"{response.status} {_REASONS.get(response.status, 'Status')}", headers)
        return [] if request.method == "HEAD" else [response.body]


def request_of(environ: dict[str, Any]) -> Request:
    headers = {key[5:].replace("_", "-").lower(): str(value) for key, value in environ.items() if key.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = str(environ["CONTENT_TYPE"])
    body, too_large = _body(environ)
    return Request(
        method=str(environ.get("REQUEST_METHOD", "GET")).upper(),
        path=str(environ.get("PATH_INFO", "/")) or "/",
        query=parse_qs(str(environ.get("QUERY_STRING", ""))),
        headers=headers,
        body=body,
        body_too_large=too_large,
    )


def _body(environ: dict[str, Any]) -> tuple[bytes, bool]:
    """(body, too large): at most ``MAX_BODY_BYTES`` of what ``Content-Length`` announces."""
    try:
        length = int(str(environ.get("CONTENT_LENGTH") or "0"))
    except ValueError:
        return b"", False
    if length <= 0 or environ.get("wsgi.input") is None:
        return b"", False
    if length > MAX_BODY_BYTES:
        return b"", True
    return environ["wsgi.input"].read(length), False


def allowed_hosts(advertised: str, listen: str, port: int, scheme: str) -> frozenset[str]:
    """The ``Host`` values a node's endpoint answers to: its advertised ``host:port`` (``http``), and its
    listen host (``http_listen``, unless all interfaces), ``localhost``, ``127.0.0.1`` and ``[::1]`` with the
    port it listens on (``port``: the real one, also when the config says 0). Without a port where it is the
    scheme's default (80, 443) too."""
    default = 443 if scheme == "https" else 80
    adv_host, _, adv_port = advertised.rpartition(":")
    listen_host = listen.rpartition(":")[0]
    pairs = [(adv_host, int(adv_port) or port)]
    pairs += [(h, port) for h in (listen_host, "localhost", "127.0.0.1", "[::1]") if h.strip("[]") not in ("0.0.0.0", "::", "")]
    names: set[str] = set()
    for host, p in pairs:
        host = host.lower() if host.startswith("[") or ":" not in host else f"[{host.lower()}]"
        names.add(f"{host}:{p}")
        if p == default:
            names.add(host)
    return frozenset(names)


def bearer_reader(may_read: Callable[[str], bool]) -> Authorizer:
    """An ``Authorizer`` that lets through a request whose ``Authorization: Bearer <token>`` may read
    (``may_read(token)``: the token is known and has a role that reads)."""

    def authorize(request: Request) -> str | None:
        scheme, _, token = request.header("authorization").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return "this page needs a reader token: send 'Authorization: Bearer <token>'"
        if not may_read(token.strip()):
            return "the token is unknown or may not read: it needs the reader, submitter or admin role"
        return None

    return authorize
