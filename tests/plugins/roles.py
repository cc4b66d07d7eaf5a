"""A small asymmetric game of a user's own: seats of two kinds with different observation and action spaces, for the
tests of a policy per role (``rl.policies``)."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from lamarckian.mdp.base import PlayerSpec
from lamarckian.mdp.simultaneous import SimultaneousMDP

SPEAKER_MARK, LISTENER_MARK = 1.0, -1.0    # the first entry of each kind's observation


class Signal(SimultaneousMDP):
    """A speaker sees a target (one of two) and sends a signal (0 or 1); each listener sees the signal of the step
    before and guesses the target among three choices. Every step a listener's guess is right, it earns 1 and the
    speaker the listeners' mean. ``rounds`` steps per episode.

    Seats: ``speaker_0`` (observation ``[1, one-hot target]``, 3 values; 2 actions), ``listener_0`` … (observation
    ``[-1, last signal]``, 2 values; 3 actions).
    """

    def __init__(self, listeners: int = 2, rounds: int = 4, seed: int | None = None) -> None:
        self.listeners, self.rounds = listeners, rounds
        self.random = np.random.default_rng(seed)
        speaker = PlayerSpec(gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32), gymnasium.spaces.Discrete(2))
        listener = PlayerSpec(gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32), gymnasium.spaces.Discrete(3))
        self.specs = [speaker] + [listener] * listeners
        self.target = self.signal = self.step_count = 0
        self.totals = [0.0] * len(self.specs)

    def describe(self) -> list[PlayerSpec]:
        return self.specs

    def seat_names(self) -> list[str]:
        return ["speaker_0"] + [f"listener_{i}" for i in range(self.listeners)]

    def start(self, seed: int | None) -> None:
        if seed is not None:
            self.random = np.random.default_rng(seed)
        self.target, self.signal, self.step_count = int(self.random.integers(2)), 0, 0
        self.totals = [0.0] * len(self.specs)
        self.over = self.timed_out = False

    def observe(self, player: int) -> np.ndarray:
        if player == 0:
            return np.array([SPEAKER_MARK, self.target == 0, self.target == 1], np.float32)
        return np.array([LISTENER_MARK, self.signal], np.float32)

    def step(self, actions: list[Any]) -> list[float]:
        right = [float(int(guess) == self.target) if self.step_count else 0.0 for guess in actions[1:]]
        rewards = [float(np.mean(right))] + right
        self.signal = int(actions[0])
        self.step_count += 1
        self.totals = [total + reward for total, reward in zip(self.totals, rewards)]
        self.over = self.step_count >= self.rounds
        return rewards

    def rule(self, player: int) -> int:
        return int(self.random.integers(self.specs[player].action.n))

    def result(self, player: int) -> dict[str, Any]:
        return {"fitness": self.totals[player], "win": None, "objectives": {}}


def one_for_all(name: str, seat: int) -> str:
    """A mapping of a user's own that puts every seat under one policy, ``all``."""
    return "all"


class Unnamed(Signal):
    """:class:`Signal` with the default seat names (``player_0`` …): they say nothing of the seats' kinds."""

    def seat_names(self) -> list[str]:
        return SimultaneousMDP.seat_names(self)
