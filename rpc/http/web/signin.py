"""The web view under ``[auth]``: who may look, the sign-in form, sign-out.

``WebAuth.authorize`` is the router's ``Authorizer``: a request gets in with
``Authorization: Bearer <token>`` of a token that may read (scripts, curl) or
with the session cookie a sign-in set (browsers, which cannot send that
header from a link). Anything else gets ``refusal_page``: a 401 with a small
form to paste a token into (a password field: the token is not shown while
typed), posted to ``/signin``. A token that may read opens a session
(``raftsched.rpc.http.web.session``) and the browser is sent on to the page it asked
for; a refused one gets the form again with why (unknown token, or one whose
roles do not read) and never the token back. ``/signout`` ends the session
and clears the cookie. ``/signin`` and ``/signout`` are public routes (one
cannot sign in while signed out otherwise); the style sheet too.

Nothing here logs or renders a token: the log says who signed in (the
token's name) or that a sign-in was refused.

Cross-site requests: the cookie is ``SameSite=Strict``, so another site's
page cannot use a session; a sign-in POST whose ``Origin`` names another
host is refused (login CSRF).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlencode, urlsplit

from raftsched.rpc.http.router import Request, Response, Router
from raftsched.rpc.http.web.render import HTML, PAGE_HEADERS, page
from raftsched.rpc.http.web.session import Sessions, clear_cookie, cookie_name, set_cookie

log = logging.getLogger("raftsched.http")

NO_TOKEN = "this page needs a reader token: paste one below (or send 'Authorization: Bearer <token>')"
SESSION_ENDED = "your session has ended (signed out, past its lifetime, or this node restarted): paste your token again"


@dataclass(frozen=True)
class TokenVerdict:
    """What a token check says: the token's name when it may read, else why not."""

    holder: str = ""
    refusal: str = ""


#: checks a presented token (the app builds it from ``[auth]``'s token table and the role rules)
TokenCheck = Callable[[str], TokenVerdict]


def safe_next(target: str) -> str:
    """Where to go after signing in: a path of this site only (no ``//host``, no scheme), else ``/``."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target or any(ord(ch) < 32 for ch in target):
        return "/"
    return target


def _asked_for(request: Request) -> str:
    query = urlencode([(k, v) for k, values in request.query.items() for v in values])
    return request.path + ("?" + query if query else "")


def _same_origin(request: Request) -> bool:
    origin = request.header("origin")
    if not origin:
        return True  # not a browser's cross-site form (browsers send Origin with every POST)
    return urlsplit(origin).netloc.lower() == request.header("host").lower()


class WebAuth:
    def __init__(self, check: TokenCheck, node_id: str, secure: bool, sessions: Sessions | None = None) -> None:
        self.check = check
        self.node_id = node_id
        #: whether the node serves HTTPS: the cookie is then ``Secure``
        self.secure = secure
        self.sessions = sessions if sessions is not None else Sessions()  # (an empty one is falsy: it has a len)
        self.cookie = cookie_name(node_id)

    def authorize(self, request: Request) -> str | None:
        """The router's ``Authorizer``: None lets the request through, else why not."""
        scheme, _, token = request.header("authorization").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            verdict = self.check(token.strip())
            return None if verdict.holder else verdict.refusal
        session_id = request.cookie(self.cookie)
        if session_id:
            return None if self.sessions.holder(session_id) is not None else SESSION_ENDED
        return NO_TOKEN

    def who(self, request: Request) -> str:
        """The name of the token whose session this request carries ("" for none: a bearer header, or no auth)."""
        return self.sessions.holder(request.cookie(self.cookie)) or ""

    def refusal_page(self, request: Request, reason: str) -> Response:
        """The router's 401: the sign-in form, saying why, that comes back to the page asked for."""
        return self._form(401, reason, _asked_for(request) if request.method == "GET" else "/")

    def _form(self, status: int, message: str, target: str, headers: tuple[tuple[str, str], ...] = ()) -> Response:
        return page(
            status,
            "signin.html",
            headers,
            title="Sign in",
            node_id=self.node_id,
            holder="",
            crumbs=[("Sign in", "")],
            refresh=0,
            message=message,
            next=safe_next(target),
        )

    def add_routes(self, router: Router) -> None:
        router.add("/signin", self.sign_in_form, public=True)
        router.add("/signin", self.sign_in, methods=("POST",), public=True)
        router.add("/signout", self.sign_out, methods=("GET", "POST"), public=True)

    def sign_in_form(self, request: Request) -> Response:
        target = (request.query.get("next") or ["/"])[0]
        message = "You are signed out." if request.query.get("signed_out") else "Paste a reader token to look at this cluster."
        return self._form(200, message, target)

    def sign_in(self, request: Request) -> Response:
        fields = request.form()
        target = safe_next(fields.get("next", "/"))
        if not _same_origin(request):
            return self._form(403, "this sign-in came from another site's page and is refused: sign in here", target)
        token = fields.get("token", "").strip()
        if not token:
            return self._form(401, "no token was given: paste a token that has the reader (or submitter, admin) role", target)
        verdict = self.check(token)
        if not verdict.holder:
            log.info("web view: a sign-in was refused: %s", verdict.refusal)
            return self._form(401, f"that token was refused: {verdict.refusal}", target)
        session_id = self.sessions.open(verdict.holder)
        log.info("web view: token %r signed in", verdict.holder)
        cookie = set_cookie(self.cookie, session_id, self.secure, int(self.sessions.lifetime_s))
        return Response(303, b"", HTML, PAGE_HEADERS + (("Location", target), cookie))

    def sign_out(self, request: Request) -> Response:
        session_id = request.cookie(self.cookie)
        if session_id:
            holder = self.sessions.holder(session_id)
            self.sessions.close(session_id)
            if holder:
                log.info("web view: token %r signed out", holder)
        headers = (("Location", "/signin?signed_out=1"), clear_cookie(self.cookie, self.secure))
        return Response(303, b"", HTML, PAGE_HEADERS + headers)
