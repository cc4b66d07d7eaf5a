"""A task only a policy with memory can solve: the first observation shows a cue (±1), later ones hide it, and every
later step pays ``1 / delay`` when the action names the cue."""

from __future__ import annotations

import gymnasium
import numpy as np

from lamarckian.mdp.base import MDP, Controller, Episode, PlayerSpec


class CueController(Controller):
    """Observation ``[cue, 1]`` at step 0, ``[0, 0]`` afterwards; action ``(cue + 1) / 2`` pays at steps 1..delay."""

    def __init__(self, cue: int, delay: int) -> None:
        self.cue, self.delay, self.steps, self.reward, self.total = cue, delay, 0, 0.0, 0.0

    def get_state(self) -> np.ndarray:
        return np.array([self.cue, 1.0] if self.steps == 0 else [0.0, 0.0], np.float32)

    async def __call__(self, action) -> None:
        self.reward = 1.0 / self.delay if self.steps > 0 and int(action) == (self.cue + 1) // 2 else 0.0
        self.steps += 1
        self.total += self.reward

    def get_reward(self) -> float:
        return self.reward

    @property
    def done(self) -> bool:
        return self.steps > self.delay

    @property
    def truncated(self) -> bool:
        return False

    def get_result(self) -> dict:
        return {"fitness": self.total, "win": None, "objectives": {}}


class Cue(MDP):
    """One player; ``mdp.kwargs``: ``delay`` (steps after the cue). A memoryless policy scores 0.5 at best."""

    def __init__(self, delay: int = 4, seed: int | None = None) -> None:
        self.delay, self.random = delay, np.random.default_rng(seed)
        self.spec = PlayerSpec(gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32), gymnasium.spaces.Discrete(2))

    def describe(self) -> list[PlayerSpec]:
        return [self.spec]

    def reset(self, *players: int) -> Episode:
        return Episode([CueController(int(self.random.choice([-1, 1])), self.delay)], [])
