"""Serve one object's public methods over a ZeroMQ ROUTER socket from one background thread.

Every call runs on the server thread, one at a time, in arrival order, interleaved with gather steps;
the served object therefore never sees two RPC calls at once. A ``@gather`` loop calls its method
once per credit the caller returns (back-pressure) and sends each result as it is made.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import logging
import os
import secrets
import threading
import traceback
import weakref
from typing import Any

import zmq

from . import local, sockets
from .auth import HANDSHAKE_NONCE_BYTES, client_proof, handshake_nonce, proofs_equal, server_proof
from .errors import ProtocolError
from .settings import RpcSettings
from .wire import HANDSHAKE_KINDS, Kind, Message, Trust, Wire

log = logging.getLogger(__name__)
_EVENTS, _POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)

_live_servers: "weakref.WeakSet[Server | ServingThread]" = weakref.WeakSet()


@dataclasses.dataclass
class _GatherLoop:
    method: Any
    args: tuple
    kwargs: dict
    credits: int
    generation: int


def describe_error(error: BaseException, actor: str) -> list[str]:
    """The ERROR body for ``error``: [type name, message, traceback text, actor name]."""
    cls = type(error)
    text = "".join(traceback.format_exception(cls, error, error.__traceback__))
    return [f"{cls.__module__}.{cls.__qualname__}", str(error), text, actor]


class ServingThread:
    """A ROUTER socket bound to an OS-assigned port, served from one daemon thread until :meth:`stop`.

    Every peer passes the handshake of :mod:`.auth` before anything else it sends is read; a peer that proved
    the secret and asked for a sealed link must tag every message. The thread blocks in ``recv`` on the one
    socket (no poller on the hot path); :meth:`stop` wakes it through an in-process peer of the same socket.
    Subclasses implement :meth:`_handle` (one authenticated message) and may do work between messages
    (:meth:`_idle_work`, when :meth:`_idle_work_ready`).
    """

    MAX_PENDING_HANDSHAKES = 1024

    def __init__(self, *, name: str, secret: bytes, settings: RpcSettings) -> None:
        self.name = name
        self.secret = bytes(secret)
        self.settings = settings
        self.stats: collections.Counter[str] = collections.Counter()
        self._wire = Wire(secret, settings)
        self._peers: dict[bytes, Trust] = {}
        self._serial = threading.Lock()      # one message (or gather step) at a time, whichever thread reads it
        self._channels: dict[bytes, local.Channel] = {}     # node-local peers (see Server), by identity
        self._challenges: collections.OrderedDict[bytes, tuple[bytes, bytes]] = collections.OrderedDict()
        self._context = zmq.Context(io_threads=1)
        self._socket = self._context.socket(zmq.ROUTER)
        sockets.configure(self._socket, settings)
        self.curve_public_key = sockets.make_server_curve(self._socket) if settings.curve else None
        self.address = sockets.bind_random_port(self._socket, sockets.bind_host(settings))
        wake_address = f"inproc://lamarckian-rpc-wake-{id(self)}"
        self._socket.bind(wake_address)
        self._wake_identity = secrets.token_bytes(16)
        self._wake = self._context.socket(zmq.DEALER)
        self._wake.setsockopt(zmq.ROUTING_ID, self._wake_identity)
        self._wake.connect(wake_address)
        self._thread = threading.Thread(target=self._run, name=f"lamarckian-rpc-{name}", daemon=True)
        self._thread.start()
        _live_servers.add(self)

    def stop(self) -> None:
        """Stop the thread and close every socket; idempotent."""
        if self._thread.is_alive():
            self._wake.send(b"")
            self._thread.join()
        if not self._context.closed:
            self._wake.close()
            self._context.term()
        _live_servers.discard(self)

    def _run(self) -> None:
        sock = self._socket
        try:
            while True:
                if self._idle_work_ready():
                    while sock.get(_EVENTS) & _POLLIN:       # type: ignore[operator]  # EVENTS is an int option
                        if not self._receive(sock):
                            return
                    with self._serial:
                        self._idle_work()
                elif not self._receive(sock):
                    return
        finally:
            self._close_thread_sockets()
            sock.close()

    def _receive(self, sock: zmq.Socket) -> bool:
        """Read and serve one message (blocking); False when it was the wake-up of :meth:`stop`."""
        frames = sockets.recv_frames(sock)
        identity = frames[0].bytes
        if identity == self._wake_identity:
            return False
        with self._serial:
            self._serve(identity, frames[1:])
        return True

    def _serve(self, identity: bytes, frames: list[Any]) -> None:
        """Check and serve one message of peer ``identity`` (the caller holds ``_serial``)."""
        try:
            message = self._wire.unpack(frames, self._peers.get(identity, Trust.NONE))
            if message.kind in HANDSHAKE_KINDS:
                self._handshake(identity, message)
            else:
                self._handle(identity, message)
        except ProtocolError as error:
            self.stats[error.reason] += 1
            if self.stats[error.reason] == 1:
                log.warning("rpc: %s dropped a message: %s (the first %s message; later ones are counted)", self.name,
                            error, error.reason)

    def _handshake(self, identity: bytes, message: Message) -> None:
        """HELLO -> CHALLENGE; PROOF -> the peer is authenticated (sealed or not, as it proved) -> PONG."""
        if message.kind == Kind.HELLO:
            if not (isinstance(message.value, bytes) and len(message.value) == HANDSHAKE_NONCE_BYTES):
                raise ProtocolError("malformed", "a hello is a 32-byte nonce")
            server_nonce = handshake_nonce()
            self._challenges[identity] = (message.value, server_nonce)
            self._challenges.move_to_end(identity)
            while len(self._challenges) > self.MAX_PENDING_HANDSHAKES:  # a flood of hellos cannot grow memory
                self._challenges.popitem(last=False)
            proof = server_proof(self.secret, message.value, server_nonce)
            self._send(identity, Kind.CHALLENGE, message.request_id, [server_nonce, proof])
            return
        if message.kind != Kind.PROOF:
            raise ProtocolError("malformed", f"a server does not take {message.kind.name}")
        pending = self._challenges.pop(identity, None)
        value = message.value
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[1], bool)):
            raise ProtocolError("malformed", "a proof is [proof, sealed]")
        if pending is None or not proofs_equal(client_proof(self.secret, pending[1], pending[0], value[1]), value[0]):
            raise ProtocolError("unauthenticated", "handshake proof does not match this connection's challenge")
        self._peers[identity] = Trust.SEALED if value[1] else Trust.CHANNEL
        self.stats["handshakes"] += 1
        self._send(identity, Kind.PONG, message.request_id, self._greeting())

    def _greeting(self) -> dict[str, Any]:
        """The PONG body: who answers."""
        raise NotImplementedError

    def _send(self, identity: bytes, kind: Kind, request_id: int, value: Any = None, extra: Any = ()) -> None:
        sealed = self._peers.get(identity) == Trust.SEALED
        try:
            frames = self._wire.pack(kind, request_id, value, extra, sealed=sealed)
        except TypeError as error:  # the method returned something that cannot travel
            frames = self._wire.pack(Kind.ERROR, request_id, describe_error(error, self.name), sealed=sealed)
        channel = self._channels.get(identity)
        if channel is None:
            sockets.send_frames(self._socket, [identity, *frames])
            return
        try:
            channel.send(frames)
        except local.ChannelClosed:
            pass                # the channel's thread sees it closed and cleans up

    def _handle(self, identity: bytes, message: Message) -> None:
        raise NotImplementedError

    def _idle_work_ready(self) -> bool:
        return False

    def _idle_work(self) -> None:
        """Work done between messages (gather steps)."""

    def _close_thread_sockets(self) -> None:
        """Close sockets owned by the thread (a relay's target connections)."""


class Server(ServingThread):
    """Serves ``target`` until :meth:`stop`. ``stats`` counts served calls and dropped messages by reason."""

    def __init__(self, target: Any, *, name: str, secret: bytes, settings: RpcSettings,
                 patterns: frozenset[str]) -> None:
        self.target = target
        self.patterns = patterns
        self.callers = 0
        self._loops: dict[bytes, _GatherLoop] = {}           # of ZeroMQ peers (stepped by the ZeroMQ thread)
        self._local_loops: dict[bytes, _GatherLoop] = {}     # of node-local peers (each stepped by its thread)
        self._channel_threads: list[threading.Thread] = []
        self._listener: local.Listener | None = None
        super().__init__(name=name, secret=secret, settings=settings)
        self.local_name = self._serve_locally()

    def _serve_locally(self) -> str | None:
        """Accept node-local channels (:mod:`.local`) too; returns the listener's name (None when
        ``rpc.local`` is off or the platform lacks it)."""
        if self.settings.local == "off" or not local.available():
            return None
        if self._listener is None:
            self._listener = local.Listener(self._start_channel, self.settings.max_message_bytes)
        return self._listener.name

    def _start_channel(self, channel: local.Channel) -> None:
        thread = threading.Thread(target=self._run_channel, args=(channel,), name=f"lamarckian-rpc-{self.name}-local",
                                  daemon=True)
        self._channel_threads = [alive for alive in self._channel_threads if alive.is_alive()]
        self._channel_threads.append(thread)
        thread.start()

    def _run_channel(self, channel: local.Channel) -> None:
        """Serve one node-local caller until it goes away: its messages, then its gather steps when it has
        credits (the same rules as the ZeroMQ thread, one message at a time across both)."""
        identity = secrets.token_bytes(16)
        self._channels[identity] = channel
        try:
            while True:
                loop = self._local_loops.get(identity)
                if loop is not None and loop.credits > 0:
                    for frames in channel.drain():
                        self._serve_locked(identity, frames, channel)
                    with self._serial:
                        self._gather_step(self._local_loops, identity)
                else:
                    message = channel.recv(None, self.settings.spin, adaptive=True)
                    assert message is not None          # no timeout: a message or ChannelClosed
                    self._serve_locked(identity, message, channel)
        except local.ChannelClosed:
            pass
        finally:
            with self._serial:
                self._channels.pop(identity, None)
                self._peers.pop(identity, None)
                self._local_loops.pop(identity, None)
            channel.close()

    def _serve_locked(self, identity: bytes, frames: list[Any], channel: local.Channel) -> None:
        with self._serial:
            self._serve(identity, frames)
            if not channel.trusted and identity in self._peers:
                channel.trusted = True

    def stop(self) -> None:
        """Stop every thread (node-local ones first) and close every socket; idempotent."""
        if self._listener is not None:
            self._listener.stop()
        for channel in list(self._channels.values()):
            channel.shutdown()
        for thread in self._channel_threads:
            thread.join(timeout=5)
        super().stop()

    def endpoint(self) -> dict[str, Any]:
        """What a caller needs to connect: address, name, node, pid, patterns, CurveZMQ public key."""
        return {
            "address": self.address,
            "name": self.name,
            "node": sockets.node_id(),
            "pid": os.getpid(),
            "patterns": sorted(self.patterns),
            "curve_public_key": self.curve_public_key,
            "auth": "handshake",
            "local": self.local_name,
            "machine": local.machine_id(),
        }

    def _handle(self, identity: bytes, message: Message) -> None:
        handler = self._handlers.get(message.kind)
        if handler is None:
            raise ProtocolError("malformed", f"a server does not take {message.kind.name}")
        handler(self, identity, message.request_id, message.value)

    def _idle_work_ready(self) -> bool:
        return bool(self._loops) and any(loop.credits > 0 for loop in self._loops.values())

    def _loops_of(self, identity: bytes) -> dict[bytes, _GatherLoop]:
        return self._local_loops if identity in self._channels else self._loops

    def _greeting(self) -> dict[str, Any]:
        return {"name": self.name, "patterns": sorted(self.patterns)}

    def _on_ping(self, identity: bytes, request_id: int, value: Any) -> None:
        self._send(identity, Kind.PONG, request_id, self._greeting())

    def _resolve(self, call: Any) -> tuple[Any, tuple, dict]:
        if not (isinstance(call, list) and len(call) == 3 and isinstance(call[0], str)
                and isinstance(call[1], list) and isinstance(call[2], dict)):
            raise ProtocolError("malformed", "a call is [method, args, kwargs]")
        name, args, kwargs = call
        if name.startswith("_"):
            raise AttributeError(f"{self.name}: private method {name!r} cannot be called remotely")
        method = getattr(self.target, name)
        if not callable(method):
            raise TypeError(f"{self.name}.{name} is not callable")
        return method, tuple(args), kwargs

    def _on_call(self, identity: bytes, request_id: int, value: Any) -> None:
        try:
            method, args, kwargs = self._resolve(value)
            result = method(*args, **kwargs)
        except ProtocolError:
            raise
        except Exception as error:  # noqa: BLE001 - every remote failure goes back to the caller
            self._send(identity, Kind.ERROR, request_id, describe_error(error, self.name))
            return
        self.stats["served"] += 1
        self._send(identity, Kind.REPLY, request_id, result)

    def _on_gather_start(self, identity: bytes, request_id: int, value: Any) -> None:
        if not (isinstance(value, list) and len(value) == 4 and isinstance(value[3], int) and value[3] >= 0):
            raise ProtocolError("malformed", "a gather start is [method, args, kwargs, credits]")
        try:
            method, args, kwargs = self._resolve(value[:3])
        except ProtocolError:
            raise
        except Exception as error:  # noqa: BLE001
            self._send(identity, Kind.ERROR, request_id, describe_error(error, self.name))
            return
        self._loops_of(identity)[identity] = _GatherLoop(method, args, kwargs, value[3], request_id)

    def _on_gather_stop(self, identity: bytes, request_id: int, value: Any) -> None:
        self._loops_of(identity).pop(identity, None)
        self._send(identity, Kind.REPLY, request_id, None)

    def _on_credit(self, identity: bytes, request_id: int, value: Any) -> None:
        if not isinstance(value, int) or value < 0:
            raise ProtocolError("malformed", "a credit is a non-negative int")
        loop = self._loops_of(identity).get(identity)
        if loop is not None and loop.generation == request_id:
            loop.credits += value

    def _idle_work(self) -> None:
        for identity in list(self._loops):
            self._gather_step(self._loops, identity)

    def _gather_step(self, loops: dict[bytes, _GatherLoop], identity: bytes) -> None:
        """Make and send one item of ``identity``'s gather loop if it has a credit (the caller holds ``_serial``)."""
        loop = loops.get(identity)
        if loop is None or loop.credits <= 0:
            return
        loop.credits -= 1
        try:
            result = loop.method(*loop.args, **loop.kwargs)
        except Exception as error:  # noqa: BLE001
            del loops[identity]
            self._send(identity, Kind.ERROR, loop.generation, describe_error(error, self.name))
            return
        self.stats["gathered"] += 1
        self._send(identity, Kind.GATHER_ITEM, loop.generation, result)

    _handlers = {
        Kind.PING: _on_ping,
        Kind.CALL: _on_call,
        Kind.GATHER_START: _on_gather_start,
        Kind.GATHER_STOP: _on_gather_stop,
        Kind.CREDIT: _on_credit,
    }


@atexit.register
def _stop_all_servers() -> None:
    for server in list(_live_servers):
        server.stop()
