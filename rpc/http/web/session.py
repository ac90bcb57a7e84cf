"""Sign-in sessions of the web view (``[auth]`` on): a bounded in-memory table and the cookie that names one.

A person pastes a token once (``raftsched.rpc.http.web.signin``); the node checks it
and opens a **server-side session**: a random id (256 bits) handed to the
browser in an HttpOnly cookie, mapped here to the token's *name* and an
expiry. The token itself is never stored, in the cookie or here, and never
shown again. Why not the token in the cookie: a cookie leaks more easily than
a token file (browser profiles, proxies); a session can be ended (sign-out)
and expires on the server whatever the browser keeps.

* Lifetime: ``SESSION_LIFETIME_S`` (8 h) from sign-in; the cookie's
  ``Max-Age`` is the same, and the server checks it too.
* Bounded: at most ``MAX_SESSIONS``; a new one beyond that drops the one
  closest to its end (expired ones first).
* Per node and per process: a node's sessions end when it restarts, and the
  cookie is named after the node (``raftsched_session_<node id>``), because a
  browser sends a host's cookies to every port of it (the local cluster's
  nodes share 127.0.0.1): each node's sign-in lives beside the others'.
* The table keys are SHA-256 digests of the ids, so a lookup's timing says
  nothing about a real id.
* Each session has its own **CSRF token** (256 random bits, made at
  sign-in), which the web view's action forms carry
  (``raftsched.rpc.http.web.actions``); ``csrf_matches`` compares a presented
  one in constant time. It is no secret from the signed-in person (it is in
  their pages), only from other sites' pages, which cannot read those.
* **Flash messages**: what an action did (or why it was refused), kept in
  the session until the next page shows it (at most ``MAX_FLASHES``).

Thread-safe: requests run on threads of their own.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Callable

SESSION_LIFETIME_S = 8 * 3600
MAX_SESSIONS = 1000
COOKIE_PREFIX = "raftsched_session_"
#: flash messages a session keeps until a page shows them (the oldest go first)
MAX_FLASHES = 5
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Session:
    #: the name of the token it was opened with (``tokens.toml``), never the token
    holder: str
    expires_at: float
    #: the token the session's forms carry (``raftsched.rpc.http.web.actions``)
    csrf: str = ""


@dataclass(frozen=True)
class Flash:
    """A message for the next page: ``kind`` is ``ok`` or ``error``."""

    kind: str
    text: str


def _key(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode("utf-8", "replace")).digest()


class Sessions:
    def __init__(
        self,
        lifetime_s: float = SESSION_LIFETIME_S,
        max_sessions: int = MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lifetime_s = lifetime_s
        self.max_sessions = max_sessions
        self._clock = clock
        self._lock = threading.Lock()
        self._table: dict[bytes, Session] = {}
        self._flashes: dict[bytes, list[Flash]] = {}

    def open(self, holder: str) -> str:
        """A new session for the holder of a token that was just checked: its id (for the cookie)."""
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        with self._lock:
            self._table = {k: s for k, s in self._table.items() if s.expires_at > now}
            while len(self._table) >= self.max_sessions:
                del self._table[min(self._table, key=lambda k: self._table[k].expires_at)]
            self._flashes = {k: f for k, f in self._flashes.items() if k in self._table}
            self._table[_key(session_id)] = Session(holder, now + self.lifetime_s, secrets.token_urlsafe(32))
        return session_id

    def _live(self, session_id: str) -> Session | None:
        """The session while it lasts (under the lock)."""
        if not session_id:
            return None
        session = self._table.get(_key(session_id))
        if session is None:
            return None
        if session.expires_at <= self._clock():
            del self._table[_key(session_id)]
            self._flashes.pop(_key(session_id), None)
            return None
        return session

    def holder(self, session_id: str) -> str | None:
        """Who the session belongs to, while it lasts (None: unknown, ended or expired)."""
        with self._lock:
            session = self._live(session_id)
            return None if session is None else session.holder

    def csrf(self, session_id: str) -> str:
        """The CSRF token of the session, for its forms ("" when the session is not live)."""
        with self._lock:
            session = self._live(session_id)
            return "" if session is None else session.csrf

    def csrf_matches(self, session_id: str, presented: str) -> bool:
        """Whether ``presented`` is the live session's CSRF token (compared in constant time)."""
        expected = self.csrf(session_id)
        given = presented.encode("utf-8", "replace")
        return bool(expected) and hmac.compare_digest(expected.encode("utf-8"), given)

    def flash(self, session_id: str, kind: str, text: str) -> None:
        """Keep a message for the session's next page (nothing when the session is not live)."""
        with self._lock:
            if self._live(session_id) is None:
                return
            kept = self._flashes.setdefault(_key(session_id), [])
            kept.append(Flash(kind, text))
            del kept[:-MAX_FLASHES]

    def take_flashes(self, session_id: str) -> list[Flash]:
        """The session's messages, oldest first; each is shown once."""
        if not session_id:
            return []
        with self._lock:
            return self._flashes.pop(_key(session_id), [])

    def close(self, session_id: str) -> None:
        with self._lock:
            self._table.pop(_key(session_id), None)
            self._flashes.pop(_key(session_id), None)

    def __len__(self) -> int:
        return len(self._table)


def cookie_name(node_id: str) -> str:
    """``raftsched_session_<node id>`` (characters a cookie name may not hold become ``_``)."""
    return COOKIE_PREFIX + _UNSAFE.sub("_", node_id)


def set_cookie(name: str, session_id: str, secure: bool, max_age_s: int) -> tuple[str, str]:
    """The ``Set-Cookie`` header of a session: HttpOnly (no script reads it), SameSite=Strict (no other
    site's page sends it), ``Secure`` under TLS (never over plain HTTP), bounded by ``Max-Age``."""
    attributes = f"{name}={session_id}; Path=/; Max-Age={max_age_s}; HttpOnly; SameSite=Strict"
    return ("Set-Cookie", attributes + ("; Secure" if secure else ""))


def clear_cookie(name: str, secure: bool) -> tuple[str, str]:
    """The ``Set-Cookie`` header that makes the browser forget the session cookie."""
    return set_cookie(name, "", secure, 0)
