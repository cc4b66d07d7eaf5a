"""The caller side: connections to a set of peers and the one loop that reads every reply.

All, Any and Gather each own a :class:`Link`. Calls are sent from the caller's thread and replies are
read in the same thread (no hand-off to a background thread: that is what keeps a round trip near the
raw socket's). Many requests may be in flight; each carries an id. A peer whose connection drops is
reported as :class:`ActorDiedError` by the next wait that needs it.
"""

from __future__ import annotations

import collections
import itertools
import sys
import time
import weakref
from typing import Any, Iterable, Sequence

import zmq

from . import relay as relay_module
from . import sockets
from .auth import run_secret
from .connection import Connection
from .errors import ActorDiedError, ProtocolError, RemoteError, RPCError
from .settings import RpcSettings
from .wire import Kind, Message, Wire


def _ray_handle_type() -> type | None:
    ray = sys.modules.get("ray")
    return None if ray is None else ray.actor.ActorHandle


def start_endpoints(actors: Sequence[Any], secret: bytes, settings: RpcSettings, first_index: int = 0) -> list[dict]:
    """Ask each actor (Ray handle or local decorated object) to serve; returns their endpoints in order."""
    handle_type = _ray_handle_type()
    endpoints: list[Any] = [None] * len(actors)
    remote = {}
    for position, actor in enumerate(actors):
        if handle_type is not None and isinstance(actor, handle_type):
            remote[position] = actor._lamarckian_rpc_start.remote(secret, settings.to_mapping())
            continue
        start = getattr(actor, "_lamarckian_rpc_start", None)
        if start is None:
            raise TypeError(f"{type(actor).__qualname__} is not decorated with @all, @any or @gather")
        endpoints[position] = start(secret, settings.to_mapping())
    if remote:
        import ray

        for position, future in remote.items():
            try:
                endpoints[position] = ray.get(future, timeout=settings.start_timeout)
            except ray.exceptions.RayActorError as error:
                raise ActorDiedError(repr(actors[position]), first_index + position, "before it could serve") from error
            except ray.exceptions.GetTimeoutError:
                raise ActorDiedError(repr(actors[position]), first_index + position,
                                     f"not started within rpc.start_timeout={settings.start_timeout}s") from None
    return endpoints


