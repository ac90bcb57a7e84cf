"""The node's HTTP server: a WSGI app served by the standard library's ``wsgiref`` on threads.

Why this and not a framework: the endpoint serves a few small, read-only
pages (``/metrics``, ``/healthz``, later the web view) to a handful of
clients (a Prometheus server, probes, an operator's browser). ``wsgiref`` +
``socketserver.ThreadingMixIn`` (a thread per connection, daemon threads) is
in the standard library, is what ``prometheus_client``'s own exposition
server is built from, and keeps the pages plain WSGI: any WSGI server could
serve the same app. Nothing here blocks the node: the server runs on its own
thread and every request on another.

TLS: with ``tls=(cert_file, key_file)`` it serves HTTPS with the node's gRPC
certificate and key (``[tls]``). Client certificates are never asked for,
also under ``[tls] client_auth`` (Prometheus and probes rarely have them). The
handshake runs on the request's thread, with the request's timeout, so a
slow or silent client cannot hold up the others.
"""

from __future__ import annotations

import logging
import socket
import socketserver
import ssl
import threading
from typing import Any, Callable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

log = logging.getLogger("raftsched.http")

#: seconds a connection may stay silent (TLS handshake, request line, headers) before it is closed
REQUEST_TIMEOUT_S = 10.0

WsgiApp = Callable[..., Any]


class _Handler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_S

    def setup(self) -> None:
        self.request.settimeout(self.timeout)
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the standard library's name
        log.debug("HTTP %s %s", self.address_string(), format % args)


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    ssl_context: ssl.SSLContext | None = None

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN (DNS, possibly slow): not needed here
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)
        self.setup_environ()

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        if self.ssl_context is not None:
            sock = self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("HTTP connection from %s failed", client_address, exc_info=True)


def _server_class(host: str) -> type[_Server]:
    if ":" not in host:
        return _Server
    return type("_Server6", (_Server,), {"address_family": socket.AF_INET6})


class HttpServer:
    """Serves ``app`` on ``address`` (``host:port``; port 0 picks a free one: see ``port``)."""

    def __init__(self, address: str, app: WsgiApp, tls: tuple[str, str] | None = None) -> None:
        host, port = address.rsplit(":", 1)
        host = host.strip("[]")
        try:
            self._server = _server_class(host)((host, int(port)), _Handler)
        except OSError as exc:
            raise OSError(f"cannot listen for HTTP on {address}: {exc.strerror or exc}; is the port in use?") from exc
        self._server.set_app(app)
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(tls[0], tls[1])
            self._server.ssl_context = context
        self.scheme = "https" if tls is not None else "http"
        self.address = address
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.5}, name="http", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
