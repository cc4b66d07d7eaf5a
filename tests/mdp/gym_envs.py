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


def register_envs() -> None:
    """``LamarckianNotes-v0``."""
    if "LamarckianNotes-v0" not in gymnasium.registry:
        gymnasium.register("LamarckianNotes-v0", entry_point=NoteEnv)


def failing_register() -> None:
    raise RuntimeError("no licence for this simulator")
