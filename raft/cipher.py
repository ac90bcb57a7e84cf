"""Keys for Raft traffic: every connection, and each direction of it, has its own AES-256-GCM key.

pysyncobj keeps one "encryptor" per node, made from the shared secret; ours
(``RaftCipher``) holds only the secret stretched once with PBKDF2 (the
master key) and encrypts nothing itself. Each connection runs a handshake
(``raftsched.raft.connection`` drives it):

1. Both sides send a hello in the clear: ``MAGIC`` and a 32-byte contribution
   that is fresh for every handshake (``_contribution``: os.urandom, hashed
   with the wall and monotonic clocks, the pid and a per-process counter, so
   even a broken random source cannot repeat it within a process or across
   restarts).
2. Both derive ``HKDF-SHA256(master, salt = initiator hello | responder hello)``:
   64 bytes, one key per direction.
3. Each message is ``AES-GCM(key, nonce = count of messages sent before it)``.
   The receiver expects exactly the next count, so a replayed, dropped or
   reordered message fails authentication.

No key/nonce pair can repeat: a key depends on the sender's own fresh
contribution (a replayed peer hello does not help: our half is new), the two
directions use different keys, and counts never go back within a key.
Authentication is the first message that opens: a peer without the secret
cannot produce one, so nothing it sends is ever decompressed or unpickled.
Every node of a cluster must run this version (the wire format differs from
pysyncobj's Fernet).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import struct
import time
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

from raftsched.raft.errors import RaftError

#: pysyncobj's salt, so the master key is the one its own encryptor would derive from the secret
_SALT = b"\x15%q\xe6\xbb\x02\xa6\xf8\x13q\x90\xcf6+\x1e\xeb"
#: the hello: protocol name and version, then the sender's contribution
MAGIC = b"RSR1"
HELLO_SIZE = len(MAGIC) + 32
#: what an AES-GCM frame adds to its message
TAG_SIZE = 16
_INFO = b"raftsched raft connection keys v1"
_COUNTER = itertools.count()
_SEED = struct.Struct(">QQQQ")


class HandshakeError(RaftError):
    """The peer's hello is not ours (another program, another version, or pysyncobj's own protocol)."""


def _contribution() -> bytes:
    """32 bytes never seen before (see the module docstring)."""
    seed = _SEED.pack(time.time_ns(), time.monotonic_ns(), os.getpid(), next(_COUNTER))
    return hashlib.sha256(os.urandom(32) + seed).digest()


class Session:
    """The keys of one established connection. Not thread-safe: one connection, one thread."""

    def __init__(self, send_key: bytes, recv_key: bytes) -> None:
        self._send, self._recv = AESGCM(send_key), AESGCM(recv_key)
        self.sent = 0
        self.received = 0

    def seal(self, data: bytes) -> bytes:
        nonce = self.sent.to_bytes(12, "big")
        self.sent += 1
        return self._send.encrypt(nonce, data, None)

    def open(self, frame: bytes) -> bytes:
        """The message, or ``cryptography.exceptions.InvalidTag`` (wrong secret, tampering, replay)."""
        data = self._recv.decrypt(self.received.to_bytes(12, "big"), frame, None)
        self.received += 1
        return data


class Handshake:
    """One side of a connection's key agreement: send ``hello``, then ``complete`` with the peer's."""

    def __init__(self, master: bytes, initiator: bool) -> None:
        self._master = master
        self.initiator = initiator
        self.hello = MAGIC + _contribution()

    def complete(self, peer_hello: bytes) -> Session:
        if len(peer_hello) != HELLO_SIZE or peer_hello[: len(MAGIC)] != MAGIC:
            raise HandshakeError(
                "the peer does not speak raftsched's Raft protocol v1 (another program or version, "
                "or a node without the secret_file this one has?)"
            )
        if peer_hello == self.hello:
            raise HandshakeError("the peer echoed our own hello")
        first, second = (self.hello, peer_hello) if self.initiator else (peer_hello, self.hello)
        keys = HKDF(algorithm=hashes.SHA256(), length=64, salt=first + second, info=_INFO).derive(self._master)
        forward, backward = keys[:32], keys[32:]
        return Session(forward, backward) if self.initiator else Session(backward, forward)


class RaftCipher:
    """The cluster secret, stretched once; what pysyncobj keeps as its ``encryptor``."""

    def __init__(self, password: str | bytes) -> None:
        secret = password if isinstance(password, bytes) else password.encode("utf-8")
        kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=_SALT, iterations=100_000)
        self._master = kdf.derive(secret)

    def handshake(self, initiator: bool) -> Handshake:
        return Handshake(self._master, initiator)


def cipher_factory(password: Any) -> RaftCipher:
    """Drop-in for ``pysyncobj.encryptor.getEncryptor``."""
    return RaftCipher(password)
