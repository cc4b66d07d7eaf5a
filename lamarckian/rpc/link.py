"""The caller side: connections to a set of peers and the one loop that reads every reply.

All, Any and Gather each own a :class:`Link`. Calls are sent from the caller's thread and replies are
read in the same thread (no hand-off to a background thread: that is what keeps a round trip near the
raw socket's). Many requests may be in flight; each carries an id. A peer whose connection drops is
reported as :class:`ActorDiedError` by the next wait that needs it.

Each new connection passes the handshake of :mod:`.auth` before its first call; links between nodes without
CurveZMQ (or every link, ``rpc.mac: always``) then tag each message, the others trust the connection. Only the
data sockets are polled per call; the sockets reporting connection deaths are read when a poll times out
and every :data:`MONITOR_PERIOD` seconds while traffic flows.
"""

from __future__ import annotations

import collections
import itertools
import logging
import sys
import time
import weakref
from typing import Any, Iterable, Sequence

import zmq

from . import local, sockets
from . import relay as relay_module
from .auth import handshake_nonce, run_secret
from .connection import MONITOR_PERIOD, Connection
from .errors import ActorDiedError, ProtocolError, RemoteError, RPCError
from .processes import ProcessActor
from .settings import RpcSettings
from .wire import Kind, Message, Trust, Wire

log = logging.getLogger(__name__)

_MONITOR_MS = int(MONITOR_PERIOD * 1000)
_ANSWERS = frozenset({Kind.REPLY, Kind.ERROR, Kind.PONG, Kind.CHALLENGE})


def _ray_handle_type() -> type | None:
    ray = sys.modules.get("ray")
    return None if ray is None else ray.actor.ActorHandle


