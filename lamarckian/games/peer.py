"""One authenticated client connection of a server of the game protocol (the game server, the policy service):
the server side of the handshake, frames split per received chunk, replies coalesced into one write per loop turn."""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
from typing import Any, Protocol

from . import protocol
from .protocol import ProtocolViolation

log = logging.getLogger(__name__)
HANDSHAKE_TIMEOUT = 5.0     # seconds a new connection has to prove the secret


class Host(Protocol):
    """What a :class:`Peer` serves: the game server or the policy service."""

    secret: bytes
    max_frame: int
    counters: collections.Counter

    def hello(self) -> dict[str, Any]:
        """The ``hello`` message (the peer adds its proof)."""

    def dispatch(self, message: dict[str, Any], peer: "Peer") -> None:
        """One message of an authenticated peer; ProtocolViolation drops the peer."""

    def disconnected(self, peer: "Peer") -> None:
        """The peer's connection is gone."""


class Peer(asyncio.Protocol):
    """One client connection of a :class:`Host`: the handshake (the host proves the secret too), then its messages
    until it closes or breaks the protocol (that client alone is dropped). What it sends leaves in one write per
    event-loop turn.

    Attributes:
        episodes: the host's state of this connection's episodes (or agents), by id.
    """

    def __init__(self, server: Host) -> None:
        self.server = server
        self.frames = protocol.Frames(4096)          # the handshake's frames are small
        self.episodes: dict[int, Any] = {}
        self.nonce: bytes | None = None               # the challenge's, until the client proved the secret
        self.outgoing: list[bytes] = []
        self.loop = asyncio.get_running_loop()

    transport: asyncio.Transport       # from connection_made on (asyncio calls it first)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server.counters["connections"] += 1
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.nonce = protocol.nonce()
        self.send({"type": "challenge", "version": protocol.VERSION, "nonce": self.nonce})
        self.loop.call_later(HANDSHAKE_TIMEOUT, self._check_authenticated)

    def _check_authenticated(self) -> None:
        if self.nonce is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        try:
            for body in self.frames.feed(data):
                message = protocol.unpack(body)
                if self.nonce is None:
                    self.server.dispatch(message, self)
                elif not self._authenticate(message):
                    return
        except ProtocolViolation as error:
            self.server.counters["violations"] += 1
            log.warning("dropping a client that broke the game protocol: %s", error)
            self.send({"type": "error", "message": f"protocol violation: {error}"})
            self._flush()
            self.transport.close()

    def _authenticate(self, auth: dict[str, Any]) -> bool:
        server, own = self.server, self.nonce
        assert own is not None              # the challenge was sent
        if auth.get("type") != "auth" or auth.get("version") != protocol.VERSION:
            raise ProtocolViolation(f"expected auth of protocol version {protocol.VERSION}")
        theirs = protocol.check_nonce(auth, "auth")
        if not protocol.verify(protocol.proof(server.secret, b"client", own, theirs), auth):
            server.counters["refused"] += 1
            self.send({"type": "error", "message": "authentication failed"})
            self._flush()
            self.transport.close()
            return False
        self.nonce = None
        self.frames.max_frame = server.max_frame
        self.send({**server.hello(), "proof": protocol.proof(server.secret, b"server", theirs, own)})
        return True

    def connection_lost(self, error: Exception | None) -> None:
        self.server.disconnected(self)

    def send(self, message: dict[str, Any]) -> None:
        self.write(protocol.pack(message))

    def write(self, frame: bytes) -> None:
        """Queue ``frame``; everything queued in this event-loop turn leaves in one write."""
        if not self.outgoing:
            self.loop.call_soon(self._flush)
        self.outgoing.append(frame)

    def _flush(self) -> None:
        outgoing, self.outgoing = self.outgoing, []
        if outgoing and not self.transport.is_closing():
            self.transport.write(b"".join(outgoing))
