"""PettingZoo AEC (turn-based) environments as MDPs: one seat per possible agent, acting in the environment's order.

A seat's controller waits for its turn in :meth:`TurnController.ready`; ``await controller(action)`` returns when the
game has come back to that seat or ended, and ``get_reward`` is what the seat received meanwhile (the others' moves
included: a move that lets the opponent win is paid for at once). Seats nobody controls follow the rule:
``random`` (a uniformly random legal move) or ``lookahead`` (a winning move if there is one, else a move after which
the next player cannot win at once — which blocks its threats — else a random legal move).

Observations are the environment's own (for classic games a dict with ``observation`` and ``action_mask``: the
policy's categorical head takes the mask from it). An illegal move is counted (the ``illegal`` objective) and
handled as the environment does (classic games end with a penalty for the mover).
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import gymnasium
import numpy as np

from .base import MDP, Episode, PlayerSpec, SeatController
from .hitch import HitchGuard

RULES = ("random", "lookahead")


def snapshot(env: Any) -> Any:
    """A copy of an unwrapped AEC game in its current state, to try moves on. Its spaces are shared, not copied (a
    move never changes them), and the rest of its state is copied through an in-memory pickle of this process's own
    object (3× faster than ``copy.deepcopy``, which would also rebuild the game from its constructor arguments, as
    PettingZoo's environments pickle that way; nothing from outside the process is ever unpickled here)."""
    shared = {name: value for name, value in env.__dict__.items() if isinstance(value, gymnasium.Space) or (
        isinstance(value, dict) and value and all(isinstance(item, gymnasium.Space) for item in value.values()))}
    state = {name: value for name, value in env.__dict__.items() if name not in shared}
    clone = object.__new__(type(env))
    clone.__dict__.update(pickle.loads(pickle.dumps(state, pickle.HIGHEST_PROTOCOL)), **shared)
    return clone


class TurnController(SeatController):
    """One seat of a :class:`TurnMDP`."""

    def __init__(self, mdp: "TurnMDP", seat: int) -> None:
        super().__init__(mdp, seat)
        self.reward = 0.0              # received since this seat's last move

    def get_state(self) -> Any:
        return self.mdp.env.observe(self.mdp.agents[self.player])

    async def ready(self) -> bool:
        await self.mdp.turns[self.player].wait()
        return not self.mdp.over

    async def __call__(self, action: Any) -> None:
        self.reward = 0.0
        self.mdp.turns[self.player].clear()
        self.mdp.submit(self.player, action)
        await self.mdp.turns[self.player].wait()

    def get_reward(self) -> float:
        return self.reward


class TurnMDP(MDP):
    """A PettingZoo AEC environment; seat i is ``possible_agents[i]``.

    Args:
        env: the AEC environment (``module.env(**kwargs)``).
        rule: how seats nobody controls move (:data:`RULES`).
    """

    def __init__(self, env: Any, rule: str = "random", seed: int | None = None) -> None:
        if rule not in RULES:
            raise ValueError(f"mdp.pettingzoo.rule={rule!r}: expected one of {RULES}")
        self.env, self.rule_kind = env, rule
        self.agents = list(env.possible_agents)
        self.index = {agent: seat for seat, agent in enumerate(self.agents)}
        self.specs = [PlayerSpec(env.observation_space(a), env.action_space(a)) for a in self.agents]
        self.seed, self.random = seed, np.random.default_rng(seed)
        self.controllers: dict[int, TurnController] = {}
        self.turns: list[asyncio.Event] = []
        self.moves: list[asyncio.Event] = []
        self.actions: list[Any] = []
        self.totals = [0.0] * len(self.agents)
        self.illegal = [0] * len(self.agents)
        self.over, self.timed_out = True, False
        self.guard = HitchGuard(type(env).__name__)     # its steps, on a thread of their own once they hitched

    def describe(self) -> list[PlayerSpec]:
        return self.specs

    def hitched(self, seconds: float) -> None:
        self.guard.offload(seconds)

    def seat_names(self) -> list[str]:
        return list(self.agents)

    def reset(self, *players: int, seed: int | None = None) -> Episode:
        count = len(self.agents)
        if len(set(players)) != len(players) or not all(0 <= p < count for p in players):
            raise ValueError(f"players must be distinct seats in 0..{count - 1}, got {players}")
        if seed is None and self.seed is not None:
            seed, self.seed = self.seed, None
        self.guard.settle()
        self.env.reset(seed=seed)
        self.over, self.timed_out = False, False
        self.totals, self.illegal = [0.0] * count, [0] * count
        self.turns = [asyncio.Event() for _ in range(count)]
        self.moves = [asyncio.Event() for _ in range(count)]
        self.actions = [None] * count
        self.controllers = {seat: TurnController(self, seat) for seat in players}
        return Episode([self.controllers[seat] for seat in players], [self._run()])

    def submit(self, seat: int, action: Any) -> None:
        self.actions[seat] = action
        self.moves[seat].set()

    async def _run(self) -> None:
        """Play the game in the environment's order: a controlled seat is woken and its move awaited, the others
        follow the rule; at the end every seat is woken."""
        try:
            while self.env.agents:
                agent = self.env.agent_selection
                if self.env.terminations[agent] or self.env.truncations[agent]:
                    await self.guard.run(self._step, agent, None)
                    continue
                seat = self.index[agent]
                if seat in self.controllers:
                    self.moves[seat].clear()
                    self.turns[seat].set()
                    await self.moves[seat].wait()
                    action = self.actions[seat]
                else:
                    action = self.rule(seat)
                await self.guard.run(self._step, agent, action)
        finally:
            self.over = True
            self.timed_out = any(self.env.truncations.values()) and not any(self.env.terminations.values())
            for event in self.turns:
                event.set()

    def _step(self, agent: str, action: Any) -> None:
        if action is not None and not self.legal(agent)[int(action)]:
            self.illegal[self.index[agent]] += 1
        self.env.step(action)
        for name, reward in self.env.rewards.items():
            seat = self.index[name]
            self.totals[seat] += float(reward)
            if seat in self.controllers:
                self.controllers[seat].reward += float(reward)

    def legal(self, agent: str, env: Any = None) -> np.ndarray:
        """``(A,)`` bool: the moves ``agent`` may make now (all, without an action mask)."""
        env = env if env is not None else self.env
        observation = env.observe(agent)
        if isinstance(observation, dict) and "action_mask" in observation:
            return np.asarray(observation["action_mask"], bool)
        space = self.specs[self.index[agent]].action
        assert isinstance(space, gymnasium.spaces.Discrete)      # a mask needs discrete actions
        return np.ones(int(space.n), bool)

    def rule(self, seat: int) -> int:
        """The move of a seat nobody controls (``mdp.pettingzoo.rule``)."""
        agent = self.agents[seat]
        moves = np.flatnonzero(self.legal(agent))
        if self.rule_kind == "lookahead":
            safe = []
            for move in moves:
                after = snapshot(self.env.unwrapped)
                after.step(int(move))
                if after.rewards[agent] > 0:
                    return int(move)                                  # wins now
                if not self._next_player_can_win(after):
                    safe.append(int(move))
            if safe:
                return int(self.random.choice(safe))
        return int(self.random.choice(moves))

    def _next_player_can_win(self, env: Any) -> bool:
        if not env.agents:
            return False
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            return False
        for move in np.flatnonzero(self.legal(agent, env)):
            after = snapshot(env)
            after.step(int(move))
            if after.rewards[agent] > 0:
                return True
        return False

    def result(self, seat: int) -> dict[str, Any]:
        """Fitness: the seat's summed rewards; win (two seats): 1 above the other, 0.5 level, 0 below; objectives:
        ``rank`` (0 best) and ``illegal`` moves."""
        order = sorted(self.totals, reverse=True)
        win = None
        if len(self.totals) == 2:
            mine, theirs = self.totals[seat], self.totals[1 - seat]
            win = 1.0 if mine > theirs else 0.0 if mine < theirs else 0.5
        return {"fitness": self.totals[seat], "win": win,
                "objectives": {"rank": float(order.index(self.totals[seat])), "illegal": float(self.illegal[seat])}}

    def close(self) -> None:
        self.guard.close()
        self.env.close()
