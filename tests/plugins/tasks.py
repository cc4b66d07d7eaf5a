"""A user's own environments, outside the package: the "add your own MDP / VecTask" guide's examples, tested."""

from __future__ import annotations

import threading

import gymnasium
import numpy as np
import torch

from lamarckian.mdp.base import MDP, Controller, Episode, PlayerSpec
from lamarckian.mdp.vec.base import VecTask


class WalkController(Controller):
    """Walk on a line from 0 to ``goal``: action 1 steps right, 0 steps left; reward 1 on arrival."""

    def __init__(self, goal: int, limit: int) -> None:
        self.goal, self.limit, self.position, self.steps, self.reward, self.total = goal, limit, 0, 0, 0.0, 0.0

    def get_state(self) -> np.ndarray:
        return np.array([self.position / self.goal], np.float32)

    async def __call__(self, action) -> None:
        self.position = max(0, self.position + (1 if int(action) == 1 else -1))
        self.steps += 1
        self.reward = 1.0 if self.position >= self.goal else 0.0
        self.total += self.reward

    def get_reward(self) -> float:
        return self.reward

    @property
    def done(self) -> bool:
        return self.position >= self.goal or self.steps >= self.limit

    @property
    def truncated(self) -> bool:
        return self.steps >= self.limit and self.position < self.goal

    def get_result(self) -> dict:
        return {"fitness": self.total, "win": None, "objectives": {}}


class Walk(MDP):
    """One player; ``mdp.kwargs``: ``goal``, ``limit``."""

    def __init__(self, goal: int = 4, limit: int = 50, seed: int | None = None) -> None:
        self.goal, self.limit = goal, limit
        self.spec = PlayerSpec(gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32), gymnasium.spaces.Discrete(2))

    def describe(self) -> list[PlayerSpec]:
        return [self.spec]

    def reset(self, *players: int) -> Episode:
        return Episode([WalkController(self.goal, self.limit)], [])


class OneGuess(Controller):
    """A one-step episode: the guess earns ``reward`` and ends it."""

    reward, guessed = 0.0, False

    def answer(self, reward: float) -> None:
        self.reward, self.guessed = reward, True

    def get_reward(self) -> float:
        return self.reward

    @property
    def done(self) -> bool:
        return self.guessed

    def get_result(self) -> dict:
        return {"fitness": self.reward, "win": None, "objectives": {}}


class LockController(OneGuess):
    """One guess at a code: the observation shows it (one-hot per digit), the guess is every digit at once, the
    reward the share of digits right (1 at best; 1 / ``base`` on average for a random guess)."""

    def __init__(self, code: np.ndarray, base: int) -> None:
        self.code, self.base = code, base

    def get_state(self) -> np.ndarray:
        return np.eye(self.base, dtype=np.float32)[self.code].reshape(-1)

    async def __call__(self, action) -> None:
        self.answer(float(np.mean(np.asarray(action).reshape(-1) == self.code)))


class Lock(MDP):
    """Guess a code of ``digits`` digits in base ``base`` shown in the observation, in one step: a MultiDiscrete
    action (``binary``: base 2 as a MultiBinary one), reward the share of digits right. ``mdp.kwargs``: digits,
    base, binary."""

    def __init__(self, digits: int = 3, base: int = 4, binary: bool = False, seed: int | None = None) -> None:
        self.digits, self.base, self.binary = digits, 2 if binary else base, binary
        self.random = np.random.default_rng(seed)
        action = gymnasium.spaces.MultiBinary(digits) if binary else \
            gymnasium.spaces.MultiDiscrete([self.base] * digits)
        self.spec = PlayerSpec(gymnasium.spaces.Box(0.0, 1.0, (digits * self.base,), np.float32), action)

    def describe(self) -> list[PlayerSpec]:
        return [self.spec]

    def reset(self, *players: int) -> Episode:
        code = self.random.integers(0, self.base, self.digits)
        return Episode([LockController(code, self.base)], [])


