"""Coins: a built-in N-player game. Players move in the unit square; whoever reaches a coin first takes it and
a new one appears elsewhere. After ``max_steps`` the players are ranked by coins (ties share a rank).

Observation of a player (all relative to itself, others in seat order after it): own position, the offset
to each coin (nearest first), the offset to every other player, own and others' coin counts (scaled), and
the time left. Actions: 0 stay, 1 up, 2 down, 3 left, 4 right.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import gymnasium
import numpy as np
from scipy.stats import rankdata

from ..config.sections import Section
from .base import PlayerSpec
from .simultaneous import SimultaneousMDP

MOVES = np.array([[0.0, 0.0], [0.0, 1.0], [0.0, -1.0], [-1.0, 0.0], [1.0, 0.0]])


@dataclasses.dataclass(frozen=True)
class CoinsSettings(Section):
    """The ``mdp.coins`` keys: players, coins on the field, speed (per step), pick-up radius, steps, the rule's
    probability of a random move."""

    KEY = "mdp.coins"

    players: int
    coins: int
    speed: float
    radius: float
    max_steps: int
    rule_noise: float


class Coins(SimultaneousMDP):
    """N players racing for coins; ranked by coins at the end."""

    def __init__(self, settings: CoinsSettings | None = None, seed: int | None = None) -> None:
        self.settings = s = settings or CoinsSettings.defaults()
        if s.players < 2 or s.coins < 1:
            raise ValueError(f"mdp.coins needs players >= 2 and coins >= 1, got {s.players} and {s.coins}")
        self.random = np.random.default_rng(seed)
        size = 2 + 2 * s.coins + 2 * (s.players - 1) + s.players + 1
        bound = np.full(size, 2.0, np.float32)
        self.spec = PlayerSpec(gymnasium.spaces.Box(-bound, bound, dtype=np.float32), gymnasium.spaces.Discrete(5))
        self.positions = np.zeros((s.players, 2))
        self.coins = np.zeros((s.coins, 2))
        self.scores = np.zeros(s.players)
        self.steps = 0

    @classmethod
    def from_mdp(cls, mdp: Mapping[str, Any], seed: int | None = None) -> Coins:
        """``mdp.coins``'s game."""
        return cls(CoinsSettings.from_mapping(mdp["coins"]), seed=seed)

    def describe(self) -> list[PlayerSpec]:
        return [self.spec] * self.settings.players

    def start(self, seed: int | None) -> None:
        if seed is not None:
            self.random = np.random.default_rng(seed)
        self.positions = self.random.random((self.settings.players, 2))
        self.coins = self.random.random((self.settings.coins, 2))
        self.scores[:] = 0
        self.steps = 0
        self.over = self.timed_out = False

    def observe(self, player: int) -> np.ndarray:
        s = self.settings
        own = self.positions[player]
        coins = self.coins - own
        coins = coins[np.argsort(np.linalg.norm(coins, axis=1))]
        order = [(player + k) % s.players for k in range(1, s.players)]
        others = self.positions[order] - own
        scores = np.concatenate([[self.scores[player]], self.scores[order]]) / max(1.0, s.max_steps * s.speed)
        return np.concatenate([own * 2 - 1, coins.ravel(), others.ravel(), scores,
                               [1 - self.steps / s.max_steps]]).astype(np.float32)

    def rule(self, player: int) -> int:
        """Head for the nearest coin (a random move with probability ``rule_noise``)."""
        if self.random.random() < self.settings.rule_noise:
            return int(self.random.integers(5))
        offset = self.coins - self.positions[player]
        dx, dy = offset[np.argmin(np.linalg.norm(offset, axis=1))]
        if abs(dx) > abs(dy):
            return 4 if dx > 0 else 3
        return 1 if dy > 0 else 2

    def step(self, actions: list[Any]) -> list[float]:
        s = self.settings
        for player, action in enumerate(actions):
            action = int(action)
            if not 0 <= action < len(MOVES):
                raise ValueError(f"Coins action must be 0..4, got {action}")
            self.positions[player] = np.clip(self.positions[player] + MOVES[action] * s.speed, 0.0, 1.0)
        rewards = [0.0] * s.players
        for coin in range(s.coins):
            distances = np.linalg.norm(self.positions - self.coins[coin], axis=1)
            reached = np.flatnonzero(distances <= s.radius)
            if reached.size:
                winner = int(reached[np.argmin(distances[reached])])
                self.scores[winner] += 1
                rewards[winner] += 1.0
                self.coins[coin] = self.random.random(2)
        self.steps += 1
        self.over = self.timed_out = self.steps >= s.max_steps
        return rewards

    def result(self, player: int) -> dict[str, Any]:
        ranks = list(rankdata(-self.scores, method="average"))  # 1 = most coins; ties share the mean place
        best = ranks[player] == min(ranks)
        shared = ranks.count(ranks[player])
        return {"fitness": float(self.scores[player]), "win": (1.0 / shared) if best else 0.0,
                "rank": float(ranks[player]), "objectives": {"coins": float(self.scores[player])}}

    def render(self, size: int = 160) -> np.ndarray:
        """Players as coloured squares, coins as yellow dots, on black; ``(size, size, 3)`` uint8."""
        frame = np.zeros((size, size, 3), np.uint8)
        colours = np.array([[255, 64, 64], [64, 160, 255], [64, 255, 64], [255, 64, 255], [255, 255, 255]])
        for index, (x, y) in enumerate(self.positions):
            px, py = int(x * (size - 1)), int((1 - y) * (size - 1))
            frame[max(0, py - 3):py + 3, max(0, px - 3):px + 3] = colours[index % len(colours)]
        for x, y in self.coins:
            px, py = int(x * (size - 1)), int((1 - y) * (size - 1))
            frame[max(0, py - 2):py + 2, max(0, px - 2):px + 2] = (255, 215, 0)
        return frame
