"""The Raft cipher: per-connection keys from a handshake; tampering, replays and wrong secrets are refused,
and no key/nonce pair ever repeats, even with a random source that always answers the same."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from cryptography.exceptions import InvalidTag

import raftsched.raft.cipher
from raftsched.raft.cipher import HELLO_SIZE, HandshakeError, RaftCipher, Session

pytestmark = pytest.mark.unit

SECRET = "a long shared secret"


def connect(a: RaftCipher, b: RaftCipher) -> tuple[Session, Session]:
    """A handshake between an initiator using ``a`` and a responder using ``b``: their sessions."""
    ha, hb = a.handshake(initiator=True), b.handshake(initiator=False)
    assert len(ha.hello) == len(hb.hello) == HELLO_SIZE
    return ha.complete(hb.hello), hb.complete(ha.hello)


def test_both_directions_round_trip() -> None:
    a, b = connect(RaftCipher(SECRET), RaftCipher(SECRET))
    for i in range(3):
        assert b.open(a.seal(b"append entries %d" % i)) == b"append entries %d" % i
        assert a.open(b.seal(b"next node idx %d" % i)) == b"next node idx %d" % i


def test_tampering_fails_authentication() -> None:
    a, b = connect(RaftCipher(SECRET), RaftCipher(SECRET))
    frame = bytearray(a.seal(b"vote for me"))
    frame[3] ^= 1
    with pytest.raises(InvalidTag):
        b.open(bytes(frame))


def test_replayed_reordered_and_reflected_frames_fail() -> None:
    a, b = connect(RaftCipher(SECRET), RaftCipher(SECRET))
    first, second = a.seal(b"one"), a.seal(b"two")
    with pytest.raises(InvalidTag):
        b.open(second)  # out of order
    assert b.open(first) == b"one"
    with pytest.raises(InvalidTag):
        b.open(first)  # replayed
    with pytest.raises(InvalidTag):
        a.open(a.seal(b"reflected"))  # a frame sent back to its sender: the other direction's key
    a2, b2 = connect(RaftCipher(SECRET), RaftCipher(SECRET))
    with pytest.raises(InvalidTag):
        b2.open(a.seal(b"from another connection"))


def test_a_wrong_secret_cannot_talk() -> None:
    a, b = connect(RaftCipher(SECRET), RaftCipher("another secret entirely"))
    with pytest.raises(InvalidTag):
        b.open(a.seal(b"x"))
    with pytest.raises(InvalidTag):
        a.open(b.seal(b"x"))


def test_a_foreign_hello_is_refused() -> None:
    h = RaftCipher(SECRET).handshake(initiator=True)
    with pytest.raises(HandshakeError, match="does not speak"):
        h.complete(b"\x00\x00\x00\x20" + b"x" * (HELLO_SIZE - 4))  # pysyncobj's plaintext framing
    with pytest.raises(HandshakeError, match="echoed"):
        h.complete(h.hello)


class _Spy:
    """Records every (key, nonce) AES-GCM encrypts with."""

    def __init__(self) -> None:
        self.pairs: list[tuple[bytes, bytes]] = []
        spy = self

        real = raftsched.raft.cipher.AESGCM

        class RecordingAESGCM:
            def __init__(self, key: bytes) -> None:
                self.key, self.real = key, real(key)

            def encrypt(self, nonce: bytes, data: bytes, aad: Any) -> bytes:
                spy.pairs.append((self.key, bytes(nonce)))
                return bytes(self.real.encrypt(nonce, data, aad))

            def decrypt(self, nonce: bytes, data: bytes, aad: Any) -> bytes:
                return bytes(self.real.decrypt(nonce, data, aad))

        self.cls = RecordingAESGCM


def test_no_key_nonce_pair_repeats_even_with_a_constant_random_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two instances (as two nodes, or one node before and after a restart: the module is reloaded, so its
    per-process counter starts again) with the same secret and os.urandom stuck on one value."""
    monkeypatch.setattr("os.urandom", lambda n: b"\x42" * n)
    spy = _Spy()
    pairs: list[tuple[bytes, bytes]] = []
    for _restart in range(2):
        cipher_module = importlib.reload(raftsched.raft.cipher)
        monkeypatch.setattr(cipher_module, "AESGCM", spy.cls)
        one, two = cipher_module.RaftCipher(SECRET), cipher_module.RaftCipher(SECRET)
        for x, y in ((one, two), (two, one), (one, one), (one, two)):
            for _connection in range(3):
                a, b = connect(x, y)
                for i in range(5):
                    b.open(a.seal(b"m%d" % i))
                    a.open(b.seal(b"r%d" % i))
        pairs += spy.pairs
        spy.pairs = []
    importlib.reload(raftsched.raft.cipher)
    assert len(pairs) == 2 * 4 * 3 * 10
    assert len(set(pairs)) == len(pairs)
    assert len({key for key, _ in pairs}) == 2 * 4 * 3 * 2  # a key per connection and direction
