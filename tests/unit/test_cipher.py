"""The Raft cipher: round trip, authentication of message and timestamp, unique nonces."""

from __future__ import annotations

import pytest
from cryptography.exceptions import InvalidTag

from raft.cipher import RaftCipher

pytestmark = pytest.mark.unit


def test_round_trip_and_timestamp() -> None:
    a, b = RaftCipher("a long shared secret"), RaftCipher("a long shared secret")
    token = a.encrypt_at_time(b"append entries", 1234)
    assert b.extract_timestamp(token) == 1234
    assert b.decrypt(token) == b"append entries"


def test_tampering_and_wrong_secret_are_refused() -> None:
    a = RaftCipher("a long shared secret")
    token = bytearray(a.encrypt_at_time(b"vote for me", 7))
    token[-1] ^= 1
    with pytest.raises(InvalidTag):
        a.decrypt(bytes(token))
    forged = bytearray(a.encrypt_at_time(b"x", 7))
    forged[0:8] = (10**9).to_bytes(8, "big")  # a replayed message with a moved timestamp
    with pytest.raises(InvalidTag):
        a.decrypt(bytes(forged))
    with pytest.raises(InvalidTag):
        RaftCipher("another secret entirely").decrypt(a.encrypt_at_time(b"x", 1))


def test_nonces_do_not_repeat() -> None:
    a = RaftCipher("a long shared secret")
    nonces = {a.encrypt_at_time(b"", 1)[8:20] for _ in range(10_000)}
    assert len(nonces) == 10_000