class SpotController(OneGuess):
    """One look at a 36×36 frame with a bright square in one of its quadrants (and a vector of noise beside it):
    reward 1 for naming the quadrant (1/4 for a random guess)."""

    def __init__(self, quadrant: int, noise: np.ndarray) -> None:
        self.quadrant, self.noise = quadrant, noise

    def get_state(self) -> dict:
        frame = np.zeros((36, 36, 1), np.uint8)
        row, column = divmod(self.quadrant, 2)
        frame[4 + 18 * row:13 + 18 * row, 4 + 18 * column:13 + 18 * column] = 255
        return {"frame": frame, "noise": self.noise}

    async def __call__(self, action) -> None:
        self.answer(float(int(action) == self.quadrant))


class Spot(MDP):
    """Where is the square? A Dict observation of an image and a vector (the CNN must read the image)."""

    def __init__(self, seed: int | None = None) -> None:
        self.random = np.random.default_rng(seed)
        self.spec = PlayerSpec(gymnasium.spaces.Dict({"frame": gymnasium.spaces.Box(0, 255, (36, 36, 1), np.uint8),
                                                      "noise": gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)}),
                               gymnasium.spaces.Discrete(4))

    def describe(self) -> list[PlayerSpec]:
        return [self.spec]

    def reset(self, *players: int) -> Episode:
        noise = self.random.uniform(-1, 1, 2).astype(np.float32)
        return Episode([SpotController(int(self.random.integers(4)), noise)], [])


class StuckController(WalkController):
    """A walk whose environment stops answering after ``after`` steps (a simulator that hangs)."""

    def __init__(self, after: int) -> None:
        super().__init__(goal=1000, limit=10**6)
        self.after = after

    async def __call__(self, action) -> None:
        if self.steps >= self.after:
            threading.Event().wait()            # never returns
        await super().__call__(action)


class Stuck(Walk):
    """:class:`Walk` whose every environment hangs for ever after ``after`` steps."""

    def __init__(self, after: int = 0, seed: int | None = None) -> None:
        super().__init__()
        self.after = after

    def reset(self, *players: int) -> Episode:
        return Episode([StuckController(self.after)], [])


class Duel(VecTask):
    """Two agents push for ``rounds`` steps; whoever's summed first action is larger wins (a draw within 1e-6).
    Observations: the time left and a constant."""

    num_agents, num_obs, num_actions = 2, 2, 1

    def __init__(self, num_envs: int, device: str = "cpu", seed: int = 0, rounds: int = 4) -> None:
        self.num_envs, self.device, self.max_episode_length = num_envs, torch.device(device), rounds
        self.time = torch.zeros(num_envs, device=self.device)
        self.score = torch.zeros(num_envs, device=self.device)

    def _observe(self) -> torch.Tensor:
        left = 1.0 - self.time / self.max_episode_length
        own = torch.stack([left, torch.ones_like(left)], dim=1)
        return torch.cat([own, own])

    def reset(self) -> torch.Tensor:
        self.time.zero_()
        self.score.zero_()
        return self._observe()

    def reset_idx(self, env_ids: torch.Tensor) -> None:
        self.time[env_ids] = 0.0
        self.score[env_ids] = 0.0

    def seed(self, seed: int) -> None:
        """Nothing random to replay."""

    def step(self, actions: torch.Tensor):
        envs = self.num_envs
        self.score += actions[:envs, 0] - actions[envs:, 0]
        self.time += 1.0
        done = self.time >= self.max_episode_length
        win, lose = done & (self.score > 1e-6), done & (self.score < -1e-6)
        draw = done & ~win & ~lose
        reward0 = win.float() - lose.float()
        extras = {"win": win, "lose": lose, "draw": draw, "time_outs": torch.zeros_like(done)}
        self.reset_idx(torch.nonzero(done).flatten())
        return self._observe(), torch.cat([reward0, -reward0]), done, extras