class Link:
    """Connections to peers, in order, plus per-request reply bookkeeping and the gather queue."""

    def __init__(self, actors: Iterable[Any], pattern: str, settings: RpcSettings | dict | None = None,
                 secret: bytes | None = None) -> None:
        self.settings = settings if isinstance(settings, RpcSettings) else RpcSettings.from_mapping(settings)
        self.secret = run_secret() if secret is None else bytes(secret)
        self.pattern = pattern
        self.wire = Wire(self.secret, self.settings)
        self.context = zmq.Context(io_threads=1)
        self.connections: list[Connection] = []
        self.bytes_sent = 0
        self.dropped: collections.Counter[str] = collections.Counter()
        self.items: collections.deque[tuple[Connection, Message]] = collections.deque()
        self.generations: dict[Connection, int] = {}
        self._ids = itertools.count(1)
        self._awaiting: dict[int, set[Connection]] = {}
        self._replies: dict[int, dict[Connection, Message]] = {}
        self._relays = relay_module.Relays(self)
        self._by_socket: dict[zmq.Socket, Connection] = {}
        self._poller = zmq.Poller()
        self._node = sockets.node_id()
        self._finalizer = weakref.finalize(self, Link._shutdown, self.context, self.connections, self._relays)
        self.add(list(actors))

    # --- membership ---------------------------------------------------------------------------------

    def add(self, actors: Sequence[Any]) -> list[Connection]:
        """Connect to more actors (appended in order) and check each answers the handshake."""
        endpoints = start_endpoints(actors, self.secret, self.settings, len(self.connections))
        added = []
        for actor, endpoint in zip(actors, endpoints):
            if self.pattern not in endpoint["patterns"]:
                raise TypeError(f"{endpoint['name']} is not decorated with @{self.pattern}")
            added.append(self.attach(Connection(self.context, endpoint, self.settings, actor)))
        try:
            self.wait(self.request(added, Kind.PING), timeout=self.settings.timeout, what="the start handshake")
        except Exception:
            for connection in added:
                self.detach(connection)
            raise
        return added

    def attach(self, connection: Connection, member: bool = True) -> Connection:
        """Start polling ``connection``: an actor's (``member``) or a relay's."""
        self._by_socket[connection.socket] = connection
        self._by_socket[connection.monitor] = connection
        self._poller.register(connection.socket, zmq.POLLIN)
        self._poller.register(connection.monitor, zmq.POLLIN)
        if member:
            self.connections.append(connection)
        return connection

    def detach(self, connection: Connection) -> None:
        """Stop polling and close ``connection``; the peer's server keeps running."""
        for sock in (connection.socket, connection.monitor):
            if sock in self._by_socket:
                self._poller.unregister(sock)
                del self._by_socket[sock]
        if connection in self.connections:
            self.connections.remove(connection)
        self.generations.pop(connection, None)
        for waiting in self._awaiting.values():  # requests in flight no longer wait for a removed peer
            waiting.discard(connection)
        release = getattr(connection.handle, "_lamarckian_rpc_release", None)
        if release is not None and not isinstance(connection.handle, _ray_handle_type() or ()):
            release()
        connection.close()

    def index(self, connection: Connection) -> int | None:
        return self.connections.index(connection) if connection in self.connections else None

    # --- sending ------------------------------------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    def send(self, connection: Connection, frames: list[Any]) -> None:
        sockets.send_frames(connection.socket, frames)
        self.bytes_sent += sum(memoryview(frame).nbytes for frame in frames)

    def request(self, connections: Sequence[Connection], kind: Kind, value: Any = None, *, relay: bool = False,
                request_id: int | None = None) -> int:
        """Send one message to each connection (encoded and signed once); returns its request id.
        With ``relay``, remote nodes holding several targets get one copy through a relay."""
        request_id = self.next_id() if request_id is None else request_id
        for connection in connections:
            if not connection.alive:
                raise ActorDiedError(connection.name, self.index(connection), connection.death)
        frames = self.wire.pack(kind, request_id, value)
        direct, relayed = self._relays.route(connections, self._node) if relay else (list(connections), {})
        for connection in direct:
            self.send(connection, frames)
        for relay_connection, targets in relayed.items():
            self._relays.forward(relay_connection, targets, request_id, frames)
        self._awaiting[request_id] = set(connections)
        self._replies[request_id] = {}
        return request_id

    # --- receiving ----------------------------------------------------------------------------------

    def pump(self, timeout_ms: int | None) -> None:
        """Wait up to ``timeout_ms`` (None: forever) for traffic and dispatch everything that arrived."""
        events = self._poller.poll(timeout_ms)
        monitors = []
        for sock, _ in events:
            connection = self._by_socket[sock]
            if sock is connection.monitor:
                monitors.append(connection)
                continue
            for frames in sockets.readable_frames(sock):
                self._dispatch(connection, frames)
        for connection in monitors:  # after the data: a reply sent just before death still counts
            connection.read_monitor()

    def _dispatch(self, connection: Connection, frames: list[zmq.Frame]) -> None:
        try:
            message = self.wire.unpack(frames)
        except ProtocolError as error:
            self.dropped[error.reason] += 1
            return
        if message.kind == Kind.RELAY_REPLY:
            for target, inner in self._relays.unwrap(connection, message):
                if inner is not None:
                    self._dispatch(target, inner)
            return
        self.deliver(connection, message)

    def deliver(self, connection: Connection, message: Message) -> None:
        awaiting = self._awaiting.get(message.request_id)
        if awaiting is not None and connection in awaiting and message.kind in (Kind.REPLY, Kind.ERROR, Kind.PONG):
            awaiting.discard(connection)
            self._replies[message.request_id][connection] = message
        elif self.generations.get(connection) == message.request_id and message.kind in (Kind.GATHER_ITEM, Kind.ERROR):
            self.items.append((connection, message))
        else:
            self.dropped["stale"] += 1

    def done(self, request_id: int) -> bool:
        return not self._awaiting.get(request_id)

    def check_alive(self, request_id: int) -> None:
        """Raise ActorDiedError if a peer this request still waits for (or its relay) is dead."""
        try:
            for connection in self._awaiting.get(request_id, ()):
                if not connection.alive:
                    raise ActorDiedError(connection.name, self.index(connection), connection.death)
            self._relays.check_alive(request_id)
        except ActorDiedError:
            self.forget(request_id)
            raise

    def wait(self, request_id: int, timeout: float | None = None, what: str = "a call") -> dict[Connection, Message]:
        """Block until every peer of ``request_id`` replied; returns their messages (and forgets the id)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.done(request_id):
            self.check_alive(request_id)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                late = ", ".join(c.name for c in self._awaiting[request_id])
                self.forget(request_id)
                raise RPCError(f"no answer to {what} from {late} within {timeout}s "
                               "(wrong secret, another protocol version, or a firewall?)")
            self.pump(None if remaining is None else max(1, int(remaining * 1000)))
        self._relays.finish(request_id)
        if self._awaiting.pop(request_id, None) is None:
            raise RPCError(f"request {request_id} was abandoned after a peer died")
        return self._replies.pop(request_id)

    def forget(self, request_id: int) -> None:
        """Drop a request: replies still on their way are discarded as stale."""
        self._awaiting.pop(request_id, None)
        self._replies.pop(request_id, None)
        self._relays.finish(request_id)

    def value(self, connection: Connection, message: Message) -> Any:
        """The reply's value, or raise the remote error it carries."""
        if message.kind == Kind.ERROR:
            raise_remote(message.value, connection.name)
        return message.value

    # --- closing ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection, relay and the ZeroMQ context; idempotent."""
        for connection in list(self.connections):
            self.detach(connection)
        self._finalizer()

    @staticmethod
    def _shutdown(context: zmq.Context, connections: list[Connection], relays: "relay_module.Relays") -> None:
        relays.close()
        for connection in connections:
            connection.close()
        context.term()


def raise_remote(body: Any, fallback_actor: str) -> None:
    """Raise the :class:`RemoteError` described by an ERROR body."""
    if isinstance(body, list) and len(body) == 4 and all(isinstance(part, str) for part in body):
        raise RemoteError(*body)
    raise RemoteError("unknown", repr(body), "", fallback_actor)
