"""Environments of the tests' own for the ``mdp.gym`` options, registered by :func:`register_envs` (as a package
that registers its ids by a function does)."""

from __future__ import annotations

import gymnasium
import numpy as np

NOTES = ("go left", "go right")
LETTERS = "abcdefghijklmnopqrstuvwxyz "


class NoteEnv(gymnasium.Env):
    """A one-step task told in words: the observation's ``note`` says which action pays 1 ("go left": 0, "go
    right": 1); its ``position`` carries nothing."""

    observation_space = gymnasium.spaces.Dict({"position": gymnasium.spaces.Box(-1, 1, (2,), np.float32),
                                               "note": gymnasium.spaces.Text(16, charset=LETTERS)})
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.side = int(self.np_random.integers(2))
        return {"position": np.zeros(2, np.float32), "note": NOTES[self.side]}, {}

    def step(self, action):
        return ({"position": np.zeros(2, np.float32), "note": NOTES[self.side]}, float(action == self.side), True,
                False, {})


class Doubled(gymnasium.RewardWrapper):
    """Rewards times ``factor`` (a wrapper with a keyword argument)."""

    def __init__(self, env: gymnasium.Env, factor: float = 2.0) -> None:
        super().__init__(env)
        self.factor = factor

    def reward(self, reward):
        return self.factor * reward


class TwoGoals(gymnasium.Env):
    """A one-step choice between two objectives, its reward a vector (declared as MO-Gymnasium does, by a
    ``reward_space``): action 0 pays ``(1, 0)``, action 1 ``(0, 1)``, action 2 ``(0.6, 0.6)``; all three are
    Pareto-optimal, and which one a weighted sum ``w·r`` prefers depends on the weights."""

    observation_space = gymnasium.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gymnasium.spaces.Discrete(3)
    reward_space = gymnasium.spaces.Box(0.0, 1.0, (2,), np.float32)
    PAYS = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.6]], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), self.PAYS[int(action)].copy(), True, False, {}


def register_envs() -> None:
    """The environments of this module, by their ids."""
    for name, entry_point in (("LamarckianNotes-v0", NoteEnv), ("LamarckianTwoGoals-v0", TwoGoals),
                              ("LamarckianUnmakeable-v0", Unmakeable), ("LamarckianNoReset-v0", NoReset),
                              ("LamarckianTwoAgents-v0", TwoAgents)):
        if name not in gymnasium.registry:
            gymnasium.register(name, entry_point=entry_point)


def failing_register() -> None:
    raise RuntimeError("no licence for this simulator")


class Unmakeable(gymnasium.Env):
    """An environment whose constructor fails (a simulator without its licence)."""

    def __init__(self):
        raise RuntimeError("no licence for this simulator")


class TwoAgents(TwoGoals):
    """Two agents' rewards as a tuple, and no ``reward_space``: not a vector reward, not a number."""

    reward_space = None

    def step(self, action):
        return np.zeros(2, np.float32), (0.0, 1.0), True, False, {}


class NoReset(TwoAgents):
    """Made, but its reset fails (a level file missing from its package)."""

    def reset(self, *, seed=None, options=None):
        raise FileNotFoundError("patterns/SimpleMaze.png")
