"""Per-node relays: a broadcast crosses the network once per node, then fans out on that node.

Caller side, :class:`Relays` decides which targets go through a relay (``rpc.relay``), starts one relay
process per remote node on demand (a Ray actor pinned to the node) and unwraps its answers. The relay
(:class:`FanOutRelay`) verifies the caller's RELAY message, forwards the inner frames (framed for the links inside
the node) to each target over its own authenticated connections, and returns the targets' replies in one
RELAY_REPLY. Its links to the targets are node-local channels (:mod:`.local`) where the targets serve them: a
large frame is then copied once into shared memory and the same block goes to every target of the node, instead
of once per target through the host's TCP stack. A target that dies is reported as a reply of size -1, so the
caller raises ActorDiedError naming it.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import zmq

from . import local, sockets
from .auth import handshake_nonce
from .connection import Connection
from .errors import ActorDiedError, ProtocolError, RPCError
from .server import ServingThread
from .settings import RpcSettings
from .stream import InboundStream, StreamListener, StreamSender
from .wire import Kind, Message, Trust

if TYPE_CHECKING:
    from .link import Link

DEAD = -1
MAX_UNPROVEN_STREAMS = 64     # bulk streams awaiting their proof at once
log = logging.getLogger(__name__)


@dataclasses.dataclass
class _Job:
    identity: bytes
    request_id: int
    replies: list[Any]
    remaining: int


class FanOutRelay(ServingThread):
    """Forwards RELAY messages to the targets they name and collects their replies (FIFO per target:
    a server answers calls in arrival order)."""

    def __init__(self, *, secret: bytes, settings: RpcSettings) -> None:
        self._targets: dict[str, Connection] = {}
        self._by_socket: dict[Any, Connection] = {}      # a ZeroMQ socket, or a channel's file descriptor
        self._pending: dict[Connection, collections.deque[tuple[_Job, int]]] = {}
        self._poller = zmq.Poller()
        self._pool = local.Pool()          # blocks of the frames forwarded to several targets over channels
        self._listener = StreamListener(sockets.bind_host(settings))
        self._streams: dict[int, InboundStream] = {}      # by file descriptor
        self._streamed: dict[int, local.SharedFrame] = {}  # the frames of the message served now read into blocks
        super().__init__(name=f"Relay(pid={os.getpid()})", secret=secret, settings=settings)

    def endpoint(self) -> dict[str, Any]:
        return {"address": self.address, "name": self.name, "node": sockets.node_id(), "pid": os.getpid(),
                "patterns": ["relay"], "curve_public_key": self.curve_public_key, "auth": "handshake",
                "stream": self._listener.address}

    def _greeting(self) -> dict[str, Any]:
        return {"name": self.name, "patterns": ["relay"]}

    def _run(self) -> None:
        """Poll the callers' socket and the targets' (the base class blocks on the one socket)."""
        self._poller.register(self._socket, zmq.POLLIN)
        listening = self._listener.sock.fileno()
        self._poller.register(listening, zmq.POLLIN)
        try:
            while True:
                for sock, _ in self._poller.poll():
                    if sock == listening:
                        self._accept_stream()
                        continue
                    if sock in self._streams:
                        self._stream_readable(self._streams[sock])
                        continue
                    if sock is not self._socket:
                        self._target_readable(sock)
                        continue
                    while sock.get(zmq.EVENTS) & zmq.POLLIN:       # type: ignore[operator, arg-type]  # an int option
                        if not self._receive(sock):
                            return
        finally:
            self._close_thread_sockets()
            self._socket.close()

    def _handle(self, identity: bytes, message: Message) -> None:
        if message.kind == Kind.PING:
            self._send(identity, Kind.PONG, message.request_id, self._greeting())
            return
        if message.kind != Kind.RELAY:
            raise ProtocolError("malformed", f"a relay does not take {message.kind.name}")
        value = message.value
        targets = value.get("targets", {}).get(self.address) if isinstance(value, dict) and \
            isinstance(value.get("targets"), dict) else None
        if not (isinstance(targets, list) and isinstance(value.get("frames"), int)
                and 1 <= value["frames"] <= len(message.frames)):
            raise ProtocolError("malformed", "a relay request is {targets: {this relay's address: [...]}, frames}")
        inner = [self._streamed.get(id(frame), frame) for frame in message.frames[-value["frames"]:]]
        job = _Job(identity, message.request_id, [None] * len(targets), len(targets))
        shared: list[Any] | None = None        # the inner frames in shared blocks, put once for every channel
        for slot, target in enumerate(targets):
            connection = self._connect(target)
            if connection.alive and connection.channel is None:
                sockets.send_frames(connection.socket, [_copied(frame) for frame in inner])
            elif connection.alive and connection.channel is not None:
                shared = self._pool.share_large(inner) if shared is None else shared
                try:
                    connection.channel.send(shared)
                except local.ChannelClosed as closed:
                    connection.died(f"disconnected ({closed})")
            if connection.alive:
                self._pending[connection].append((job, slot))
            else:
                self._complete(job, slot, DEAD)
        self.stats["relayed"] += 1

    def _accept_stream(self) -> None:
        """Take a new stream; beyond :data:`MAX_UNPROVEN_STREAMS` awaiting their proof, the oldest such is closed
        (connections that never answer cannot pile up)."""
        stream = self._listener.accept(self.secret, self.settings.timeout)
        if stream is None:
            return
        self._streams[stream.fileno()] = stream
        self._poller.register(stream.fileno(), zmq.POLLIN)
        unproven = [each for each in self._streams.values() if each.identity is None]
        if len(unproven) > MAX_UNPROVEN_STREAMS:
            self.stats["unauthenticated"] += 1
            self._drop_stream(unproven[0])

    def _drop_stream(self, stream: InboundStream) -> None:
        self._poller.unregister(stream.fileno())
        del self._streams[stream.fileno()]
        stream.close()

    def _stream_readable(self, stream: InboundStream) -> None:
        """Authenticate a new stream as its proof comes, then serve one whole message of it (read into this
        relay's blocks as it arrives); a stream that fails either is closed and counted."""
        try:
            if stream.identity is None:
                if stream.authenticate(lambda identity: identity in self._peers):
                    self.stats["streams"] += 1
                return
            frames, self._streamed = stream.read(self._pool, self.settings.max_message_bytes)
        except ProtocolError as error:
            self.stats[error.reason] += 1
            self._drop_stream(stream)
            return
        try:
            with self._serial:
                self._serve(stream.identity, frames)
            self.stats["streamed"] += 1
        finally:
            for frame in frames:
                if id(frame) in self._streamed:
                    frame.release()         # the block's mapping stays closable
            self._streamed = {}

    def _connect(self, target: Any) -> Connection:
        if not (isinstance(target, list) and len(target) in (2, 4) and isinstance(target[0], str)):
            raise ProtocolError("malformed", "a relay target is [address, curve key(, local name, machine)]")
        address, curve_key = target[0], target[1]
        connection = self._targets.get(address)
        if connection is None:
            endpoint = {"address": address, "name": address, "node": None, "curve_public_key": curve_key,
                        "auth": "handshake"}
            connection = Connection(self._context, endpoint, self.settings, sealed=self.settings.mac == "always")
            connection.channel = self._open_channel(target[2:])
            self.stats["local_targets" if connection.channel is not None else "tcp_targets"] += 1
            self._handshake_target(connection)
            self._targets[address] = connection
            self._pending[connection] = collections.deque()
            key = connection.socket if connection.channel is None else connection.channel.fileno()
            self._by_socket[key] = connection
            self._by_socket[connection.monitor] = connection
            self._poller.register(key, zmq.POLLIN)
            self._poller.register(connection.monitor, zmq.POLLIN)
        return connection

    def _open_channel(self, local_target: list[Any]) -> local.Channel | None:
        """A node-local channel to a target that serves one (``[local name, machine]``, on this machine), else None
        (ZeroMQ over TCP carries the link)."""
        if (len(local_target) != 2 or not isinstance(local_target[0], str) or self.settings.local == "off"
                or local_target[1] != local.machine_id()):
            return None
        try:
            return local.connect(local_target[0], self.settings.max_message_bytes)
        except OSError:
            return None

    def _handshake_target(self, connection: Connection) -> None:
        """Authenticate a new connection to a target on this node, blocking (once per target); a target that
        does not answer within ``rpc.timeout`` or fails the handshake is dead."""
        nonce = handshake_nonce()
        try:
            challenge = self._exchange(connection, self._wire.pack(Kind.HELLO, 0, nonce, sealed=False))
            proof = connection.answer_challenge(self.secret, nonce, challenge)
            if self._exchange(connection, self._wire.pack(Kind.PROOF, 0, proof, sealed=False)).kind != Kind.PONG:
                raise RPCError("no PONG")
        except (RPCError, ProtocolError, local.ChannelClosed) as error:
            connection.alive = False
            connection.death = f"failed the relay's handshake: {error}"

    def _exchange(self, connection: Connection, frames: list[Any]) -> Message:
        """Send ``frames`` to a target and wait ``rpc.timeout`` for its answer (on its channel, if it has one)."""
        timeout = self.settings.timeout
        if connection.channel is not None:
            connection.channel.send(frames)
            reply = connection.channel.recv(timeout)
        else:
            sockets.send_frames(connection.socket, frames)
            reply = sockets.recv_frames(connection.socket) if connection.socket.poll(int(timeout * 1000)) else None
        if reply is None:
            raise RPCError(f"no answer within rpc.timeout={timeout}s")
        return self._wire.unpack(reply, connection.trust)

    def _target_readable(self, key: Any) -> None:
        connection = self._by_socket[key]
        if key is connection.monitor:
            connection.read_monitor()
        elif connection.channel is not None:
            try:
                replies = connection.channel.drain()
            except local.ChannelClosed as closed:
                connection.died(f"disconnected ({closed})")
                self._poller.unregister(key)
                del self._by_socket[key]
                replies = []
            for frames in replies:
                self._reply(connection, frames)
        else:
            for frames in sockets.readable_frames(key):
                self._reply(connection, frames)
        if not connection.alive:
            pending = self._pending[connection]
            while pending:
                self._complete(*pending.popleft(), DEAD)

    def _reply(self, connection: Connection, frames: Any) -> None:
        """A target's answer: the reply to its oldest forwarded call (a server answers in arrival order)."""
        if self._pending[connection]:
            self._complete(*self._pending[connection].popleft(), frames)

    def _complete(self, job: _Job, slot: int, reply: Any) -> None:
        job.replies[slot] = reply
        job.remaining -= 1
        if job.remaining == 0:
            sizes = [DEAD if reply is DEAD else len(reply) for reply in job.replies]
            frames = [frame for reply in job.replies if reply is not DEAD for frame in reply]
            self._send(job.identity, Kind.RELAY_REPLY, job.request_id, {"sizes": sizes}, extra=frames)

    def _close_thread_sockets(self) -> None:
        for connection in self._targets.values():
            connection.close()
        for stream in self._streams.values():
            stream.close()
        self._listener.close()
        self._pool.close()


def _description(endpoint: dict[str, Any]) -> list[Any]:
    """How a relay reaches the server of ``endpoint``: [address, curve key(, local name, machine)]."""
    return [endpoint["address"], endpoint.get("curve_public_key"),
            *([endpoint["local"], endpoint.get("machine")] if endpoint.get("local") else [])]


def _copied(frame: Any) -> Any:
    """A frame for a ZeroMQ send: a block's frame as bytes of its own (the block may be rewritten while libzmq
    still sends from it), any other as it is."""
    if isinstance(frame, local.SharedFrame):
        with memoryview(frame.block.memory) as memory:
            return bytes(memory[:frame.nbytes])
    return frame


class RelayActor:
    """The Ray actor hosting a :class:`FanOutRelay` on one node."""

    def __init__(self) -> None:
        self._server: FanOutRelay | None = None

    def start(self, secret: bytes, settings: dict) -> dict[str, Any]:
        if self._server is None:
            self._server = FanOutRelay(secret=secret, settings=RpcSettings.from_mapping(settings))
        return self._server.endpoint()

    def stats(self) -> dict[str, int]:
        return dict(self._server.stats) if self._server else {}


class Relays:
    """The caller's relays, one per remote node that needs one, started on first use."""

    def __init__(self, link: "Link") -> None:
        self.link = link
        self.relayed = 0
        self._by_node: dict[str, tuple[Any, Connection]] = {}
        self._streams: dict[Connection, StreamSender] = {}
        self._jobs: dict[int, list[tuple[Connection, list[Connection]]]] = {}

    def route(self, connections: Sequence[Connection],
              own_node: str) -> tuple[list[Connection], dict[Connection, list[Connection]]]:
        """Split targets into those sent directly and, per relay, those reached through it."""
        mode = self.link.settings.relay
        groups: dict[str, list[Connection]] = collections.defaultdict(list)
        for connection in connections:
            groups[connection.node].append(connection)
        direct: list[Connection] = []
        relayed: dict[Connection, list[Connection]] = {}
        for node, group in groups.items():
            remote = node != own_node
            if remote and (mode == "always" or (mode == "auto" and len(group) >= 2)):
                relayed[self._relay_for(node)] = group
            else:
                direct.extend(group)
        return direct, relayed

    def _relay_for(self, node: str) -> Connection:
        if node not in self._by_node:
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            strategy = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
            handle: Any = ray.remote(num_cpus=0)(RelayActor).options(scheduling_strategy=strategy).remote()
            endpoint = ray.get(handle.start.remote(self.link.secret, self.link.settings.to_mapping()),
                               timeout=self.link.settings.start_timeout)
            connection = Connection(self.link.context, endpoint, self.link.settings, handle,
                                    sealed=self.link.sealed_link(endpoint))
            self._by_node[node] = (handle, self.link.attach(connection, member=False))
            self.link.handshake([connection])
            self._open_stream(connection)
        return self._by_node[node][1]

    def _open_stream(self, relay: Connection) -> None:
        """A bulk stream to ``relay`` (:mod:`.stream`) where its link tags every message; where it cannot be
        opened (a firewall that lets ZeroMQ's port through only), the relay's messages stay on ZeroMQ."""
        address = relay.endpoint.get("stream")
        if not (relay.alive and relay.trust == Trust.SEALED and isinstance(address, str)):
            return
        identity = relay.socket.getsockopt(zmq.ROUTING_ID)
        try:
            self._streams[relay] = StreamSender(address, identity, self.link.secret, self.link.settings.timeout)
        except OSError as error:
            log.warning("rpc: no bulk stream to %s at %s (%s): its broadcasts go over ZeroMQ", relay.name, address,
                        error)

    def forward(self, relayed: dict[Connection, list[Connection]], request_id: int, frames: list[Any]) -> None:
        """Send ``frames`` (one message, framed for the links inside a node) to each relay's targets: one RELAY
        message naming every relay's targets, packed (and its large frames tagged) once per framing."""
        body = {"targets": {relay.endpoint["address"]: [_description(target.endpoint) for target in targets]
                            for relay, targets in relayed.items()}, "frames": len(frames)}
        packed: dict[bool, list[Any]] = {}
        for relay, targets in relayed.items():
            sealed = relay.trust == Trust.SEALED
            if sealed not in packed:
                packed[sealed] = self.link.wire.pack(Kind.RELAY, request_id, body, extra=frames, sealed=sealed)
            stream = self._streams.get(relay)
            if stream is None:
                self.link.send(relay, packed[sealed])
            else:       # every message to this relay, so none overtakes another
                stream.send(packed[sealed])
                self.link.bytes_sent += sum(len(frame) for frame in packed[sealed])
            self._jobs.setdefault(request_id, []).append((relay, targets))
            self.relayed += 1

    def unwrap(self, relay: Connection, message: Message) -> Iterator[tuple[Connection, Sequence[memoryview] | None]]:
        """Each target's inner reply frames (None for a target that died) from a RELAY_REPLY."""
        jobs = self._jobs.get(message.request_id, [])
        match = next((job for job in jobs if job[0] is relay), None)
        sizes = message.value.get("sizes") if isinstance(message.value, dict) else None
        if match is None or not isinstance(sizes, list) or len(sizes) != len(match[1]):
            self.link.dropped["stale"] += 1
            return
        jobs.remove(match)
        position = 0
        for target, size in zip(match[1], sizes):
            if size == DEAD:
                target.alive = False
                target.death = f"reported dead by {relay.name}"
                yield target, None
            else:
                yield target, message.frames[position:position + size]
                position += size

    def check_alive(self, request_id: int) -> None:
        for relay, _ in self._jobs.get(request_id, ()):
            stream = self._streams.get(relay)
            if stream is not None and stream.failure is not None:
                relay.died(stream.failure)
            if not relay.alive:
                raise ActorDiedError(relay.name, None, relay.death)

    def pending(self, request_id: int) -> bool:
        """Whether part of ``request_id`` travels through a relay."""
        return request_id in self._jobs

    def finish(self, request_id: int) -> None:
        self._jobs.pop(request_id, None)

    def close(self) -> None:
        """Close relay connections and end the relay processes."""
        for stream in self._streams.values():
            stream.close()
        self._streams.clear()
        for handle, connection in self._by_node.values():
            connection.close()
            import ray

            if ray.is_initialized():
                ray.kill(handle)
        self._by_node.clear()
