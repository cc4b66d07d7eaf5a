"""Authentication: a challenge-response handshake per connection, and an HMAC-SHA256 tag per message where a
link needs one (between nodes without CurveZMQ, or ``rpc.mac: always``).

Handshake (both sides prove they hold the run secret; nothing of it can be replayed):
client HELLO ``c`` (32 fresh random bytes) -> server CHALLENGE ``s, server_proof(c, s)`` -> client PROOF
``client_proof(s, c, sealed)`` -> server PONG. ``s`` is fresh per handshake, so a recorded PROOF answers no
later challenge; ``sealed`` (whether every later message carries a tag) is inside the proof.

The per-message tag is ``HMAC-SHA256(secret, header || count || for each data frame: length || D)`` where ``D`` is the
frame itself when it is smaller than :data:`BULK_THRESHOLD`, and otherwise (with ``bulk_mac: aes-gmac``) the
16-byte AES-GMAC tag of the frame under a one-time key ``HMAC-SHA256(secret, "bulk" || nonce)[:16]``.
Every header carries a fresh 16-byte nonce, so one-time keys never repeat. GMAC runs at memory speed
(AES-NI/PCLMUL), which keeps authentication of megabyte frames from dominating the transport; with
``bulk_mac: hmac-sha256`` large frames are hashed by the HMAC itself.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import os
import secrets
import struct
from typing import Sequence

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import ProtocolError

TAG_BYTES = 32
NONCE_BYTES = 16
BULK_THRESHOLD = 64 * 1024
_LENGTH = struct.Struct(">Q")
_COUNT = struct.Struct(">I")
_NO_BUFFERS = _COUNT.pack(0)
_SECRET_ENV = "LAMARCKIAN_RPC_SECRET"
_run_secret: bytes | None = None


def run_secret() -> bytes:
    """This run's 32-byte secret: taken from ``$LAMARCKIAN_RPC_SECRET`` (hex) if set, else made once."""
    global _run_secret
    if _run_secret is None:
        from_env = os.environ.get(_SECRET_ENV)
        _run_secret = bytes.fromhex(from_env) if from_env else secrets.token_bytes(32)
    return _run_secret


def adopt_secret(secret: bytes) -> None:
    """Make ``secret`` this process's run secret (a remote process adopts its caller's)."""
    global _run_secret
    _run_secret = bytes(secret)


HANDSHAKE_NONCE_BYTES = 32
_SERVER_ROLE = b"lamarckian-rpc server proof"
_CLIENT_ROLE = b"lamarckian-rpc client proof"
_STREAM_ROLE = b"lamarckian-rpc stream proof"


def handshake_nonce() -> bytes:
    """32 fresh random bytes for one side of one handshake."""
    return secrets.token_bytes(HANDSHAKE_NONCE_BYTES)


def server_proof(secret: bytes, client_nonce: bytes, server_nonce: bytes) -> bytes:
    """The server's answer to a HELLO: HMAC-SHA256 over both nonces (fixed lengths, so unambiguous)."""
    return hmac.digest(secret, _SERVER_ROLE + client_nonce + server_nonce, "sha256")


def client_proof(secret: bytes, server_nonce: bytes, client_nonce: bytes, sealed: bool) -> bytes:
    """The client's answer to a CHALLENGE; binds the link's mode (``sealed``: every message tagged)."""
    return hmac.digest(secret, _CLIENT_ROLE + server_nonce + client_nonce + bytes([sealed]), "sha256")


def stream_proof(secret: bytes, server_nonce: bytes, identity: bytes) -> bytes:
    """A bulk stream's answer to its relay's nonce: binds the stream to the caller's ZeroMQ routing id
    ``identity`` (16 bytes), whose replies and trust it shares (:mod:`.stream`)."""
    return hmac.digest(secret, _STREAM_ROLE + server_nonce + identity, "sha256")


def proofs_equal(expected: bytes, received: object) -> bool:
    """Constant-time comparison that also accepts junk (anything not 32 bytes is simply wrong)."""
    return isinstance(received, bytes) and len(received) == TAG_BYTES and hmac.compare_digest(expected, received)


class NonceSource:
    """Unique 16-byte nonces: 8 random bytes per process and a 64-bit counter."""

    def __init__(self) -> None:
        self._prefix = secrets.token_bytes(8)
        self._counter = itertools.count()

    def __call__(self) -> bytes:
        return self._prefix + _LENGTH.pack(next(self._counter))


class Signer:
    """Computes and checks message tags for one secret."""

    def __init__(self, secret: bytes, bulk_mac: str = "aes-gmac") -> None:
        if len(secret) < 16:
            raise ValueError("the RPC secret must be at least 16 bytes")
        self._secret = bytes(secret)
        self._bulk_gmac = bulk_mac == "aes-gmac"
        self.nonce = NonceSource()

    def tag(self, header: bytes | memoryview, nonce: bytes, buffers: Sequence[memoryview]) -> bytes:
        """The 32-byte tag of a message; ``nonce`` is the one carried in ``header``."""
        if not buffers:  # the common small message: one C call
            return hmac.digest(self._secret, bytes(header) + _NO_BUFFERS, "sha256")
        mac = hmac.new(self._secret, header, hashlib.sha256)
        mac.update(_COUNT.pack(len(buffers)))
        gmac = None
        for index, buffer in enumerate(buffers):
            size = buffer.nbytes
            mac.update(_LENGTH.pack(size))
            if size >= BULK_THRESHOLD and self._bulk_gmac:
                if gmac is None:
                    key = hmac.new(self._secret, b"bulk" + nonce, hashlib.sha256).digest()[:16]
                    gmac = AESGCM(key)
                mac.update(gmac.encrypt(index.to_bytes(12, "big"), b"", buffer))
            else:
                mac.update(buffer)
        return mac.digest()

    def verify(self, header: bytes | memoryview, nonce: bytes, buffers: Sequence[memoryview], tag: bytes) -> None:
        """Raise :class:`ProtocolError` ("unauthenticated") unless ``tag`` is right."""
        if not hmac.compare_digest(self.tag(header, nonce, buffers), tag):
            raise ProtocolError("unauthenticated", "bad HMAC")
