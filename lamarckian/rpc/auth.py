"""Message authentication: an HMAC-SHA256 tag over every frame of every message.

The tag is ``HMAC-SHA256(secret, header || count || for each data frame: length || D)`` where ``D`` is the
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
