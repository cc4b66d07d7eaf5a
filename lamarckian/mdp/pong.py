"""A built-in two-player Pong with vector observations, a scripted rule opponent and rgb rendering.

The field is the unit square; player 0's paddle is on the left edge (x = 0), player 1's on the right
(x = 1). Each player sees the game mirrored so that its own paddle is on the left, so one policy plays
either side. Units: positions in field widths, velocities in field widths per step.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import gymnasium
import numpy as np

from ..config.sections import Section
from .base import PlayerSpec
from .simultaneous import SimultaneousMDP

STAY, UP, DOWN = 0, 1, 2
OBSERVATION_SIZE = 8


@dataclasses.dataclass(frozen=True)
class PongSettings(Section):
    """The ``mdp.pong`` keys.

    Attributes:
        score: points that win a game.
        max_steps: steps after which the game ends (time-out; the leader wins, a tie is a draw).
        paddle_half: half the paddle height (field heights).
        paddle_speed: paddle movement per step.
        ball_speed: horizontal ball speed at a serve; grows by ``speedup`` per hit up to ``max_ball_speed``.
        max_bounce: vertical ball speed after a hit at the paddle's very edge.
        rule_speed: fraction of ``paddle_speed`` the rule opponent moves at.
        rule_reaction: the rule opponent follows the ball only once it is within this distance (field widths).
        hit_reward: reward for returning the ball (shaping; 0 turns it off).
    """

    KEY = "mdp.pong"

    score: int
    max_steps: int
    paddle_half: float
    paddle_speed: float
    ball_speed: float
    speedup: float
    max_ball_speed: float
    max_bounce: float
    rule_speed: float
    rule_reaction: float
    hit_reward: float


class Pong(SimultaneousMDP):
    """Two-player Pong; actions 0 stay, 1 up, 2 down; observation of 8 floats in [-1, 1] but the ball's height over
    one's own paddle (entry 6), in [-4, 4]; the declared bounds leave slack around both."""

    def __init__(self, settings: PongSettings | None = None, seed: int | None = None) -> None:
        self.settings = settings or PongSettings.defaults()
        self.random = np.random.default_rng(seed)
        bound = np.full(OBSERVATION_SIZE, 2.0, np.float32)
        bound[6] = 5.0                                  # (y - own) * 4: the whole field's height is 4
        self.spec = PlayerSpec(gymnasium.spaces.Box(-bound, bound, dtype=np.float32), gymnasium.spaces.Discrete(3))
        self.paddles = np.full(2, 0.5)
        self.ball = np.zeros(2)
        self.velocity = np.zeros(2)
        self.points = [0, 0]
        self.steps = 0

    @classmethod
    def from_mdp(cls, mdp: Mapping[str, Any], seed: int | None = None) -> Pong:
        """``mdp.pong``'s game."""
        return cls(PongSettings.from_mapping(mdp["pong"]), seed=seed)

    def describe(self) -> list[PlayerSpec]:
        return [self.spec, self.spec]

    def start(self, seed: int | None) -> None:
        if seed is not None:
            self.random = np.random.default_rng(seed)
        self.paddles[:] = 0.5
        self.points = [0, 0]
        self.steps = 0
        self.over = self.timed_out = False
        self._serve(toward=int(self.random.integers(2)))

    def _serve(self, toward: int) -> None:
        s = self.settings
        self.ball[:] = 0.5, self.random.uniform(0.25, 0.75)
        self.velocity[:] = (-s.ball_speed if toward == 0 else s.ball_speed,
                            self.random.uniform(-0.5, 0.5) * s.max_bounce)

    def observe(self, player: int) -> np.ndarray:
        s = self.settings
        x, y = self.ball
        vx, vy = self.velocity
        if player == 1:
            x, vx = 1.0 - x, -vx
        own, other = self.paddles[player], self.paddles[1 - player]
        return np.array([(own - 0.5) * 2, (other - 0.5) * 2, x * 2 - 1, (y - 0.5) * 2,
                         vx / s.max_ball_speed, vy / s.max_bounce, (y - own) * 4, self.steps / s.max_steps],
                        np.float32)

    def rule(self, player: int) -> int:
        """Follow the ball once it approaches within ``rule_reaction``, at ``rule_speed``; else re-centre."""
        s = self.settings
        x, y = self.ball
        distance, approaching = (x, self.velocity[0] < 0) if player == 0 else (1 - x, self.velocity[0] > 0)
        target = y if approaching and distance < s.rule_reaction else 0.5
        gap = target - self.paddles[player]
        if abs(gap) < s.paddle_half * 0.3:
            return STAY
        return UP if gap > 0 else DOWN

    def step(self, actions: list[Any]) -> list[float]:
        s = self.settings
        for player, action in enumerate(actions):
            action = int(action)
            if action not in (STAY, UP, DOWN):
                raise ValueError(f"Pong action must be 0, 1 or 2, got {action}")
            speed = s.paddle_speed * (s.rule_speed if player in self.ruled else 1.0)
            move = {STAY: 0.0, UP: speed, DOWN: -speed}[action]
            self.paddles[player] = np.clip(self.paddles[player] + move, s.paddle_half, 1 - s.paddle_half)
        rewards = [0.0, 0.0]
        self.ball += self.velocity
        if not 0.0 <= self.ball[1] <= 1.0:  # top and bottom walls
            self.ball[1] = -self.ball[1] if self.ball[1] < 0 else 2.0 - self.ball[1]
            self.velocity[1] = -self.velocity[1]
        for player, crossed in ((0, self.ball[0] <= 0.0), (1, self.ball[0] >= 1.0)):
            if not crossed:
                continue
            offset = (self.ball[1] - self.paddles[player]) / s.paddle_half
            if abs(offset) <= 1.05:
                self.ball[0] = -self.ball[0] if player == 0 else 2.0 - self.ball[0]
                speed = min(abs(self.velocity[0]) * s.speedup, s.max_ball_speed)
                self.velocity[:] = (speed if player == 0 else -speed), np.clip(offset, -1, 1) * s.max_bounce
                rewards[player] += s.hit_reward
            else:
                self.points[1 - player] += 1
                rewards[1 - player] += 1.0
                rewards[player] -= 1.0
                self._serve(toward=player)
        self.steps += 1
        self.over = max(self.points) >= s.score or self.steps >= s.max_steps
        self.timed_out = self.over and max(self.points) < s.score
        return rewards

    def result(self, player: int) -> dict[str, Any]:
        own, other = self.points[player], self.points[1 - player]
        return {"fitness": float(own - other), "win": 1.0 if own > other else 0.5 if own == other else 0.0,
                "objectives": {"points": float(own), "conceded": float(other)}}

    def render(self, size: int = 160) -> np.ndarray:
        """The field as ``(size, size, 3)`` uint8: paddles and ball in white on black, y up."""
        frame = np.zeros((size, size, 3), np.uint8)
        half = max(1, int(self.settings.paddle_half * size))
        for player, column in ((0, slice(0, 3)), (1, slice(size - 3, size))):
            centre = int((1 - self.paddles[player]) * (size - 1))
            frame[max(0, centre - half):centre + half, column] = 255
        bx, by = int(self.ball[0] * (size - 1)), int((1 - self.ball[1]) * (size - 1))
        frame[max(0, by - 2):by + 2, max(0, bx - 2):bx + 2] = 255
        return frame
