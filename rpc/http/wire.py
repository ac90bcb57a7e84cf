"""HTTP/1.1 on the wire, as much as the node's HTTP server needs: a request head into a WSGI environ, a response out.

Requests (RFC 9112): a request line and header fields ending in CRLF CRLF,
at most ``MAX_HEAD_BYTES`` of them (more is 431); ``HTTP/1.0`` or
``HTTP/1.1`` (another version is 505); origin-form targets (``/path?query``),
absolute-form ones (``http://host/path``, whose host then stands for
``Host``), and ``*``. A body comes only with ``Content-Length`` (one value);
``Transfer-Encoding`` is 501 (the pages take small forms). At most one
``Host``; none is 400 under HTTP/1.1. A folded (obs-fold) line or a header
name with ``_`` is refused or dropped as a proxy in front would not see it
the same way. Anything malformed is ``BadRequest`` with its status and a
message saying what was wrong; the server answers it and closes.

The environ is what PEP 3333 asks for (latin-1 strings, ``PATH_INFO``
percent-decoded as ``wsgiref`` does); the response is the status line, the
app's headers, ``Date``, ``Connection`` (keep-alive or close, as the request
and the server decided) and the body.

Pure: no sockets.
"""

from __future__ import annotations

import io
import re
import sys
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any
from urllib.parse import unquote, urlsplit

from raftsched.cluster.domain.errors import RaftschedError

#: the most a request line and its header fields may take
MAX_HEAD_BYTES = 32 * 1024
#: the largest request body read; a larger one is not read (the app sees its length and an empty input,
#: and answers 413) and the connection is closed after the answer
MAX_BODY_BYTES = 64 * 1024
TEXT = "text/plain; charset=utf-8"

_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_REASONS = {
    400: "Bad Request",
    413: "Content Too Large",
    421: "Misdirected Request",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}


class BadRequest(RaftschedError):
    """A request the server answers with ``status`` and ``message`` and then closes its connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Head:
    method: str
    #: the path and query of the target (origin-form)
    path: str
    query: str
    version: str
    #: header fields, names in lower case, repeated ones joined with ", " (cookies with "; ")
    headers: dict[str, str]
    content_length: int
    #: the client may send another request on this connection afterwards (before the server's own limits)
    keep_alive: bool
    expect_continue: bool


def parse_head(raw: bytes) -> Head:
    """The request line and header fields of ``raw`` (up to and including the blank line)."""
    lines = raw.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not parts[1]:
        raise BadRequest(400, "the request line is not 'METHOD target HTTP/1.1'")
    method, target, version = parts[0].decode("ascii"), parts[1].decode("latin-1"), parts[2].decode("latin-1")
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        if not version.startswith("HTTP/"):
            raise BadRequest(400, f"the request line ends in {version!r}, not an HTTP version")
        raise BadRequest(505, f"{version} is not served here: use HTTP/1.1")
    headers = _fields(lines[1:])
    target_host, path, query = _target(target)
    if target_host:
        headers["host"] = target_host
    elif "host" not in headers and version == "HTTP/1.1":
        raise BadRequest(400, "an HTTP/1.1 request needs a Host header")
    if "transfer-encoding" in headers:
        raise BadRequest(501, "a request body with Transfer-Encoding is not accepted: send it with Content-Length")
    length_text = headers.get("content-length", "0")
    lengths = {v.strip() for v in length_text.split(",")}
    if len(lengths) != 1 or not next(iter(lengths)).isdigit():
        raise BadRequest(400, f"Content-Length {length_text!r} is not one number of bytes")
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    keep_alive = "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens
    expect = headers.get("expect", "").lower() == "100-continue"
    return Head(method, path, query, version, headers, int(next(iter(lengths))), keep_alive, expect)


def _fields(lines: list[bytes]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        if not line:
            continue
        if line[:1] in (b" ", b"\t"):
            raise BadRequest(400, "a header field is folded over two lines (obsolete line folding): send it on one")
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.fullmatch(name):
            raise BadRequest(400, f"a header line is not 'Name: value': {line[:60]!r}")
        key, text = name.decode("ascii").lower(), value.strip(b" \t").decode("latin-1")
        if key == "host" and "host" in headers:
            raise BadRequest(400, "the request has more than one Host header")
        joiner = "; " if key == "cookie" else ", "
        headers[key] = f"{headers[key]}{joiner}{text}" if key in headers else text
    return headers


def _target(target: str) -> tuple[str, str, str]:
    """(host of an absolute-form target or "", path, query)."""
    if target == "*":
        return "", "*", ""
    if target.startswith("/"):
        path, _, query = target.partition("?")
        return "", path, query
    if target.lower().startswith(("http://", "https://")):
        parts = urlsplit(target)
        if not parts.netloc or "@" in parts.netloc:
            raise BadRequest(400, f"the request target {target[:80]!r} names no plain host")
        return parts.netloc, parts.path or "/", parts.query
    raise BadRequest(400, f"the request target {target[:80]!r} is not a path")


def environ(head: Head, body: bytes, server: tuple[str, int], peer: tuple[str, int], scheme: str) -> dict[str, Any]:
    """The WSGI environ of a request (``body``: what was read of it; empty when it was too large to read)."""
    env: dict[str, Any] = {
        "REQUEST_METHOD": head.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": unquote(head.path, "iso-8859-1"),
        "QUERY_STRING": head.query,
        "SERVER_NAME": server[0],
        "SERVER_PORT": str(server[1]),
        "SERVER_PROTOCOL": head.version,
        "REMOTE_ADDR": str(peer[0]),
        "REMOTE_PORT": str(peer[1]),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scheme,
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for name, value in head.headers.items():
        if "_" in name:  # HTTP_X_A would stand for both X-A and X_A: a header a proxy passes could pose as another
            continue
        key = name.upper().replace("-", "_")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            env[key] = value
        else:
            env["HTTP_" + key] = value
    return env


def response(status: str, headers: list[tuple[str, str]], body: bytes, keep_alive: bool) -> bytes:
    """The bytes of a response: status line, the app's headers (``Connection`` and ``Date`` are the server's)."""
    lines = [f"HTTP/1.1 {status}"]
    lines += [f"{name}: {value}" for name, value in headers if name.lower() not in ("connection", "date", "keep-alive")]
    if not any(name.lower() == "content-length" for name, _ in headers):
        lines.append(f"Content-Length: {len(body)}")
    lines += [f"Date: {formatdate(usegmt=True)}", f"Connection: {'keep-alive' if keep_alive else 'close'}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def plain_response(status: int, text: str) -> bytes:
    """A short text answer that closes the connection (refusals the server makes itself)."""
    body = (text.rstrip("\n") + "\n").encode("utf-8")
    headers = [("Content-Type", TEXT), ("X-Content-Type-Options", "nosniff")]
    return response(f"{status} {_REASONS.get(status, 'Error')}", headers, body, keep_alive=False)
