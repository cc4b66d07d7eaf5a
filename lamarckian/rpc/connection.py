"""One caller-side connection: a DEALER socket to a server plus a monitor that reports the peer's death."""

from __future__ import annotations

import secrets
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from . import local, sockets
from .auth import HANDSHAKE_NONCE_BYTES, client_proof, proofs_equal, server_proof
from .errors import RPCError
from .settings import RpcSettings
from .wire import Kind, Message, Trust

MONITOR_PERIOD = 0.05   # seconds a blocking receive waits before the death reports are read
_DEATH_EVENTS = (zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                 | zmq.EVENT_HANDSHAKE_FAILED_AUTH)


class Connection:
    """A DEALER connected to ``endpoint["address"]``.

    ``alive`` turns False for good when the TCP connection drops (the process died: the kernel closed its
    sockets) or ZMTP heartbeats go unanswered for ``settings.timeout`` seconds (the host vanished).
    ``handle`` is what the caller knows the peer by (a Ray actor handle or a local object). ``sealed``: every
    message on this link carries an HMAC tag (else the handshake of :mod:`.auth` authenticates the connection
    once). ``trust`` is what is accepted from the peer: nothing but the handshake until the peer proved the
    secret (peers whose endpoint says no ``auth: handshake`` are trusted per sealed message from the start).
    The DEALER's routing id is 16 random bytes: the server's record of an authenticated peer cannot be claimed
    by another connection. With a node-local ``channel`` (:mod:`.local`) every message goes on the channel and
    the DEALER only carries heartbeats (a hung peer is still reported).
    """

    def __init__(self, context: zmq.Context, endpoint: dict[str, Any], settings: RpcSettings, handle: Any = None,
                 *, sealed: bool = True) -> None:
        self.endpoint = endpoint
        self.name: str = endpoint["name"]
        self.node: str = endpoint["node"]
        self.handle = handle
        self.alive = True
        self.death = ""
        self.handshakes = endpoint.get("auth") == "handshake"
        self.sealed = sealed or not self.handshakes
        self.trust = Trust.NONE if self.handshakes else Trust.SEALED
        self.socket = context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.ROUTING_ID, secrets.token_bytes(16))
        self.socket.setsockopt(zmq.RCVTIMEO, int(MONITOR_PERIOD * 1000))
        sockets.configure(self.socket, settings)
        if endpoint.get("curve_public_key"):
            sockets.make_client_curve(self.socket, endpoint["curve_public_key"])
        self.monitor = self.socket.get_monitor_socket(_DEATH_EVENTS)
        self.socket.connect(endpoint["address"])
        self.channel: local.Channel | None = None

    def died(self, why: str) -> None:
        """Mark the peer dead (its channel closed)."""
        if self.alive:
            self.alive = False
            self.death = why

    def answer_challenge(self, secret: bytes, nonce: bytes, message: Message) -> list[Any]:
        """Check the server's CHALLENGE to our HELLO ``nonce``; trust the peer from now on and return the PROOF
        body. Raises :class:`RPCError` if the peer does not prove it holds ``secret``."""
        value = message.value
        if not (message.kind == Kind.CHALLENGE and isinstance(value, list) and len(value) == 2
                and isinstance(value[0], bytes) and len(value[0]) == HANDSHAKE_NONCE_BYTES
                and proofs_equal(server_proof(secret, nonce, value[0]), value[1])):
            raise RPCError(f"{self.name} at {self.endpoint['address']} did not prove it holds the run secret "
                           "(a server of another run, or a wrong secret)")
        self.trust = Trust.SEALED if self.sealed else Trust.CHANNEL
        if self.channel is not None:
            self.channel.trusted = True
        return [client_proof(secret, value[0], nonce, self.sealed), self.sealed]

    def read_monitor(self) -> None:
        """Consume monitor events; a disconnect or failed handshake marks the peer dead."""
        while True:
            try:
                event = recv_monitor_message(self.monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            if event["event"] & _DEATH_EVENTS and self.alive:
                self.alive = False
                self.death = str(zmq.Event(event["event"]).name).lower()

    def close(self) -> None:
        """Close the sockets and the channel (idempotent)."""
        if self.channel is not None:
            self.channel.close()
        if not self.socket.closed:
            self.socket.disable_monitor()
            self.monitor.close()
            self.socket.close()
        self.alive = False

    def __repr__(self) -> str:
        return f"Connection({self.name} at {self.endpoint['address']}, {'alive' if self.alive else 'dead'})"
