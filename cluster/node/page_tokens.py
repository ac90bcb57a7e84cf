"""Page tokens that a node can tell it (or another node of its cluster) issued.

A list call's ``next_page_token`` names where the next page starts (a job id,
a run id, or a run's scheduled instant and id). Sent back, a token must be one
of ours, for the same call and filters: anything else is INVALID_ARGUMENT
before any state is read. A token is

    p1.<cursor, base64url>.<MAC, base64url>

where the MAC is HMAC-SHA256 (cut to 12 bytes) over the version, the call,
its filters and the cursor, keyed per cluster (``PageTokens(key)``: the app
derives the key from the Raft secret, or from the member list when there is
none), so every node of the cluster accepts every other's tokens — a client
may send the next page to another node — and nothing else passes. Bounded:
``MAX_PAGE_TOKEN_CHARS`` characters at most.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.limits import MAX_PAGE_TOKEN_CHARS

VERSION = "p1"
_MAC_BYTES = 12
#: the key of tests and of tools without a cluster
DEFAULT_KEY = b"raftsched page tokens"


def derive_key(material: str) -> bytes:
    """A page-token key from cluster-wide material (the Raft secret, or the sorted member addresses)."""
    return hashlib.sha256(b"raftsched page tokens\0" + material.encode("utf-8")).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class PageTokens:
    def __init__(self, key: bytes = DEFAULT_KEY) -> None:
        self._key = key

    def _mac(self, query: str, cursor: bytes) -> str:
        msg = b"\0".join((VERSION.encode(), query.encode("utf-8"), cursor))
        return _b64(hmac.new(self._key, msg, hashlib.sha256).digest()[:_MAC_BYTES])

    def issue(self, query: str, cursor: str) -> str:
        """The token for ``cursor`` of the call and filters ``query`` names; "" for no next page."""
        if not cursor:
            return ""
        raw = cursor.encode("utf-8")
        return f"{VERSION}.{_b64(raw)}.{self._mac(query, raw)}"

    def open(self, query: str, token: str) -> str:
        """The cursor in ``token`` ("" for none); ``ValidationError`` unless this cluster issued it for ``query``."""
        if not token:
            return ""
        if len(token) > MAX_PAGE_TOKEN_CHARS:
            raise ValidationError(
                f"page_token is {len(token)} characters long; the limit is {MAX_PAGE_TOKEN_CHARS}: "
                "pass back the next_page_token of the previous page, or none for the first page"
            )
        parts = token.split(".")
        try:
            if len(parts) != 3 or parts[0] != VERSION:
                raise ValueError("not a versioned token")
            raw = _unb64(parts[1])
            cursor = raw.decode("utf-8")
        except (ValueError, binascii.Error) as exc:
            raise _not_ours() from exc
        if not hmac.compare_digest(parts[2].encode("utf-8"), self._mac(query, raw).encode("ascii")):
            raise _not_ours()
        return cursor


def _not_ours() -> ValidationError:
    return ValidationError(
        "page_token is not one this cluster issued for this call and these filters: pass back the "
        "next_page_token of the previous page with the same filters, or none for the first page"
    )
