"""The trainer's side of the game protocol: a few authenticated connections per process (per event loop) that
carry every episode of its MDPs, each request matched to its episode by id, every wait bounded by a timeout, and
connections re-made in the background when the server is back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import shlex
import socket
import ssl
import weakref
from pathlib import Path
from typing import Any, Mapping

from ..config.sections import Section, require
from . import protocol
from .launch import Launcher
from .protocol import ProtocolViolation

BACKOFF = (0.1, 2.0)       # seconds between connection attempts: first, at most (doubling)
FAULTS = ("timeout", "disconnected", "garbage", "error")
GIVEN_UP_KEPT = 65536   # given-up episodes whose late answer a connection still expects quietly (a server that
                        # never answers them would grow the set without end)
MAX_EPISODE_ID = 2**53       # episode ids stay below it: a JavaScript number holds them exactly (docs/games.md)
LOG = logging.getLogger("lamarckian.games")
_reported: set[str] = set()   # the kinds of offence this process has logged (each once; later ones are counted)


def report_once(kind: str, text: str) -> None:
    """Log the first offence of ``kind`` in this process as one line (what came, from where); later ones are only
    counted (``env/lost_<cause>`` in TensorBoard, ``lost`` in the status line)."""
    if kind not in _reported:
        _reported.add(kind)
        LOG.warning("game server: %s (the first %s fault of this process; later ones are counted, not logged)", text,
                    kind)


@dataclasses.dataclass(frozen=True)
class GameSettings(Section):
    """The ``mdp.game`` keys.

    Attributes:
        address: ``tcp://HOST:PORT`` of a game server someone else runs (null with ``launch``).
        launch: the game server command every playing process runs itself (:mod:`~lamarckian.games.launch`):
            arguments with ``{port}``, ``{secret}`` and ``{instance}`` filled in (a string is split as a shell
            would); null: connect to ``address``.
        instances: game servers each process launches (``launch``); its episodes are spread over them.
        start_timeout: seconds a launched server may take to accept the handshake.
        logs: the folder that keeps the launched servers' stderr.
        secret: the file holding the per-game secret (``python -m lamarckian.games secret FILE`` writes one; with
            ``launch`` the trainer writes it where it is missing).
        connections: connections per process (per launched server); its episodes are spread over them.
        timeout: seconds a reset or step may take before its episode is given up (counted).
        max_episodes: episodes of one process running at once; more environments wait for a free one.
        tls: null (plain TCP on a trusted network or loopback), or the CA file that signed the server's certificate.
        tls_name: the name the server's certificate must carry (null: the address's host).
    """

    KEY = "mdp.game"

    address: str | None
    launch: tuple[str, ...] | None
    instances: int
    start_timeout: float
    logs: str
    secret: str
    connections: int
    timeout: float
    max_episodes: int
    tls: str | None
    tls_name: str | None

    def __post_init__(self) -> None:
        if isinstance(self.launch, str):
            object.__setattr__(self, "launch", tuple(shlex.split(self.launch)))
        if self.address is not None:
            protocol.parse_address(self.address)
        if self.address is not None and self.launch is not None:
            raise ValueError("mdp.game.address and mdp.game.launch: set one (address: a server someone else runs; "
                             "launch: the command each actor runs itself)")
        if self.launch is not None and (not self.launch or not all(isinstance(a, str) for a in self.launch)):
            raise ValueError(f"mdp.game.launch={self.launch!r}: expected a command (a list of arguments or a string)")
        if self.launch is not None and not any("{port}" in argument for argument in self.launch):
            raise ValueError(f"mdp.game.launch={' '.join(self.launch)!r}: no {{port}} in it (the server must be told "
                             "where to listen: e.g. --bind 127.0.0.1:{port})")
        require(self, connections=self.connections >= 1, max_episodes=self.max_episodes >= 1,
                instances=self.instances >= 1, timeout=self.timeout > 0, start_timeout=self.start_timeout > 0)

    def launcher(self) -> Launcher | None:
        """This process's launched servers (started on first use); None without ``launch``."""
        if self.launch is None:
            return None
        return Launcher.of(self.launch, self.instances, Path(self.secret).expanduser(), Path(self.logs).expanduser(),
                           self.start_timeout, self.timeout)


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
    naming the address when it cannot be reached (or is not set), PermissionError when the secret is refused. (With
    ``launch`` the hello comes from the launched instance: :meth:`Launcher.hello`.)"""
    if settings.address is None:
        raise ValueError("mdp.game.address: set it to the tcp://HOST:PORT that the game server printed, or "
                         "mdp.game.launch to the command that starts it")
    host, port = protocol.parse_address(settings.address)
    secret = protocol.read_secret(settings.secret)
    try:
        sock = socket.create_connection((host, port), timeout=settings.timeout)
    except OSError as error:
        raise ValueError(f"mdp.game.address={settings.address}: cannot connect ({error})") from None
    with sock:
        context = tls_context(settings)
        try:
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=settings.tls_name or host)
            return protocol.client_handshake(sock, secret)
        except (OSError, ProtocolViolation) as error:       # ssl's errors are OSErrors
            raise ValueError(f"mdp.game.address={settings.address}: handshake failed ({error})") from None


class GameConnection(asyncio.Protocol):
    """One authenticated connection (an asyncio protocol once the handshake is done): requests out, coalesced into
    one write per event-loop turn; every complete frame of a received chunk routed to its episode's future."""

    def __init__(self, secret: bytes, max_frame: int) -> None:
        self.secret, self.frames = secret, protocol.Frames(max_frame)
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, tuple[asyncio.Future, float, str]] = {}   # episode → (its reply, deadline, request)
        self.episodes = 0
        self.given_up: dict[int, None] = {}  # closed with a request in flight (oldest first): an answer may cross
        self.peer = "the server"
        self.fault: GameFault | None = None
        self.outgoing: list[bytes] = []
        self.loop = asyncio.get_running_loop()
        self.nonces: tuple[bytes, bytes] | None = None      # (own, the server's) between challenge and hello
        self.hello: asyncio.Future = self.loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = f"{peer[0]}:{peer[1]}"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @property
    def alive(self) -> bool:
        return self.fault is None

    def data_received(self, data: bytes) -> None:
        try:
            for body in self.frames.feed(data):
                message = protocol.unpack(body)
                if self.hello.done():
                    self._route(message)
                else:
                    self._handshake(message)
        except PermissionError as error:
            self._fail(GameFault("error", str(error)))
        except ProtocolViolation as error:
            report_once("garbage", f"{self.peer} broke the protocol: {error}; the connection was closed")
            self._fail(GameFault("garbage", f"the server broke the protocol ({error})"))
        except ConnectionError as error:
            self._fail(GameFault("disconnected", str(error)))

    def _handshake(self, message: dict[str, Any]) -> None:
        if self.nonces is None:
            auth, own, theirs = protocol.answer(self.secret, message)
            self.nonces = own, theirs
            assert self.transport is not None         # data came over it
            self.transport.write(protocol.pack(auth))
        else:
            self.hello.set_result(protocol.accept_hello(self.secret, message, *self.nonces))

    def _route(self, message: dict[str, Any]) -> None:
        if message["type"] not in protocol.SERVER_MESSAGES:
            raise ProtocolViolation(f"unexpected message type {message['type']!r}")
        number = message.get("episode")
        waiting = self.pending.pop(number, None) if isinstance(number, int) else None
        if waiting is not None:
            if not waiting[0].done():
                waiting[0].set_result(message)
        elif message["type"] == "error" and number is None:
            raise ConnectionError(f"the server closed the connection: {message.get('message')}")
        elif number in self.given_up:      # answered as the close went out: the server could not know (no fault)
            del self.given_up[number]
            LOG.debug("%s answered episode %d after the trainer gave it up: ignored", self.peer, number)
        else:
            report_once("unasked", f"{self.peer} sent {message['type']!r} for episode {number!r}, which waits for no "
                                   "answer (given up after mdp.game.timeout, or never asked): ignored")

    def connection_lost(self, error: Exception | None) -> None:
        if self.fault is None and self.hello.done():
            unanswered = (f" with {len(self.pending)} requests unanswered (their episodes are lost)" if self.pending
                          else "")
            report_once("disconnected", f"{self.peer} closed the connection ({error or 'EOF'}){unanswered}; "
                                        "reconnecting")
        self._fail(GameFault("disconnected", f"the server closed the connection ({error or 'EOF'})"))

    def _fail(self, fault: GameFault) -> None:
        if self.fault is None:
            self.fault = fault
        if not self.hello.done():
            self.hello.set_exception(self.fault)
        pending, self.pending = self.pending, {}
        for future, _, _ in pending.values():
            if not future.done():
                future.set_exception(self.fault)
        if self.transport is not None:
            self.transport.close()

    def send(self, message: Mapping[str, Any]) -> None:
        """Queue ``message``; everything queued in this event-loop turn leaves in one write."""
        if not self.alive:
            return
        if not self.outgoing:
            self.loop.call_soon(self._flush)
        self.outgoing.append(protocol.pack(message))

    def _flush(self) -> None:
        outgoing, self.outgoing = self.outgoing, []
        if self.alive and self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(outgoing))

    def request(self, number: int, message: Mapping[str, Any], timeout: float) -> asyncio.Future:
        """Send ``message`` for episode ``number``; the future of its reply (a :class:`GameFault` when the
        connection fails or :meth:`expire` finds it overdue after ``timeout`` seconds)."""
        future = self.loop.create_future()
        if self.fault is not None:
            future.set_exception(self.fault)
            return future
        self.pending[number] = future, self.loop.time() + timeout, str(message["type"])
        self.send(message)
        return future

    def expire(self, now: float) -> None:
        """Fail the requests past their deadline (their episodes are closed on the server)."""
        overdue = [number for number, (_, deadline, _) in self.pending.items() if deadline <= now]
        for number in overdue:
            future, _, request = self.pending.pop(number)
            self.send({"type": "close", "episode": number})
            self.given_up[number] = None
            if len(self.given_up) > GIVEN_UP_KEPT:
                del self.given_up[next(iter(self.given_up))]
            text = f"no answer to {request!r} of episode {number} within mdp.game.timeout"
            report_once("timeout", f"{self.peer} sent {text}: the episode was closed and is lost")
            if not future.done():
                future.set_exception(GameFault("timeout", text))


