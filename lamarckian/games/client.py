"""The trainer's side of the game protocol: a few authenticated connections per process (per event loop) that
carry every episode of its MDPs, each request matched to its episode by id, every wait bounded by a timeout, and
connections re-made in the background when the server is back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import ssl
import weakref
from typing import Any, Mapping

from ..config.sections import Section
from . import protocol
from .protocol import ProtocolViolation
from .server import parse_address

BACKOFF = (0.1, 2.0)       # seconds between connection attempts: first, at most (doubling)
FAULTS = ("timeout", "disconnected", "garbage", "error")


@dataclasses.dataclass(frozen=True)
class GameSettings(Section):
    """The ``mdp.game`` keys.

    Attributes:
        address: ``tcp://HOST:PORT`` of the game server.
        secret: the file holding the per-game secret (``python -m lamarckian.games secret FILE`` writes one).
        connections: connections per process; its episodes are spread over them.
        timeout: seconds a reset or step may take before its episode is given up (counted).
        max_episodes: episodes of one process running at once; more environments wait for a free one.
        tls: null (plain TCP on a trusted network or loopback), or the CA file that signed the server's certificate.
        tls_name: the name the server's certificate must carry (null: the address's host).
    """

    KEY = "mdp.game"

    address: str | None
    secret: str
    connections: int
    timeout: float
    max_episodes: int
    tls: str | None = None
    tls_name: str | None = None

    def __post_init__(self) -> None:
        if self.address is None:
            raise ValueError("mdp.game.address: set it to the tcp://HOST:PORT that the game server printed")
        parse_address(self.address)
        if self.connections < 1 or self.max_episodes < 1 or not self.timeout > 0:
            raise ValueError("mdp.game: connections and max_episodes must be >= 1, timeout > 0 seconds")


class GameFault(Exception):
    """An episode lost to the server: ``kind`` is one of :data:`FAULTS`."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def tls_context(settings: GameSettings) -> ssl.SSLContext | None:
    """A client TLS context trusting ``settings.tls`` (None without TLS)."""
    return None if settings.tls is None else ssl.create_default_context(cafile=settings.tls)


def fetch_hello(settings: GameSettings) -> dict[str, Any]:
    """Connect once with a blocking socket and return the server's ``hello`` (the players' spaces); ValueError
    naming the address when it cannot be reached, PermissionError when the secret is refused."""
    host, port = parse_address(settings.address)
    secret = protocol.read_secret(settings.secret)
    try:
        sock = socket.create_connection((host, port), timeout=settings.timeout)
    except OSError as error:
        raise ValueError(f"mdp.game.address={settings.address}: cannot connect ({error})") from None
    with sock:
        context = tls_context(settings)
        if context is not None:
            sock = context.wrap_socket(sock, server_hostname=settings.tls_name or host)
        try:
            return protocol.client_handshake(sock, secret)
        except (OSError, ProtocolViolation) as error:
            raise ValueError(f"mdp.game.address={settings.address}: handshake failed ({error})") from None


