"""The other direction: the game calls the policy (``mdp.create: service``, docs/games.md "The game calls the
policy"). Every actor listens on ``mdp.service.bind`` (all actors of a machine share the port: the kernel spreads the
game clients' connections over them); a game that runs its own loop connects, reports each of its agents'
observations, rewards and episode ends, and gets the agents' actions back — computed in the actor, every waiting
agent of every connected game in one batched forward. Each agent's episode fills one of the actor's
``sample.envs`` slots, so its steps become segments that train the learner as any others.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import socket
import weakref
from typing import Any, Mapping

from ..config.sections import Section
from ..mdp import MDP, Controller, Episode, PlayerSpec
from . import protocol
from .counts import EpisodeCounts
from .peer import Peer
from .protocol import ProtocolViolation

FAULTS = ("timeout", "disconnected")


@dataclasses.dataclass(frozen=True)
class ServiceSettings(Section):
    """The ``mdp.service`` keys.

    Attributes:
        bind: ``tcp://HOST:PORT`` every actor listens on (shared: SO_REUSEPORT).
        secret: the file with the per-game secret the game clients prove.
        observation, action: the agents' spaces (docs/games.md "Spaces").
        timeout: seconds an agent may take to report the observation after an action (then its episode is lost).
        idle: seconds a slot waits for an agent before it starts waiting afresh (nothing is counted).
    """

    KEY = "mdp.service"

    bind: str | None
    secret: str
    observation: dict
    action: dict
    timeout: float
    idle: float

    def __post_init__(self) -> None:
        if self.bind is not None:
            protocol.parse_address(self.bind)
        if not self.timeout > 0 or not self.idle > 0:
            raise ValueError("mdp.service.timeout and mdp.service.idle are seconds > 0")

    def spec(self) -> PlayerSpec:
        """The agents' spaces; ValueError naming the key that does not describe a space (or an unset bind)."""
        if self.bind is None:
            raise ValueError("mdp.service.bind: set the tcp://HOST:PORT the game clients connect to")
        try:
            return PlayerSpec(protocol.build_space(dict(self.observation), "mdp.service.observation"),
                              protocol.build_space(dict(self.action), "mdp.service.action"))
        except ProtocolViolation as error:
            raise ValueError(str(error)) from None


class Agent:
    """One game agent's running episode on the service: its latest report and the future of its next one."""

    def __init__(self, peer: Peer, number: int, report: dict[str, Any]) -> None:
        self.peer, self.number, self.report = peer, number, report
        self.next: asyncio.Future | None = None

    def deliver(self, report: dict[str, Any]) -> None:
        if self.next is None or self.next.done():
            raise ProtocolViolation(f"agent {self.number} reported twice without an action between")
        self.next.set_result(report)

    def fail(self, kind: str) -> None:
        if self.next is not None and not self.next.done():
            self.next.set_exception(ConnectionError(kind))


class PolicyService:
    """The listening socket of one process (one event loop) and the agents it hands to waiting slots."""

    _services: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, PolicyService]" = weakref.WeakKeyDictionary()

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings, self.spec = settings, settings.spec()
        self.secret = protocol.read_secret(settings.secret)
        self.max_frame = protocol.DEFAULT_MAX_FRAME
        self.counters: collections.Counter[str] = collections.Counter()
        self.waiting: collections.deque[asyncio.Future] = collections.deque()   # slots waiting for an agent
        self.server: asyncio.AbstractServer | None = None
        self.starting: asyncio.Task | None = None

    @classmethod
    def of(cls, settings: ServiceSettings) -> "PolicyService":
        """This event loop's service; ValueError for a second loop of the process (an evaluation's: the agents'
        episodes are the game's, so evaluate from the training results with ``sample.eval: 0``)."""
        loop = asyncio.get_running_loop()
        if loop not in cls._services:
            if cls._services:
                raise ValueError("mdp.create=service serves the training loop only: set sample.eval: 0 (the "
                                 "game's own results are the training returns)")
            cls._services[loop] = cls(settings)
        return cls._services[loop]

    async def start(self) -> None:
        """Listen (once): ``mdp.service.bind`` with SO_REUSEPORT."""
        if self.starting is None:
            self.starting = asyncio.get_running_loop().create_task(self._listen())
        await asyncio.shield(self.starting)

    async def _listen(self) -> None:
        host, port = protocol.parse_address(self.settings.bind)
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            sock.bind((host, port))
        except OSError as error:
            sock.close()
            raise ValueError(f"mdp.service.bind={self.settings.bind}: {error.strerror}") from None
        sock.listen(1024)
        sock.setblocking(False)
        self.server = await asyncio.get_running_loop().create_server(lambda: Peer(self), sock=sock)

    def hello(self) -> dict[str, Any]:
        return {"type": "hello", "version": protocol.VERSION, "max_frame": self.max_frame, "rule": False,
                "players": [{"name": "agent", "observation": protocol.describe_space(self.spec.observation),
                             "action": protocol.describe_space(self.spec.action)}]}

    def dispatch(self, message: dict[str, Any], peer: Peer) -> None:
        """An agent's report: the next step of its running episode, or the start of a new one (given to a waiting
        slot; ``error`` "busy" when every slot of this actor is playing)."""
        if message["type"] != "act":
            raise ProtocolViolation(f"unknown message type {message['type']!r} (expected act)")
        number = message.get("agent")
        if not isinstance(number, int) or isinstance(number, bool):
            raise ProtocolViolation("act: 'agent' must be an integer")
        report = protocol.seat_states({"players": [message]}, [self.spec.observation], "act")[0]
        agent = peer.episodes.get(number)
        if agent is not None:
            agent.deliver(report)
            if report["done"]:
                del peer.episodes[number]
                peer.send({"type": "ended", "agent": number})
            return
        if report["done"]:
            peer.send({"type": "ended", "agent": number})
            return
        while self.waiting and self.waiting[0].done():
            self.waiting.popleft()
        if not self.waiting:
            self.counters["busy"] += 1
            peer.send({"type": "error", "agent": number, "message": "busy: every slot of this actor is playing"})
            return
        peer.episodes[number] = agent = Agent(peer, number, report)
        self.waiting.popleft().set_result(agent)

    def disconnected(self, peer: Peer) -> None:
        for agent in peer.episodes.values():
            agent.fail("disconnected")
        peer.episodes.clear()


