"""One caller-side connection: a DEALER socket to a server plus a monitor that reports the peer's death."""

from __future__ import annotations

from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from . import sockets
from .settings import RpcSettings

_DEATH_EVENTS = zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH


class Connection:
    """A DEALER connected to ``endpoint["address"]``.

    ``alive`` turns False for good when the TCP connection drops (the process died: the kernel closed its
    sockets) or ZMTP heartbeats go unanswered for ``settings.timeout`` seconds (the host vanished).
    ``handle`` is what the caller knows the peer by (a Ray actor handle or a local object).
    """

    def __init__(self, context: zmq.Context, endpoint: dict[str, Any], settings: RpcSettings, handle: Any = None) -> None:
        self.endpoint = endpoint
        self.name: str = endpoint["name"]
        self.node: str = endpoint["node"]
        self.handle = handle
        self.alive = True
        self.death = ""
        self.socket = context.socket(zmq.DEALER)
        sockets.configure(self.socket, settings)
        if endpoint.get("curve_public_key"):
            sockets.make_client_curve(self.socket, endpoint["curve_public_key"])
        self.monitor = self.socket.get_monitor_socket(_DEATH_EVENTS)
        self.socket.connect(endpoint["address"])

    def read_monitor(self) -> None:
        """Consume monitor events; a disconnect or failed handshake marks the peer dead."""
        while True:
            try:
                event = recv_monitor_message(self.monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            if event["event"] & _DEATH_EVENTS and self.alive:
                self.alive = False
                self.death = zmq.Event(event["event"]).name.lower()

    def close(self) -> None:
        """Close both sockets (idempotent)."""
        if not self.socket.closed:
            self.socket.disable_monitor()
            self.monitor.close()
            self.socket.close()
        self.alive = False

    def __repr__(self) -> str:
        return f"Connection({self.name} at {self.endpoint['address']}, {'alive' if self.alive else 'dead'})"