def start_endpoints(actors: Sequence[Any], secret: bytes, settings: RpcSettings, first_index: int = 0) -> list[dict]:
    """Ask each actor (Ray handle, :class:`ProcessActor` or local decorated object) to serve; returns their
    endpoints in order."""
    handle_type = _ray_handle_type()
    endpoints: list[Any] = [None] * len(actors)
    remote = {}
    children = {}
    for position, actor in enumerate(actors):
        if isinstance(actor, ProcessActor):     # asked together: the children build their objects in parallel
            actor.begin_start(secret, settings.to_mapping())
            children[position] = actor
            continue
        if handle_type is not None and isinstance(actor, handle_type):
            remote[position] = getattr(actor, "_lamarckian_rpc_start").remote(secret, settings.to_mapping())
            continue
        start = getattr(actor, "_lamarckian_rpc_start", None)
        if start is None:
            raise TypeError(f"{type(actor).__qualname__} is not decorated with @all, @any or @gather")
        endpoints[position] = start(secret, settings.to_mapping())
    for position, child in children.items():
        endpoints[position] = child.endpoint(settings.start_timeout, first_index + position)
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
        self._by_socket: dict[Any, Connection] = {}     # a ZeroMQ socket, or a channel's file descriptor
        self._local: list[Connection] = []
        self.pool = local.Pool()                        # blocks of frames sent to several node-local peers
        self._monitored: list[Connection] = []
        self._next_monitor_read = 0.0
        self._poller = zmq.Poller()
        self._node = sockets.node_id()
        self._finalizer = weakref.finalize(self, Link._shutdown, self.context, self.connections, self._relays,
                                           self.pool)
        self.add(list(actors))

    # --- membership ---------------------------------------------------------------------------------

    def add(self, actors: Sequence[Any]) -> list[Connection]:
        """Connect to more actors (appended in order) and check each answers the handshake."""
        endpoints = start_endpoints(actors, self.secret, self.settings, len(self.connections))
        added = []
        for actor, endpoint in zip(actors, endpoints):
            if self.pattern not in endpoint["patterns"]:
                raise TypeError(f"{endpoint['name']} is not decorated with @{self.pattern}")
            connection = Connection(self.context, endpoint, self.settings, actor, sealed=self.sealed_link(endpoint))
            connection.channel = self._open_channel(endpoint)
            added.append(self.attach(connection))
        try:
            self.handshake(added)
        except Exception:
            for connection in added:
                self.detach(connection)
            raise
        return added

    def sealed_link(self, endpoint: dict[str, Any]) -> bool:
        """Whether messages to and from ``endpoint`` carry a tag each: with ``rpc.mac: always``, or to
        another node without CurveZMQ."""
        if self.settings.mac == "always":
            return True
        return endpoint.get("node") != self._node and not endpoint.get("curve_public_key")

    def _open_channel(self, endpoint: dict[str, Any]) -> local.Channel | None:
        """A node-local channel to ``endpoint`` when it is on this node (``rpc.local: auto``), else None."""
        if (self.settings.local == "off" or not endpoint.get("local") or endpoint.get("node") != self._node
                or endpoint.get("machine") != local.machine_id()):
            return None
        try:
            return local.connect(endpoint["local"], self.settings.max_message_bytes)
        except OSError:
            return None     # it cannot be reached this way: ZeroMQ carries the link

    def handshake(self, connections: Sequence[Connection]) -> None:
        """Authenticate new connections both ways (HELLO, CHALLENGE, PROOF, PONG; a PING for peers without
        the handshake); raises :class:`RPCError` if a peer cannot prove it holds the secret."""
        timeout, what = self.settings.timeout, "the start handshake"
        legacy = [connection for connection in connections if not connection.handshakes]
        if legacy:
            self.wait(self.request(legacy, Kind.PING), timeout, what, late_is_dead=True)
        modern = [connection for connection in connections if connection.handshakes]
        if not modern:
            return
        nonce = handshake_nonce()
        challenges = self.wait(self.request(modern, Kind.HELLO, nonce), timeout, what, late_is_dead=True)
        request_id = self.next_id()
        for connection in modern:
            proof = connection.answer_challenge(self.secret, nonce, challenges[connection])
            self.send(connection, self.wire.pack(Kind.PROOF, request_id, proof, sealed=False))
        self._expect(request_id, modern)
        self.wait(request_id, timeout, what, late_is_dead=True)

    def attach(self, connection: Connection, member: bool = True) -> Connection:
        """Start polling ``connection``: an actor's (``member``) or a relay's."""
        key = connection.socket if connection.channel is None else connection.channel.fileno()
        self._by_socket[key] = connection
        self._poller.register(key, zmq.POLLIN)
        self._monitored.append(connection)
        if connection.channel is not None:
            self._local.append(connection)
        if member:
            self.connections.append(connection)
        return connection

    def detach(self, connection: Connection) -> None:
        """Stop polling and close ``connection``; the peer's server keeps running."""
        self._stop_polling(connection)
        if connection in self._monitored:
            self._monitored.remove(connection)
        if connection in self.connections:
            self.connections.remove(connection)
        self.generations.pop(connection, None)
        for waiting in self._awaiting.values():  # requests in flight no longer wait for a removed peer
            waiting.discard(connection)
        release = getattr(connection.handle, "_lamarckian_rpc_release", None)
        if release is not None and not isinstance(connection.handle, _ray_handle_type() or ()):
            release()
        connection.close()

    def _stop_polling(self, connection: Connection) -> None:
        """Forget ``connection``'s socket or channel descriptor (a closed channel's number may already be another
        socket's: only the entry that is still this connection's goes)."""
        key = connection.socket if connection.channel is None else connection.channel.fileno()
        if self._by_socket.get(key) is connection:
            self._poller.unregister(key)
            del self._by_socket[key]
        if connection in self._local:
            self._local.remove(connection)

    def _channel_closed(self, connection: Connection, closed: local.ChannelClosed) -> None:
        """The peer's channel closed (its process died): the peer is dead, and the channel's descriptor, closed
        now, is no longer polled."""
        connection.died(f"disconnected ({closed})")
        self._stop_polling(connection)

    def index(self, connection: Connection) -> int | None:
        return self.connections.index(connection) if connection in self.connections else None

    # --- sending ------------------------------------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    def post(self, connection: Connection, kind: Kind, request_id: int, value: Any = None) -> None:
        """Send one message that expects no reply (gather start, credits), framed for the connection."""
        self.send(connection, self.wire.pack(kind, request_id, value, sealed=connection.trust == Trust.SEALED))

    def send(self, connection: Connection, frames: list[Any]) -> None:
        if connection.channel is None:
            sockets.send_frames(connection.socket, frames)
        else:
            try:
                connection.channel.send(frames)
            except local.ChannelClosed as closed:
                self._channel_closed(connection, closed)
        for frame in frames:
            self.bytes_sent += len(frame)

    def request(self, connections: Sequence[Connection], kind: Kind, value: Any = None, *, relay: bool = False,
                request_id: int | None = None) -> int:
        """Send one message to each connection (encoded once per framing); returns its request id.
        With ``relay``, remote nodes holding several targets get one copy through a relay."""
        request_id = self.next_id() if request_id is None else request_id
        for connection in connections:
            if not connection.alive:
                raise ActorDiedError(connection.name, self.index(connection), connection.death)
        direct, relayed = self._relays.route(connections, self._node) if relay else (connections, {})
        packed: dict[tuple[bool, bool], list[Any]] = {}
        shared = sum(connection.channel is not None for connection in direct) > 1
        for connection in direct:       # encoded once per framing; large frames put once in shared memory
            sealed = connection.trust == Trust.SEALED
            key = (sealed, shared and connection.channel is not None)
            frames = packed.get(key)
            if frames is None:
                frames = packed.get((sealed, False)) or self.wire.pack(kind, request_id, value, sealed=sealed)
                frames = packed[key] = self.pool.share_large(frames) if key[1] else frames
            self.send(connection, frames)
        if relayed:  # the inner message travels on the relay's links inside its node
            inner = self.wire.pack(kind, request_id, value, sealed=self.settings.mac == "always")
            self._relays.forward(relayed, request_id, inner)
        self._expect(request_id, connections)
        return request_id

    def _expect(self, request_id: int, connections: Sequence[Connection]) -> None:
        self._awaiting[request_id] = set(connections)
        self._replies[request_id] = {}

    # --- receiving ----------------------------------------------------------------------------------

    def pump(self, timeout_ms: int | None) -> None:
        """Wait up to ``timeout_ms`` (None: up to :data:`MONITOR_PERIOD`) for traffic and dispatch everything
        that arrived; read the death reports when nothing came or the period is over."""
        stashed = [connection for connection in self._local
                   if connection.channel is not None and connection.channel.pending()]
        if stashed:         # messages read while a send waited: handle them without waiting
            timeout_ms = 0
        events = self._poller.poll(_MONITOR_MS if timeout_ms is None else min(timeout_ms, _MONITOR_MS))
        for sock, _ in events:
            connection = self._by_socket.get(sock)
            if connection is None:
                continue        # a channel that closed while this batch was read
            if connection.channel is None:
                for frames in sockets.readable_frames(sock):
                    self._dispatch(connection, frames)
            elif connection not in stashed:
                self._drain(connection)
        for connection in stashed:
            self._drain(connection)
        if not events or time.monotonic() >= self._next_monitor_read:
            self._read_monitors()

    def _drain(self, connection: Connection) -> None:
        """Dispatch every message waiting on a node-local connection; its closing marks the peer dead."""
        assert connection.channel is not None      # a node-local connection
        try:
            for frames in connection.channel.drain():
                self._dispatch(connection, frames)
        except local.ChannelClosed as closed:
            self._channel_closed(connection, closed)

    def _read_monitors(self) -> None:
        self._next_monitor_read = time.monotonic() + MONITOR_PERIOD
        for connection in self._monitored:
            if connection.alive:
                connection.read_monitor()
                if not connection.alive:  # a reply sent just before the death still counts
                    if connection.channel is not None:
                        self._drain(connection)
                        continue
                    for frames in sockets.readable_frames(connection.socket):
                        self._dispatch(connection, frames)

    def _receive_for(self, request_id: int, timeout_ms: int | None) -> None:
        """Wait for traffic that ``request_id`` needs: with one peer and no relay, a blocking receive on its
        socket (up to :data:`MONITOR_PERIOD`, then the death reports are read); else :meth:`pump`."""
        awaiting = self._awaiting[request_id]
        if len(awaiting) != 1 or self._relays.pending(request_id):
            self.pump(timeout_ms)
            return
        connection = next(iter(awaiting))
        frames = self._receive_one(connection)
        if frames is not None:
            self._dispatch(connection, frames)

    def _receive_one(self, connection: Connection) -> list[Any] | None:
        """One message from ``connection``, waiting up to :data:`MONITOR_PERIOD`; None (after reading the death
        reports) if none came."""
        channel = connection.channel
        try:
            if channel is None:
                return sockets.recv_frames(connection.socket)
            frames = channel.recv(MONITOR_PERIOD, self.settings.spin)
        except zmq.Again:
            frames = None
        except local.ChannelClosed as closed:
            self._channel_closed(connection, closed)
            return None
        if frames is None:
            self._read_monitors()
        return frames

    def _dispatch(self, connection: Connection, frames: Sequence[Any], trust: Trust | None = None) -> None:
        try:
            message = self.wire.unpack(frames, connection.trust if trust is None else trust)
        except ProtocolError as error:
            self.dropped[error.reason] += 1
            if self.dropped[error.reason] == 1:
                log.warning("rpc: dropped a message from %s: %s (the first %s message of this link; later ones are "
                            "counted)", connection.name, error, error.reason)
            return
        if message.kind == Kind.RELAY_REPLY:  # authenticated as a whole: the inner replies are trusted
            for target, inner in self._relays.unwrap(connection, message):
                if inner is not None:
                    self._dispatch(target, inner, Trust.CHANNEL)
            return
        self.deliver(connection, message)

    def deliver(self, connection: Connection, message: Message) -> None:
        awaiting = self._awaiting.get(message.request_id)
        if awaiting is not None and connection in awaiting and message.kind in _ANSWERS:
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

    def wait(self, request_id: int, timeout: float | None = None, what: str = "a call",
             late_is_dead: bool = False) -> dict[Connection, Message]:
        """Block until every peer of ``request_id`` replied; returns their messages (and forgets the id). No
        answer within ``timeout`` s raises :class:`RPCError`, or with ``late_is_dead`` :class:`ActorDiedError`
        naming the first peer that did not answer (a start handshake: a peer that stays silent for
        ``rpc.timeout`` is dead by definition)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.done(request_id):
            self.check_alive(request_id)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                late = [c for c in self.connections if c in self._awaiting[request_id]]
                self.forget(request_id)
                message = (f"no answer to {what} from {', '.join(c.name for c in late)} within {timeout}s "
                           "(wrong secret, another protocol version, or a firewall?)")
                if late_is_dead and late:
                    raise ActorDiedError(late[0].name, self.index(late[0]), message)
                raise RPCError(message)
            self._receive_for(request_id, None if remaining is None else max(1, int(remaining * 1000)))
        self._relays.finish(request_id)
        if self._awaiting.pop(request_id, None) is None:
            raise RPCError(f"request {request_id} was abandoned after a peer died")
        return self._replies.pop(request_id)

    def call(self, connection: Connection, value: Any) -> Any:
        """One CALL to one peer while nothing else waits for a reply (the lean path of ``Any``): send, then
        block on that peer's socket; returns the result or raises the remote error. Other traffic that arrives
        meanwhile (gathered items, late replies) is dispatched as usual."""
        request_id = next(self._ids)
        if not connection.alive:
            raise ActorDiedError(connection.name, self.index(connection), connection.death)
        self.send(connection, self.wire.pack(Kind.CALL, request_id, value, sealed=connection.trust == Trust.SEALED))
        while True:
            frames = self._receive_one(connection)
            if frames is None:
                if not connection.alive:
                    raise ActorDiedError(connection.name, self.index(connection), connection.death)
                continue
            try:
                message = self.wire.unpack(frames, connection.trust)
            except ProtocolError as error:
                self.dropped[error.reason] += 1
                continue
            if message.request_id == request_id and (message.kind == Kind.REPLY or message.kind == Kind.ERROR):
                return self.value(connection, message)
            self.deliver(connection, message)

    def idle(self) -> bool:
        """No request waits for a reply."""
        return not self._awaiting

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
    def _shutdown(context: zmq.Context, connections: list[Connection], relays: "relay_module.Relays",
                  pool: local.Pool) -> None:
        relays.close()
        for connection in connections:
            connection.close()
        pool.close()
        context.term()


def raise_remote(body: Any, fallback_actor: str) -> None:
    """Raise the :class:`RemoteError` described by an ERROR body."""
    if isinstance(body, list) and len(body) == 4 and all(isinstance(part, str) for part in body):
        raise RemoteError(*body)
    raise RemoteError("unknown", repr(body), "", fallback_actor)
