"""Rendering: the Jinja2 environment of the web view's templates, and the HTML answer with its headers.

The templates and the style sheet ship inside this package
(``rpc/http/web/templates``, ``rpc/http/web/static``: package data in
pyproject.toml). Autoescaping is on for every template, whatever its name,
so every value a template prints is escaped unless a template says
otherwise, which none does: job names, payloads, errors and logs are text.
``StrictUndefined`` turns a misspelt name in a template into an error, not an
empty cell.

Every page goes out with headers that forbid what it never needs: no
script runs (``Content-Security-Policy`` without ``script-src``, so even an
injected ``<script>`` would not), styles come only from this node, forms
post only here, no framing, no referrer to other sites, no caching of pages that may hold
payloads.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from raftsched.rpc.http.router import Response
from raftsched.rpc.http.web import words

HTML = "text/html; charset=utf-8"
CSS = "text/css; charset=utf-8"
CSP = "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
PAGE_HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "same-origin"),  # no-referrer would make browsers send "Origin: null" with our own forms
    ("Cache-Control", "no-store"),
)
STYLE_PATH = "/static/web.css"


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("raftsched.rpc.http.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        utc=words.utc,
        utc_ms=lambda ms: words.utc(ms, millis=True),
        span=words.span,
        status_class=words.status_class,
    )
    env.globals["style_path"] = STYLE_PATH
    return env


_ENV = _environment()


def render(template: str, **context: Any) -> str:
    """The template rendered (every value escaped)."""
    return _ENV.get_template(template).render(**context)


def page(status: int, template: str, headers: tuple[tuple[str, str], ...] = (), **context: Any) -> Response:
    """An HTML answer: the template rendered, with the page headers (and ``headers``)."""
    return Response(status, render(template, **context).encode("utf-8"), HTML, PAGE_HEADERS + headers)


def style_sheet() -> bytes:
    """The style sheet (``static/web.css``), read from the package."""
    return resources.files("raftsched.rpc.http.web").joinpath("static", "web.css").read_bytes()
