"""The reference game server: any MDP of this package (a gymnasium id, Pong, Coins, your own) served over the
game protocol, many episodes per connection, with injected latency, jitter and faults so that every test and
benchmark has a real server process to talk to.

Each episode runs on an MDP of a pool (reused between episodes) through the asyncio contract, so the server plays
the seats the trainer leaves out with the MDP's rule, and seats named ``bots`` are never offered to the trainer.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import logging
import os
import random
import signal
import socket
import ssl
import sys
from typing import Any, Callable, Sequence

from ..mdp import MDP, Controller
from . import protocol
from .peer import Peer
from .protocol import ProtocolViolation

log = logging.getLogger(__name__)
TIMER_LEARNING = 0.01       # step of the timer calibration (per delayed reply)
TIMER_EARLY_MAX = 0.002     # seconds a delayed reply is scheduled early at most


@dataclasses.dataclass(frozen=True)
class Faults:
    """What the server does wrong on purpose.

    Attributes:
        latency: seconds added before every reply (a step that waits on a game engine or a network).
        jitter: each reply's latency varies uniformly by ± this many seconds (never below 0).
        drop_rate: share of requests never answered (the client's timeout has to catch them).
        garbage_rate: share of replies replaced by a frame of random bytes.
        crash_after: the process dies abruptly after serving this many steps (0: never).
        spike_every: every this many-th request takes ``spike`` seconds longer to play (0: never): a game that now
            and then stalls past the trainer's ``mdp.game.timeout``; a ``close`` that comes meanwhile drops the answer.
        spike: seconds a spiked request stalls, beside the latency.
    """

    latency: float = 0.0
    jitter: float = 0.0
    drop_rate: float = 0.0
    garbage_rate: float = 0.0
    crash_after: int = 0
    spike_every: int = 0
    spike: float = 0.0

    def __post_init__(self) -> None:
        if self.spike_every < 0:
            raise ValueError(f"spike_every={self.spike_every}: expected >= 0")
        for name in ("latency", "jitter", "drop_rate", "garbage_rate", "spike"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name}={getattr(self, name)}: expected >= 0")
        if self.drop_rate > 1 or self.garbage_rate > 1:
            raise ValueError("drop_rate and garbage_rate are shares in [0, 1]")


@dataclasses.dataclass
class Served:
    """One running episode of a connection."""

    mdp: MDP
    seats: list[int]              # the trainer's seat numbers, in the reset's order
    controllers: list[Controller]
    ticks: list[asyncio.Task]
    busy: bool = False


class GameServer:
    """Serves episodes of ``make_mdp(seed)`` MDPs to authenticated clients.

    Args:
        make_mdp: builds one MDP (seeded); called again whenever every pooled MDP is in use.
        secret: the per-game secret both sides prove.
        bots: seats the server always plays itself (the rule); the trainer sees the others, renumbered from 0.
        faults: injected latency and faults.
        max_frame: bytes of one frame, at most (both directions).
        max_episodes: episodes running at once on one connection, at most.
        seed: seeds the MDPs (``seed + n`` for the n-th) and the fault draws.
    """

    def __init__(self, make_mdp: Callable[[int], MDP], secret: bytes, *, bots: Sequence[int] = (),
                 faults: Faults = Faults(), max_frame: int = protocol.DEFAULT_MAX_FRAME, max_episodes: int = 65536,
                 seed: int = 0) -> None:
        self.make_mdp, self.secret, self.faults = make_mdp, secret, faults
        self.max_frame, self.max_episodes, self.seed = max_frame, max_episodes, seed
        self.random = random.Random(seed)
        self.built = 0
        probe = self._build()
        specs = probe.describe()
        bad = [seat for seat in bots if not 0 <= seat < len(specs)]
        if bad or len(set(bots)) == len(specs):
            raise ValueError(f"--bot {list(bots)}: seats must be in 0..{len(specs) - 1} and leave one to the trainer")
        self.seats = [seat for seat in range(len(specs)) if seat not in set(bots)]   # trainer seat i → game seat
        self.specs = [specs[seat] for seat in self.seats]
        self.names = [probe.seat_names()[seat] for seat in self.seats]
        self.rule = len(specs) > 1      # the built-in games play a seat nobody controls by their rule
        self.free: list[MDP] = [probe]
        self.counters: collections.Counter[str] = collections.Counter()
        self.early = 0.0                                  # seconds delayed replies are scheduled early
        self.lateness: collections.deque[float] = collections.deque(maxlen=10_000)   # seconds, of the latest ones

    def _build(self) -> MDP:
        mdp = self.make_mdp(self.seed + self.built)
        self.built += 1
        return mdp

    def hello(self) -> dict[str, Any]:
        """What the server tells a client after the handshake (its proof is added per connection)."""
        return {"type": "hello", "version": protocol.VERSION, "rule": self.rule, "max_frame": self.max_frame,
                "max_episodes": self.max_episodes,
                "players": [{"name": name, "observation": protocol.describe_space(spec.observation),
                             "action": protocol.describe_space(spec.action)}
                            for name, spec in zip(self.names, self.specs)]}

    def statistics(self) -> dict[str, float]:
        """The counters, and how far the latest delayed replies left from their due time (``late_ms``: mean,
        ``late_abs_ms``: mean absolute)."""
        stats: dict[str, float] = dict(self.counters)
        if self.lateness:
            stats["late_ms"] = 1000 * sum(self.lateness) / len(self.lateness)
            stats["late_abs_ms"] = 1000 * sum(map(abs, self.lateness)) / len(self.lateness)
        return stats

    # ---- connections -----------------------------------------------------------------------------------------
    async def serve(self, sock: socket.socket, tls: ssl.SSLContext | None = None) -> None:
        """Accept connections on the listening ``sock`` (under TLS with ``tls``) until cancelled."""
        server = await asyncio.get_running_loop().create_server(lambda: Peer(self), sock=sock, ssl=tls)
        async with server:
            await server.serve_forever()

    def dispatch(self, message: dict[str, Any], peer: Peer) -> None:
        """One request of an authenticated ``peer``: answered (now or after the injected latency) or refused."""
        kind = message["type"]
        if kind not in protocol.CLIENT_MESSAGES:
            raise ProtocolViolation(f"unknown message type {kind!r} (expected {', '.join(protocol.CLIENT_MESSAGES)})")
        number, episodes = protocol.episode_id(message), peer.episodes
        if kind == "close":
            served = episodes.pop(number, None)
            if served is not None and not served.busy:      # a busy one is finished when its step is done
                self.finish(served)
            return
        served = episodes.get(number)
        problem = self._reset_problem(message, number, episodes) if kind == "reset" else \
            f"no episode {number} runs on this connection" if served is None else \
            f"episode {number} already has a request in flight" if served.busy else None
        if problem is not None:
            if served is not None:                          # a running episode refused ends: nothing more comes for it
                episodes.pop(number)
                if not served.busy:
                    self.finish(served)
            self._refuse(peer, number, problem)
            return
        if kind == "reset":
            seed = message.get("seed")
            episodes[number] = served = self._start(message["seats"], seed if isinstance(seed, int) else None)
        served.busy = True
        asyncio.get_running_loop().create_task(self._answer(message, number, served, peer))

    def _reset_problem(self, message: dict[str, Any], number: int, episodes: dict[int, Served]) -> str | None:
        """Why a ``reset`` cannot start its episode (None: it can)."""
        if number in episodes:
            return f"episode {number} is already running"
        if len(episodes) >= self.max_episodes:
            return f"over {self.max_episodes} episodes on one connection"
        try:
            seats = protocol.seat_list(message.get("seats"), len(self.seats), "reset: seats")
        except ProtocolViolation as error:
            return str(error)
        if len(seats) < len(self.seats) and not self.rule:
            return "this game has no rule for the seats left out: play them all"
        return None

    def _refuse(self, peer: Peer, number: int, reason: str) -> None:
        self.counters["errors"] += 1
        peer.send({"type": "error", "episode": number, "message": reason})

    def _start(self, seats: list[int], seed: int | None) -> Served:
        mdp = self.free.pop() if self.free else self._build()
        episode = mdp.reset(*(self.seats[seat] for seat in seats), seed=seed)
        loop = asyncio.get_running_loop()
        self.counters["episodes"] += 1
        return Served(mdp, seats, episode.controllers, [loop.create_task(tick) for tick in episode.ticks])

    def disconnected(self, peer: Peer) -> None:
        """A client went away: its episodes end (a stepping one when its step is done)."""
        for served in peer.episodes.values():
            if not served.busy:
                self.finish(served)
        peer.episodes.clear()

    def finish(self, served: Served) -> None:
        for tick in served.ticks:
            tick.cancel()
        self.free.append(served.mdp)

    async def _answer(self, message: dict[str, Any], number: int, served: Served, peer: Peer) -> None:
        try:
            self.counters["requests"] += 1
            if self.faults.spike_every and self.counters["requests"] % self.faults.spike_every == 0:
                self.counters["spiked"] += 1
                await asyncio.sleep(self.faults.spike)
            if message["type"] == "step":
                await self._step(served, message.get("actions"))
        except Exception as error:  # noqa: BLE001 - a bad action or a failing game ends that episode, not the server
            peer.episodes.pop(number, None)
            self.finish(served)
            reason = str(error) if isinstance(error, ProtocolViolation) else f"the game failed: {error}"
            return self._refuse(peer, number, reason)
        served.busy = False
        if peer.episodes.get(number) is not served:        # closed (or the client left) while it stepped
            self.finish(served)
            return
        reply = {"type": "observation", "episode": number, "players": [self._seat(c) for c in served.controllers]}
        if all(c.done for c in served.controllers):
            del peer.episodes[number]
            self.finish(served)
        self._reply(peer, reply)

    async def _step(self, served: Served, actions: Any) -> None:
        if not isinstance(actions, list) or len(actions) != len(served.seats):
            raise ProtocolViolation(f"step: 'actions' must list {len(served.seats)} actions (nil for a done seat)")
        moves = []
        for index, (controller, action) in enumerate(zip(served.controllers, actions)):
            if controller.done:
                continue
            space = self.specs[served.seats[index]].action
            moves.append(controller(protocol.conform(action, space, f"step: actions[{index}]")))
        if len(moves) == 1:
            await moves[0]
        else:
            await asyncio.gather(*moves)
        self.counters["steps"] += 1
        if self.faults.crash_after and self.counters["steps"] >= self.faults.crash_after:
            log.warning("game server: crashing on purpose after %d steps", self.counters["steps"])
            sys.stderr.flush()
            os._exit(3)

    @staticmethod
    def _seat(controller: Controller) -> dict[str, Any]:
        done = controller.done
        entry = {"observation": controller.get_state(), "reward": float(controller.get_reward()), "done": bool(done),
                 "truncated": bool(controller.truncated)}
        if done:
            result = controller.get_result()
            entry["result"] = {"fitness": float(result["fitness"]), "win": result.get("win"),
                               "objectives": {k: float(v) for k, v in (result.get("objectives") or {}).items()}}
        return entry

    def _reply(self, peer: Peer, reply: dict[str, Any]) -> None:
        faults = self.faults
        if faults.drop_rate and self.random.random() < faults.drop_rate:
            self.counters["dropped"] += 1
            return
        if faults.garbage_rate and self.random.random() < faults.garbage_rate:
            self.counters["garbage"] += 1
            junk = self.random.randbytes(32)
            frame = protocol.HEADER.pack(len(junk)) + junk
        else:
            frame = protocol.pack(reply)
        delay = max(0.0, faults.latency + self.random.uniform(-faults.jitter, faults.jitter)) if \
            faults.latency or faults.jitter else 0.0
        if delay:
            loop = asyncio.get_running_loop()
            due = loop.time() + delay
            loop.call_at(due - self.early, self._deliver, peer, frame, due)
        else:
            peer.write(frame)

    def _deliver(self, peer: Peer, frame: bytes, due: float) -> None:
        """Send a delayed reply. asyncio's timers fire up to a millisecond late (epoll counts in milliseconds): the
        server learns by how much and schedules that much earlier, so the mean latency is the one asked for."""
        late = asyncio.get_running_loop().time() - due
        self.early = min(TIMER_EARLY_MAX, max(0.0, self.early + TIMER_LEARNING * late))
        self.lateness.append(late)
        peer.write(frame)


def listen(address: str) -> socket.socket:
    """A listening TCP socket at ``tcp://HOST:PORT`` (port 0: any free one)."""
    host, port = protocol.parse_address(address)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def bound_address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


def run(server: GameServer, sock: socket.socket, workers: int = 1, tls: ssl.SSLContext | None = None) -> None:
    """Serve on ``sock`` in ``workers`` processes (forked, sharing the socket) until SIGTERM or SIGINT; each prints
    its counters as one JSON line on standard error at the end."""
    if workers <= 1:
        return _serve_here(server, sock, tls)
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            try:
                _serve_here(server, sock, tls)
            finally:
                os._exit(0)
        children.append(pid)

    def stop(signum: int, _frame: Any) -> None:
        for child in children:
            with contextlib.suppress(ProcessLookupError, ChildProcessError, InterruptedError):
                os.kill(child, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for child in children:
        with contextlib.suppress(ProcessLookupError, ChildProcessError, InterruptedError):
            os.waitpid(child, 0)


def _serve_here(server: GameServer, sock: socket.socket, tls: ssl.SSLContext | None) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, task.cancel)
        try:
            await server.serve(sock, tls)
        except asyncio.CancelledError:
            pass

    asyncio.run(main())
    sys.stderr.flush()      # one write per line: the workers' lines must not interleave on a shared pipe
    os.write(sys.stderr.fileno(), (json.dumps({"pid": os.getpid(), **server.statistics()}) + "\n").encode())

