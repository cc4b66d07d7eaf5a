"""Per-lane trajectory buffers cut into fixed-length segments ``[T, L]`` for the learner."""

from __future__ import annotations

from typing import Any

import numpy as np


class Lane:
    """One learner seat's continuous stream of steps (episodes follow each other in the same lane).

    A step is recorded in two halves: ``decide`` (observation, action, log-probability, value, weight
    version) and ``outcome`` (reward, episode end). ``final_value`` is the value of the last observation of an
    episode cut by a time limit (to bootstrap from), 0 otherwise.
    """

    def __init__(self) -> None:
        self.observations: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        self.log_probs: list[float] = []
        self.values: list[float] = []
        self.versions: list[int] = []
        self.rewards: list[float] = []
        self.dones: list[bool] = []
        self.truncated: list[bool] = []
        self.final_values: list[float] = []

    def decide(self, observation: np.ndarray, action: np.ndarray, log_prob: float, value: float, version: int) -> None:
        self.observations.append(observation)
        self.actions.append(action)
        self.log_probs.append(log_prob)
        self.values.append(value)
        self.versions.append(version)

    def outcome(self, reward: float, done: bool, truncated: bool) -> None:
        self.rewards.append(reward)
        self.dones.append(done)
        self.truncated.append(truncated)
        self.final_values.append(0.0)

    def set_final_value(self, value: float) -> None:
        self.final_values[-1] = value

    def ready(self, length: int) -> bool:
        """``length`` complete steps and the value of the observation after them."""
        return len(self.rewards) >= length and len(self.values) > length

    def take(self, length: int) -> dict[str, Any]:
        """The first ``length`` steps (plus the bootstrap value); they leave the lane."""
        part = {
            "observations": np.stack(self.observations[:length]),
            "actions": np.stack(self.actions[:length]),
            "log_probs": np.asarray(self.log_probs[:length], np.float32),
            "values": np.asarray(self.values[:length + 1], np.float32),
            "rewards": np.asarray(self.rewards[:length], np.float32),
            "dones": np.asarray(self.dones[:length], np.bool_),
            "truncated": np.asarray(self.truncated[:length], np.bool_),
            "final_values": np.asarray(self.final_values[:length], np.float32),
            "version": min(self.versions[:length]),
        }
        for name in ("observations", "actions", "log_probs", "values", "versions", "rewards", "dones", "truncated",
                     "final_values"):
            del getattr(self, name)[:length]
        return part


def stack_lanes(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Lane parts ``[T]`` side by side as one segment ``[T, L]``; ``version`` is the oldest."""
    segment = {name: np.stack([p[name] for p in parts], axis=1) for name in parts[0] if name != "version"}
    segment["version"] = min(p["version"] for p in parts)
    return segment