class Connection:
    """One authenticated connection: requests out, replies routed to the waiting episode by id."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_frame: int) -> None:
        self.reader, self.writer, self.max_frame = reader, writer, max_frame
        self.pending: dict[int, asyncio.Future] = {}
        self.episodes = 0
        self.late = 0                     # replies to episodes given up already
        self.fault: GameFault | None = None
        self.reader_task = asyncio.get_running_loop().create_task(self._read())

    @property
    def alive(self) -> bool:
        return self.fault is None

    async def _read(self) -> None:
        try:
            while True:
                message = await protocol.read_message(self.reader, self.max_frame)
                if message["type"] not in protocol.SERVER_MESSAGES:
                    raise ProtocolViolation(f"unexpected message type {message['type']!r}")
                future = self.pending.pop(message.get("episode"), None) if \
                    isinstance(message.get("episode"), int) else None
                if future is not None and not future.done():
                    future.set_result(message)
                elif message["type"] == "error" and message.get("episode") is None:
                    raise ConnectionError(f"the server closed the connection: {message.get('message')}")
                else:
                    self.late += 1
        except ProtocolViolation as error:
            self._fail(GameFault("garbage", f"the server broke the protocol ({error})"))
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as error:
            self._fail(GameFault("disconnected", f"{type(error).__name__}: {error}"))

    def _fail(self, fault: GameFault) -> None:
        self.fault = fault
        for future in self.pending.values():
            if not future.done():
                future.set_exception(fault)
        self.pending.clear()
        self.writer.close()

    def send(self, message: Mapping[str, Any]) -> None:
        if self.alive and not self.writer.is_closing():
            self.writer.write(protocol.pack(message))

    async def request(self, number: int, message: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        """Send ``message`` for episode ``number`` and wait for its reply; :class:`GameFault` for an ``error``
        reply, a dead connection or no reply within ``timeout`` seconds (the episode is then closed)."""
        if not self.alive:
            raise self.fault
        future = asyncio.get_running_loop().create_future()
        self.pending[number] = future
        self.send(message)
        try:
            reply = await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            self.pending.pop(number, None)
            self.send({"type": "close", "episode": number})
            raise GameFault("timeout", f"no answer in {timeout:g} s") from None
        if reply["type"] == "error":
            raise GameFault("error", str(reply.get("message")))
        return reply

    async def close(self) -> None:
        self.writer.close()
        self.reader_task.cancel()


class GameClient:
    """The connections of one process (one event loop) to one game server, shared by all its GameMDPs."""

    _clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[GameSettings, GameClient]]" = \
        weakref.WeakKeyDictionary()

    def __init__(self, settings: GameSettings, hello: Mapping[str, Any]) -> None:
        self.settings, self.hello = settings, hello
        self.secret = protocol.read_secret(settings.secret)
        self.max_frame = int(hello.get("max_frame", protocol.DEFAULT_MAX_FRAME))
        self.per_connection = int(hello.get("max_episodes", 2**31))
        self.connections: list[Connection | None] = [None] * settings.connections
        self.attempts: list[asyncio.Task | None] = [None] * settings.connections
        self.slots = asyncio.Semaphore(settings.max_episodes)
        self.next_episode = 0
        self.connects = 0

    @classmethod
    def of(cls, settings: GameSettings, hello: Mapping[str, Any]) -> "GameClient":
        """The running event loop's client for ``settings`` (made on first use)."""
        per_loop = cls._clients.setdefault(asyncio.get_running_loop(), {})
        if settings not in per_loop:
            per_loop[settings] = cls(settings, hello)
        return per_loop[settings]

    async def _connect(self, index: int) -> Connection:
        """Connect slot ``index``, retrying with backoff until it works (the caller bounds the wait)."""
        delay = BACKOFF[0]
        host, port = parse_address(self.settings.address)
        context = tls_context(self.settings)
        while True:
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(
                    host, port, ssl=context, server_hostname=(self.settings.tls_name or host) if context else None,
                    limit=2**20), self.settings.timeout)
                try:
                    await asyncio.wait_for(protocol.client_handshake_async(reader, writer, self.secret, self.max_frame),
                                           self.settings.timeout)
                except BaseException:
                    writer.close()
                    raise
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                connection = Connection(reader, writer, self.max_frame)
                self.connections[index] = connection
                self.connects += 1
                return connection
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ProtocolViolation):
                await asyncio.sleep(delay)
                delay = min(2 * delay, BACKOFF[1])

    def _attempt(self, index: int) -> asyncio.Task:
        task = self.attempts[index]
        if task is None or task.done():
            task = self.attempts[index] = asyncio.get_running_loop().create_task(self._connect(index))
        return task

    async def _pick(self) -> Connection:
        """The live connection with the fewest episodes (re-making dead ones in the background); waits up to the
        timeout for one when none is up."""
        alive = []
        for index, connection in enumerate(self.connections):
            if connection is not None and connection.alive:
                alive.append(connection)
            else:
                self._attempt(index)
        alive = [c for c in alive if c.episodes < self.per_connection]
        if alive:
            return min(alive, key=lambda c: c.episodes)
        attempts = [task for task in self.attempts if task is not None]
        done, _ = await asyncio.wait(attempts, timeout=self.settings.timeout, return_when=asyncio.FIRST_COMPLETED)
        if not done:
            raise GameFault("disconnected", f"no connection to {self.settings.address} in {self.settings.timeout:g} s")
        return next(iter(done)).result()

    async def reset(self, seats: list[int], seed: int | None) -> tuple[Connection, int, dict[str, Any]]:
        """Start an episode with the trainer on ``seats``; its connection, its id and the first ``observation``.
        Holds one of ``max_episodes`` slots until :meth:`finish`."""
        await self.slots.acquire()
        try:
            connection = await self._pick()
        except BaseException:
            self.slots.release()
            raise
        number, self.next_episode = self.next_episode, self.next_episode + 1
        connection.episodes += 1
        try:
            reply = await connection.request(number, {"type": "reset", "episode": number, "seats": seats,
                                                      "seed": seed}, self.settings.timeout)
        except BaseException:
            self.finish(connection, number, close=False)
            raise
        return connection, number, reply

    async def step(self, connection: Connection, number: int, actions: list[Any]) -> dict[str, Any]:
        return await connection.request(number, {"type": "step", "episode": number, "actions": actions},
                                        self.settings.timeout)

    def finish(self, connection: Connection, number: int, close: bool) -> None:
        """The episode is over for the trainer (``close``: tell the server, which has not ended it itself)."""
        if close:
            connection.send({"type": "close", "episode": number})
        connection.episodes -= 1
        self.slots.release()
