"""A gymnasium environment that hitches, for ``bench/stragglers.py``: every ``every``-th step of each instance (from a
random phase, so instances do not hitch together) blocks for ``seconds`` before stepping, as a garbage-collector
pause, an asset load or a frame spike would. The gymnasium counterpart of the reference game server's
``--spike-every N --spike SECONDS``.

    python train.py -c mdp/gym.yml mdp/gym/cartpole.yml -m mdp.gym.id=bench.hitching:Hitching-v0 \\
        "mdp.gym.kwargs={env: CartPole-v1, every: 2000, seconds: 1.5}"
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium
import numpy as np


class Hitching(gymnasium.Wrapper):
    """``env`` (a gymnasium id) whose every ``every``-th step takes ``seconds`` longer (``every`` 0: never)."""

    def __init__(self, env: str = "CartPole-v1", every: int = 0, seconds: float = 0.0) -> None:
        super().__init__(gymnasium.make(env))
        if every < 0 or seconds < 0:
            raise ValueError(f"Hitching: every={every} and seconds={seconds} must be >= 0")
        self.every, self.seconds = every, seconds
        self.countdown = int(np.random.default_rng().integers(1, every + 1)) if every else 0
        self.hitches = 0

    def step(self, action: Any) -> Any:
        if self.every:
            self.countdown -= 1
            if self.countdown == 0:
                self.countdown = self.every
                self.hitches += 1
                time.sleep(self.seconds)
        return self.env.step(action)


gymnasium.register("Hitching-v0", entry_point=Hitching)
