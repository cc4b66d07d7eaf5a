"""Simultaneous-move games on the asyncio contract: every player acts, then one step (Pong, PettingZoo)."""

from __future__ import annotations

import abc
from typing import Any

import gymnasium
import numpy as np

from .base import MDP, Episode, Lockstep, SeatController
from .hitch import HitchGuard


class LockstepController(SeatController):
    """One seat of a :class:`SimultaneousMDP`; acts through the episode's :class:`Lockstep`."""

    def __init__(self, mdp: "SimultaneousMDP", lockstep: Lockstep, player: int) -> None:
        super().__init__(mdp, player)
        self.lockstep = lockstep

    def get_state(self) -> Any:
        return self.mdp.observe(self.player)

    async def __call__(self, action: Any) -> None:
        await self.lockstep.submit(self.player, action)

    def get_reward(self) -> float:
        return float(self.mdp.rewards[self.player])


class SimultaneousMDP(MDP):
    """Base for games where all players move at once; players not requested in ``reset`` follow ``rule``.

    Subclasses implement ``start(seed)``, ``observe(player)``, ``step(actions) -> rewards``, ``result(player)``,
    ``rule(player)`` and keep ``over`` / ``timed_out`` up to date.
    """

    over: bool = True
    timed_out: bool = False
    ruled: frozenset[int] = frozenset()  # seats the rule drives this episode
    rewards: list[float]
    _guard: HitchGuard | None = None

    @property
    def guard(self) -> HitchGuard:
        """Runs :meth:`step` (on a thread of its own once it hitched: :meth:`hitched`)."""
        if self._guard is None:
            self._guard = HitchGuard(type(self).__name__)
        return self._guard

    def hitched(self, seconds: float) -> None:
        self.guard.offload(seconds)

    def reset(self, *players: int, seed: int | None = None) -> Episode:
        count = len(self)
        if len(set(players)) != len(players) or not all(0 <= p < count for p in players):
            raise ValueError(f"players must be distinct seats in 0..{count - 1}, got {players}")
        self.ruled = frozenset(range(count)) - frozenset(players)
        self.guard.settle()
        self.start(seed)
        self.rewards = [0.0] * count
        lockstep = Lockstep(tuple(players))
        return Episode([LockstepController(self, lockstep, p) for p in players], [self._tick(lockstep)])

    async def _tick(self, lockstep: Lockstep) -> None:
        while not self.over:
            chosen = await lockstep.actions()
            actions = [chosen[p] if p in chosen else self.rule(p) for p in range(len(self))]
            guard = self.guard
            self.rewards = self.step(actions) if guard.thread is None else await guard.run(self.step, actions)
            lockstep.release()

    @abc.abstractmethod
    def start(self, seed: int | None) -> None:
        """Set up a new episode (seeded if ``seed`` is given)."""

    @abc.abstractmethod
    def observe(self, player: int) -> Any:
        """The player's observation."""

    @abc.abstractmethod
    def step(self, actions: list[Any]) -> list[float]:
        """Advance one step with every player's action; the rewards, one per player."""

    @abc.abstractmethod
    def result(self, player: int) -> dict[str, Any]:
        """The player's episode result (see :meth:`Controller.get_result`)."""

    def global_state_space(self) -> gymnasium.Space:
        """Every seat's flattened observation side by side (a central critic's input where the game has no state
        of its own)."""
        spaces = [gymnasium.spaces.flatten_space(spec.observation) for spec in self.describe()]
        width = sum(int(np.prod(space.shape or ())) for space in spaces)
        return gymnasium.spaces.Box(-np.inf, np.inf, (width,), np.float32)

    def global_state(self) -> np.ndarray:
        return np.concatenate([np.asarray(gymnasium.spaces.flatten(spec.observation, self.observe(seat)), np.float32)
                               for seat, spec in enumerate(self.describe())])

    def rule(self, player: int) -> Any:
        """The built-in policy for a seat nobody controls."""
        raise NotImplementedError(f"{type(self).__name__} has no rule opponent; control every seat")
