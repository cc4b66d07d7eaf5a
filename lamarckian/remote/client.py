"""The CurveZMQ connection of a worker or the trainer to the relay: requests with ids, answers matched by id.

The server's public key authenticates the server to us; our key pair authenticates us to the server's allow-list.
A refused key is reported at once (libzmq's handshake event), not as a silent time-out.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any, Mapping

import zmq
from zmq.utils.monitor import recv_monitor_message

from .keys import load_pair, load_public
from .protocol import Malformed, pack, unpack

RESEND = 5.0    # seconds without an answer before a request is sent again

class KeyRefused(RuntimeError):
    """The server refused this key (not on its allow-list, revoked, or banned)."""


class ServerSilent(TimeoutError):
    """No answer from the server within the time-out."""


class Client:
    """A DEALER connected to ``address`` under CurveZMQ.

    Args:
        address: ``tcp://HOST:PORT`` of the server.
        key_file: this peer's ``NAME.key_secret``.
        server_key_file: the server's public ``.key``.
        timeout: seconds :meth:`request` waits for an answer.
        hwm: messages queued to send at most (further sends are refused, see :meth:`send`).
    """

    def __init__(self, address: str, key_file: Path | str, server_key_file: Path | str, timeout: float = 30.0,
                 hwm: int = 4) -> None:
        self.address, self.key_file, self.timeout = address, str(key_file), timeout
        public, secret = load_pair(key_file)
        self.public_key = public
        server_key = load_public(server_key_file)
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.SNDHWM, hwm)
        self.socket.curve_publickey, self.socket.curve_secretkey, self.socket.curve_serverkey = public, secret, \
            server_key
        self.monitor = self.socket.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH
                                                      | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                                                      | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        try:
            self.socket.connect(address)
        except zmq.ZMQError as error:
            self.close()
            raise ValueError(f"--server {address}: {error}") from None
        self.poller = zmq.Poller()
        self.poller.register(self.socket, zmq.POLLIN)
        self.poller.register(self.monitor, zmq.POLLIN)
        self.ids = itertools.count(1)
        self.connected = False

    def send(self, message: Mapping[str, Any]) -> int | None:
        """Send without waiting; the request id, or None when the send queue is full (the server is away)."""
        request_id = next(self.ids)
        try:
            self.socket.send_multipart(pack({**message, "id": request_id}), zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return None
        return request_id

    def receive(self, timeout: float | None) -> dict[str, Any] | None:
        """The next answer, waiting up to ``timeout`` seconds (None: forever); None when none came. KeyRefused
        when the server refused our key meanwhile."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            events = dict(self.poller.poll(None if left is None else round(left * 1000)))
            if self.monitor in events:
                self._read_monitor()
            if self.socket in events:
                try:
                    return unpack(self.socket.recv_multipart(copy=False))
                except Malformed as error:
                    raise RuntimeError(f"the server at {self.address} sent a malformed message: {error}") from None
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def _read_monitor(self) -> None:
        while self.monitor.poll(0):
            event = recv_monitor_message(self.monitor)
            if event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.connected = True
            elif event["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                raise KeyRefused(f"the server at {self.address} refused the key {self.key_file}: it is not on the "
                                 "server's allow-list, was revoked, or was banned for breaking the protocol")
            else:
                raise KeyRefused(f"the CurveZMQ handshake with {self.address} failed: is that the server whose "
                                 "public key was given?")

    def request(self, message: Mapping[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Send ``message`` and return its answer (answers to earlier requests are skipped); ServerSilent after
        ``timeout`` (default: the client's) seconds. The request is sent again after every :data:`RESEND` seconds
        without its answer (a server killed with it in flight never answers it; the restarted one answers the next
        copy), and the first answer to any copy is the answer."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        sent: set[int] = set()
        while time.monotonic() < deadline:
            request_id = self.send(message)
            if request_id is None:
                self.receive(0.05)
                continue
            sent.add(request_id)
            resend = min(deadline, time.monotonic() + RESEND)
            while (answer := self.receive(max(0.0, resend - time.monotonic()))) is not None:
                if answer["id"] in sent:
                    return answer
        if not sent:
            raise ServerSilent(f"could not send to the server at {self.address} for {timeout:.0f} s")
        raise ServerSilent(f"no answer from the server at {self.address} for {timeout:.0f} s")

    def reconnect(self) -> None:
        """A new connection (a new handshake): after a silence, so that a revoked or banned key learns it
        (KeyRefused from the next :meth:`receive`) and a restarted server is found again."""
        self.socket.disconnect(self.address)
        self.socket.connect(self.address)

    def close(self) -> None:
        self.socket.disable_monitor()
        self.monitor.close(0)
        self.socket.close(0)
        self.context.term()