class ServiceEpisode:
    """One slot's episode: the first agent that arrives, played until it reports the end (or is lost)."""

    def __init__(self, mdp: "ServiceMDP") -> None:
        self.mdp = mdp
        self.service = PolicyService.of(mdp.settings)
        self.agent: Agent | None = None
        self.report: dict[str, Any] | None = None
        self.total = 0.0
        self.lost: str | None = None
        self.assigned = asyncio.Event()
        self.over = asyncio.get_running_loop().create_future()

    @property
    def reported(self) -> dict[str, Any]:
        """The agent's last report (read once the slot was assigned one)."""
        assert self.report is not None, "no agent has reported to this slot yet"
        return self.report

    async def run(self) -> None:
        """The tick: wait for an agent (``mdp.service.idle`` seconds at most), then for the episode's end."""
        await self.service.start()
        arrival = asyncio.get_running_loop().create_future()
        self.service.waiting.append(arrival)
        try:
            agent: Agent = await asyncio.wait_for(arrival, self.mdp.settings.idle)
        except asyncio.TimeoutError:               # no game came: the slot waits afresh
            self.assigned.set()
            return
        self.agent, self.report = agent, agent.report
        self.mdp.episodes += 1
        self.assigned.set()
        try:
            await self.over
        except asyncio.CancelledError:
            agent.peer.episodes.pop(agent.number, None)
            raise

    async def act(self, action: Any) -> None:
        agent = self.agent
        assert agent is not None, "the controller acts once its slot is assigned an agent"
        agent.next = asyncio.get_running_loop().create_future()
        agent.peer.send({"type": "action", "agent": agent.number,
                         "action": protocol.encode_action(action, self.mdp.spec.action)})
        try:
            self.report = await asyncio.wait_for(agent.next, self.mdp.settings.timeout)
        except (asyncio.TimeoutError, ConnectionError) as error:
            self.lost = "timeout" if isinstance(error, asyncio.TimeoutError) else "disconnected"
            self.mdp.faults[self.lost] += 1
            agent.peer.episodes.pop(agent.number, None)
        else:
            self.total += self.reported["reward"]
        if self.lost is not None or self.reported["done"]:
            self.over.set_result(None)


class ServiceController(Controller):
    """The slot's seat: the agent's observations in, the policy's actions out."""

    def __init__(self, episode: ServiceEpisode) -> None:
        self.episode = episode

    async def ready(self) -> bool:
        await self.episode.assigned.wait()
        return not self.done

    def get_state(self) -> Any:
        return self.episode.reported["observation"]

    async def __call__(self, action: Any) -> None:
        await self.episode.act(action)

    def get_reward(self) -> float:
        return 0.0 if self.episode.lost else self.episode.reported["reward"]

    @property
    def done(self) -> bool:
        episode = self.episode
        return episode.report is None or episode.lost is not None or episode.report["done"]

    @property
    def truncated(self) -> bool:
        episode = self.episode
        if episode.lost is not None:
            return True
        return episode.report is not None and episode.report["truncated"]

    def get_result(self) -> dict[str, Any]:
        episode = self.episode
        if episode.report is None or episode.lost is not None or episode.report["result"] is None:
            return {"fitness": episode.total, "win": None, "objectives": {},
                    "lost": episode.report is None or episode.lost is not None}
        return episode.report["result"]


class ServiceMDP(EpisodeCounts, MDP):
    """One agent slot of the policy service (``mdp.service``): one player, the agents' spaces."""

    def __init__(self, settings: ServiceSettings, seed: int | None = None) -> None:
        self.settings, self.spec = settings, settings.spec()
        EpisodeCounts.__init__(self, FAULTS)

    @classmethod
    def from_mdp(cls, mdp: Mapping[str, Any], seed: int | None = None) -> "ServiceMDP":
        return cls(ServiceSettings.from_mapping(mdp["service"]), seed)

    def describe(self) -> list[PlayerSpec]:
        return [self.spec]

    def reset(self, *players: int, seed: int | None = None) -> Episode:
        if players != (0,):
            raise ValueError(f"a policy-service slot has one player (0), got {players}")
        episode = ServiceEpisode(self)
        return Episode([ServiceController(episode)], [episode.run()])
