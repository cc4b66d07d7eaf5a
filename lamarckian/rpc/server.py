"""Serve one object's public methods over a ZeroMQ ROUTER socket from one background thread.

Every call runs on the server thread, one at a time, in arrival order, interleaved with gather steps;
the served object therefore never sees two RPC calls at once. A ``@gather`` loop calls its method
once per credit the caller returns (back-pressure) and sends each result as it is made.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import os
import threading
import traceback
import weakref
from typing import Any

import zmq

from . import sockets
from .errors import ProtocolError
from .settings import RpcSettings
from .wire import Kind, Message, Wire

_live_servers: "weakref.WeakSet[Server]" = weakref.WeakSet()


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

    Subclasses implement :meth:`_handle` (one received message) and may add sockets to the poller and
    work to do between polls (:meth:`_idle_work` returns whether more is ready right away).
    """

    def __init__(self, *, name: str, secret: bytes, settings: RpcSettings) -> None:
        self.name = name
        self.secret = bytes(secret)
        self.settings = settings
        self.stats: collections.Counter[str] = collections.Counter()
        self._wire = Wire(secret, settings)
        self._context = zmq.Context(io_threads=1)
        self._socket = self._context.socket(zmq.ROUTER)
        sockets.configure(self._socket, settings)
        self.curve_public_key = sockets.make_server_curve(self._socket) if settings.curve else None
        self.address = sockets.bind_random_port(self._socket, sockets.bind_host(settings))
        self._wake_send = self._context.socket(zmq.PAIR)
        self._wake_recv = self._context.socket(zmq.PAIR)
        wake_address = f"inproc://lamarckian-rpc-wake-{id(self)}"
        self._wake_recv.bind(wake_address)
        self._wake_send.connect(wake_address)
        self._poller = zmq.Poller()
        self._poller.register(self._socket, zmq.POLLIN)
        self._poller.register(self._wake_recv, zmq.POLLIN)
        self._thread = threading.Thread(target=self._run, name=f"lamarckian-rpc-{name}", daemon=True)
        self._thread.start()
        _live_servers.add(self)

    def stop(self) -> None:
        """Stop the thread and close every socket; idempotent."""
        if self._thread.is_alive():
            self._wake_send.send(b"")
            self._thread.join()
        if not self._context.closed:
            self._wake_send.close()
            self._context.term()
        _live_servers.discard(self)

    def _run(self) -> None:
        try:
            while True:
                events = self._poller.poll(0 if self._idle_work_ready() else None)
                for sock, _ in events:
                    if sock is self._wake_recv:
                        return
                    self._readable(sock)
                self._idle_work()
        finally:
            self._close_thread_sockets()
            self._socket.close()
            self._wake_recv.close()

    def _readable(self, sock: zmq.Socket) -> None:
        if sock is not self._socket:
            return
        for frames in sockets.readable_frames(sock):
            identity = frames[0].bytes
            try:
                self._handle(identity, self._wire.unpack(frames[1:]))
            except ProtocolError as error:
                self.stats[error.reason] += 1

    def _send(self, identity: bytes, kind: Kind, request_id: int, value: Any = None, extra: Any = ()) -> None:
        try:
            frames = self._wire.pack(kind, request_id, value, extra)
        except TypeError as error:  # the method returned something that cannot travel
            frames = self._wire.pack(Kind.ERROR, request_id, describe_error(error, self.name))
        sockets.send_frames(self._socket, [identity, *frames])

    def _handle(self, identity: bytes, message: Message) -> None:
        raise NotImplementedError

    def _idle_work_ready(self) -> bool:
        return False

    def _idle_work(self) -> None:
        """Work done after each poll (gather steps)."""

    def _close_thread_sockets(self) -> None:
        """Close sockets owned by the thread (a relay's target connections)."""


class Server(ServingThread):
    """Serves ``target`` until :meth:`stop`. ``stats`` counts served calls and dropped messages by reason."""

    def __init__(self, target: Any, *, name: str, secret: bytes, settings: RpcSettings, patterns: frozenset[str]) -> None:
        self.target = target
        self.patterns = patterns
        self.callers = 0
        self._loops: dict[bytes, _GatherLoop] = {}
        super().__init__(name=name, secret=secret, settings=settings)

    def endpoint(self) -> dict[str, Any]:
        """What a caller needs to connect: address, name, node, pid, patterns, CurveZMQ public key."""
        return {
            "address": self.address,
            "name": self.name,
            "node": sockets.node_id(),
            "pid": os.getpid(),
            "patterns": sorted(self.patterns),
            "curve_public_key": self.curve_public_key,
        }

    def _handle(self, identity: bytes, message: Message) -> None:
        handler = self._handlers.get(message.kind)
        if handler is None:
            raise ProtocolError("malformed", f"a server does not take {message.kind.name}")
        handler(self, identity, message.request_id, message.value)

    def _idle_work_ready(self) -> bool:
        return any(loop.credits > 0 for loop in self._loops.values())

    def _on_ping(self, identity: bytes, request_id: int, value: Any) -> None:
        self._send(identity, Kind.PONG, request_id, {"name": self.name, "patterns": sorted(self.patterns)})

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
        self._loops[identity] = _GatherLoop(method, args, kwargs, value[3], request_id)

    def _on_gather_stop(self, identity: bytes, request_id: int, value: Any) -> None:
        self._loops.pop(identity, None)
        self._send(identity, Kind.REPLY, request_id, None)

    def _on_credit(self, identity: bytes, request_id: int, value: Any) -> None:
        if not isinstance(value, int) or value < 0:
            raise ProtocolError("malformed", "a credit is a non-negative int")
        loop = self._loops.get(identity)
        if loop is not None and loop.generation == request_id:
            loop.credits += value

    def _idle_work(self) -> None:
        for identity, loop in list(self._loops.items()):
            if loop.credits <= 0:
                continue
            loop.credits -= 1
            try:
                result = loop.method(*loop.args, **loop.kwargs)
            except Exception as error:  # noqa: BLE001
                del self._loops[identity]
                self._send(identity, Kind.ERROR, loop.generation, describe_error(error, self.name))
                continue
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
