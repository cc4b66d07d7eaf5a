"""A game that runs elsewhere as an MDP (``mdp.create: game``): every environment of an actor is an episode on the
game server, all of them multiplexed over the process's few connections (:class:`GameClient`), so an actor with
thousands of environments awaits thousands of steps at once and batches every waiting player into one forward.

An episode the server loses (no answer within ``mdp.game.timeout``, a dropped connection, garbage, an ``error``
reply) ends for the trainer at once: its steps so far stay in the segment as an episode cut by a time limit
(bootstrapped from the last observation), its result is marked ``lost`` (the actors leave it out of the training
results) and :meth:`GameMDP.counters` counts it by cause (TensorBoard ``env/lost_<cause>``, the status line's
``lost``); the first offence of each kind is logged once per process (:func:`~lamarckian.games.client.report_once`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping

from ..mdp import MDP, Controller, Episode, PlayerSpec
from . import protocol
from .client import FAULTS, GameClient, GameConnection, GameFault, GameSettings, fetch_hello, report_once
from .counts import EpisodeCounts

_hellos: dict[tuple, dict[str, Any]] = {}    # per process: a server's hello, fetched once


class GameEpisode:
    """The trainer's seats of one served episode. The tick resets it and waits for its end; the last seat to submit
    its action in a round sends the ``step`` and every seat's call returns with the reply."""

    def __init__(self, mdp: "GameMDP", seats: list[int], seed: int | None) -> None:
        self.mdp, self.seats, self.seed = mdp, seats, seed
        self.client = GameClient.of(mdp.settings, mdp.hello)
        self.spaces = [mdp.specs[seat].observation for seat in seats]
        self.action_spaces = [mdp.specs[seat].action for seat in seats]
        self.states: list[dict[str, Any] | None] = [None] * len(seats)
        self.totals = [0.0] * len(seats)
        self.undone = 0
        self.lost: str | None = None
        self.actions: dict[int, Any] = {}
        self.connection: GameConnection | None = None
        self.number = -1
        loop = asyncio.get_running_loop()
        self.observed = asyncio.Event()     # the first observation (or the loss) is in
        self.over = loop.create_future()    # every seat is done, or the episode is lost
        self.stepped: asyncio.Future | None = None   # the round the seats that submitted wait for

    def playing(self) -> int:
        """Seats still playing (none before the first observation)."""
        return self.undone

    async def run(self) -> None:
        """The tick: reset, then wait for the end; a cancelled episode (an evaluation's step cap) is closed on the
        server."""
        try:
            self.connection, self.number, reply = await self.client.reset(self.seats, self.seed)
            self._update(reply)
            if self.playing():
                await self.over
            else:
                self._end(close=False)
        except GameFault as fault:
            self._lose(fault.kind, close=False)
        except protocol.ProtocolViolation as error:    # a reply that does not fit the spaces
            self._misfit(error)
        except asyncio.CancelledError:
            self._end(close=True)
            raise
        finally:
            self.observed.set()

    async def submit(self, index: int, action: Any) -> None:
        """Seat ``index`` acts; returns once the step that used the action has been answered (or lost)."""
        if self.over.done():                 # lost while this seat was choosing its action
            return
        self.actions[index] = protocol.encode_action(action, self.action_spaces[index])
        if len(self.actions) < self.playing():
            if self.stepped is None:
                self.stepped = asyncio.get_running_loop().create_future()
            await asyncio.shield(self.stepped)
            return
        actions = [self.actions.get(i) for i in range(len(self.seats))]
        self.actions = {}
        try:
            assert self.connection is not None, "a step before the reset's answer"
            self._update(await self.client.ask(self.connection, self.number,
                                               {"type": "step", "episode": self.number, "actions": actions}))
            if not self.playing():
                self._end(close=False)
        except GameFault as fault:
            self._lose(fault.kind, close=fault.kind == "timeout")
        except protocol.ProtocolViolation as error:
            self._misfit(error)
        finally:
            stepped, self.stepped = self.stepped, None
            if stepped is not None and not stepped.done():
                stepped.set_result(None)

    def _update(self, reply: Mapping[str, Any]) -> None:
        states = protocol.seat_states(reply, self.spaces, "observation")
        for index, state in enumerate(states):
            self.totals[index] += state["reward"]
        self.states = list(states)
        self.undone = sum(1 for state in states if not state["done"])
        self.observed.set()

    def _end(self, close: bool) -> None:
        """The episode is over for the trainer: its slot and connection share are given back (once)."""
        if not self.over.done():
            self.over.set_result(None)
            if self.connection is not None:
                self.client.finish(self.connection, self.number, close=close)

    def _misfit(self, error: protocol.ProtocolViolation) -> None:
        """A reply that does not fit the seats' spaces: the episode ends (closed on the server) and is lost as
        ``garbage``; the connection goes on serving the others."""
        peer = self.connection.peer if self.connection is not None else self.mdp.settings.address
        report_once("misfit", f"{peer} answered episode {self.number} with {error}: the episode was closed and is "
                              "lost (garbage)")
        self._lose("garbage", close=True)

    def _lose(self, kind: str, close: bool) -> None:
        if not self.over.done():
            self.lost = kind
            self.mdp.faults[kind] += 1
            if self.connection is None:            # the reset failed: its slot was given back already
                self.over.set_result(None)
        self._end(close)
        self.observed.set()