class GameClient:
    """The connections of one process (one event loop) to one game server (or to each server it launched,
    ``connections`` apiece), shared by all its GameMDPs."""

    _clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[GameSettings, GameClient]]" = \
        weakref.WeakKeyDictionary()

    def __init__(self, settings: GameSettings, hello: Mapping[str, Any]) -> None:
        self.settings, self.hello = settings, hello
        self.launched = settings.launch is not None
        self.secret = protocol.read_secret(settings.secret)
        self.max_frame = int(hello.get("max_frame", protocol.DEFAULT_MAX_FRAME))
        self.per_connection = int(hello.get("max_episodes", 2**31))
        count = settings.connections * (settings.instances if self.launched else 1)
        self.connections: list[GameConnection | None] = [None] * count
        self.attempts: list[asyncio.Task | None] = [None] * count
        self.slots = asyncio.Semaphore(min(settings.max_episodes, count * self.per_connection))
        self.next_episode = 0
        self.connects = 0
        self.sweeper: asyncio.Task | None = None

    @classmethod
    def of(cls, settings: GameSettings, hello: Mapping[str, Any]) -> "GameClient":
        """The running event loop's client for ``settings`` (made on first use)."""
        per_loop = cls._clients.setdefault(asyncio.get_running_loop(), {})
        if settings not in per_loop:
            per_loop[settings] = cls(settings, hello)
        return per_loop[settings]

    def _address(self, index: int) -> str | None:
        """Where slot ``index`` connects: ``mdp.game.address``, or the launched instance ``index`` falls to (None
        while it starts)."""
        launcher = self.settings.launcher()
        return self.settings.address if launcher is None else launcher.address(index)

    async def _connect(self, index: int) -> GameConnection:
        """Connect slot ``index``, retrying with backoff until it works (the caller bounds the wait)."""
        delay, loop = BACKOFF[0], asyncio.get_running_loop()
        context = tls_context(self.settings)
        while True:
            connection = GameConnection(self.secret, self.max_frame)
            address = self._address(index)
            try:
                if address is None:
                    raise OSError("the launched game server is starting")
                host, port = protocol.parse_address(address)
                await asyncio.wait_for(loop.create_connection(
                    lambda: connection, host, port, ssl=context,                                   # noqa: B023
                    server_hostname=(self.settings.tls_name or host) if context else None), self.settings.timeout)
                await asyncio.wait_for(asyncio.shield(connection.hello), self.settings.timeout)
            except (OSError, asyncio.TimeoutError, GameFault):
                if connection.transport is not None:
                    connection.transport.abort()
                await asyncio.sleep(delay)
                delay = min(2 * delay, BACKOFF[1])
                continue
            self.connections[index] = connection
            self.connects += 1
            self._sweep()
            return connection

    def _attempt(self, index: int) -> asyncio.Task:
        task = self.attempts[index]
        if task is None or task.done():
            task = self.attempts[index] = asyncio.get_running_loop().create_task(self._connect(index))
        return task

    async def _pick(self) -> GameConnection:
        """The live connection with the fewest episodes and room for one more (hello's ``max_episodes``), re-making
        dead ones in the background; waits up to the timeout for one when none is up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.timeout
        while True:
            alive = []
            for index, connection in enumerate(self.connections):
                if connection is not None and connection.alive:
                    alive.append(connection)
                else:
                    self._attempt(index)
            roomy = [c for c in alive if c.episodes < self.per_connection]
            if roomy:
                return min(roomy, key=lambda c: c.episodes)
            connecting = [task for task in self.attempts if task is not None and not task.done()]
            if not connecting or loop.time() >= deadline:
                raise GameFault("disconnected", f"no connection to {self.settings.address} with room for an "
                                                f"episode in {self.settings.timeout:g} s")
            await asyncio.wait(connecting, timeout=deadline - loop.time(), return_when=asyncio.FIRST_COMPLETED)

    def _sweep(self) -> None:
        """Keep a task failing overdue requests (a quarter of the timeout apart: a request is given up between 1
        and 1.25 timeouts after it left; no timer per request)."""
        if self.sweeper is None or self.sweeper.done():
            self.sweeper = asyncio.get_running_loop().create_task(self._expire_forever())

    async def _expire_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(1.0, self.settings.timeout / 4))
            for connection in self.connections:
                if connection is not None and connection.pending:
                    connection.expire(loop.time())

    async def reset(self, seats: list[int], seed: int | None) -> tuple[GameConnection, int, dict[str, Any]]:
        """Start an episode with the trainer on ``seats``; its connection, its id and the first ``observation``.
        Holds one of ``max_episodes`` slots until :meth:`finish`."""
        await self.slots.acquire()
        try:
            connection = await self._pick()
        except BaseException:
            self.slots.release()
            raise
        number, self.next_episode = self.next_episode, (self.next_episode + 1) % MAX_EPISODE_ID   # exact in JS
        connection.episodes += 1
        try:
            reply = await self.ask(connection, number, {"type": "reset", "episode": number, "seats": seats,
                                                        "seed": seed})
        except BaseException:
            self.finish(connection, number, close=True)
            raise
        return connection, number, reply

    async def ask(self, connection: GameConnection, number: int, message: Mapping[str, Any]) -> dict[str, Any]:
        """``message`` for episode ``number`` and its reply; :class:`GameFault` for an ``error`` reply, a failed
        connection or no reply within the timeout."""
        reply = await connection.request(number, message, self.settings.timeout)
        if reply["type"] == "error":
            report_once("error", f"{connection.peer} answered {message['type']!r} of episode {number} with error "
                                 f"{reply.get('message')!r}: the episode is lost")
            raise GameFault("error", str(reply.get("message")))
        return reply

    def finish(self, connection: GameConnection, number: int, close: bool) -> None:
        """The episode is over for the trainer (``close``: tell the server, which has not ended it itself)."""
        if close:
            connection.send({"type": "close", "episode": number})
        connection.episodes -= 1
        self.slots.release()