class GameController(Controller):
    """One trainer seat of a :class:`GameEpisode`."""

    def __init__(self, episode: GameEpisode, index: int) -> None:
        self.episode, self.index = episode, index

    @property
    def state(self) -> dict[str, Any] | None:
        """The seat's last state (None before the reset's answer)."""
        return self.episode.states[self.index]

    @property
    def reported(self) -> dict[str, Any]:
        """The seat's last state, once there is one (the controller reads it after ``ready``)."""
        state = self.episode.states[self.index]
        assert state is not None, "the seat has no state before the reset's answer"
        return state

    async def ready(self) -> bool:
        await self.episode.observed.wait()
        return not self.done

    def get_state(self) -> Any:
        return self.reported["observation"]

    async def __call__(self, action: Any) -> None:
        await self.episode.submit(self.index, action)

    def get_reward(self) -> float:
        return 0.0 if self.episode.lost else self.reported["reward"]

    @property
    def done(self) -> bool:
        return self.episode.lost is not None or self.state is None or self.state["done"]

    @property
    def truncated(self) -> bool:
        if self.episode.lost is not None:       # cut by the fault: bootstrap from the last observation
            return self.state is not None
        return bool(self.state and self.state["truncated"])

    def location(self) -> str:
        """The game server this seat's episode plays on (its connection's peer: a launched instance's address)."""
        connection = self.episode.connection
        return f"game server {connection.peer if connection is not None else self.episode.mdp.settings.address}"

    def get_result(self) -> dict[str, Any]:
        if self.episode.lost is not None or self.state is None or self.state["result"] is None:
            return {"fitness": self.episode.totals[self.index], "win": None, "objectives": {}, "lost": True}
        return self.state["result"]


class GameMDP(EpisodeCounts, MDP):
    """The trainer's seats of a game server (``mdp.game``); seats left out of :meth:`reset` are played by the
    server's rule (where its ``hello`` says it has one)."""

    def __init__(self, settings: GameSettings, seed: int | None = None) -> None:
        self.settings, self.seed = settings, seed
        self.launcher = settings.launcher()          # mdp.game.launch: this process's instances, held until close()
        if self.launcher is not None:
            self.launcher.acquire()
        key = (settings.address, settings.launch, settings.secret, settings.tls)
        if key not in _hellos:
            _hellos[key] = fetch_hello(settings) if self.launcher is None else self.launcher.hello()
        self.hello = _hellos[key]
        described = protocol.player_specs(self.hello)
        self.specs = [PlayerSpec(observation, action) for _, observation, action in described]
        self.names = [name for name, _, _ in described]
        EpisodeCounts.__init__(self, FAULTS)

    @classmethod
    def from_mdp(cls, mdp: Mapping[str, Any], seed: int | None = None) -> "GameMDP":
        return cls(GameSettings.from_mapping(mdp["game"]), seed)

    def describe(self) -> list[PlayerSpec]:
        return self.specs

    def close(self) -> None:
        """Done with the launched instances (the last environment of the process to close ends them: SIGTERM)."""
        launcher, self.launcher = self.launcher, None
        if launcher is not None:
            launcher.release()

    def seat_names(self) -> list[str]:
        """The names the game server gave its seats (``hello.players[i].name``)."""
        return list(self.names)

    def reset(self, *players: int, seed: int | None = None) -> Episode:
        seats = list(players)
        if not seats or len(set(seats)) != len(seats) or not all(0 <= p < len(self.specs) for p in seats):
            raise ValueError(f"players must be distinct seats in 0..{len(self.specs) - 1}, got {players}")
        if len(seats) < len(self.specs) and not self.hello.get("rule"):
            raise ValueError(f"the game at {self.settings.address} has no rule for seats left out: play all "
                             f"{len(self.specs)}")
        if seed is None and self.seed is not None:
            seed, self.seed = self.seed, None     # seed the first episode; later ones continue the server's stream
        self.episodes += 1
        episode = GameEpisode(self, seats, seed)
        return Episode([GameController(episode, i) for i in range(len(seats))], [episode.run()])

