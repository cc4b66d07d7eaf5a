"""The VecTask contract (the shape of Isaac Gym / TimeChamber tasks): many environments of one game stepped in
one call, torch tensors on the task's device.

Agents are agent-major: rows ``[a * num_envs, (a + 1) * num_envs)`` belong to agent ``a`` (all of agent 0's
environments, then agent 1's, ...).
"""

from __future__ import annotations

import abc
from typing import Mapping

import torch


class VecTask(abc.ABC):
    """``num_envs`` environments of a ``num_agents``-player game.

    Attributes:
        num_envs, num_agents, num_obs, num_actions: sizes; ``max_episode_length``: control steps to a draw;
        device: where every returned tensor lives; dense_scale: multiplies the dense (shaping) rewards (a learner
        anneals it to 0 under ``mdp.vec.reward.anneal``; only tasks with shaping rewards have it).
    """

    num_envs: int
    num_agents: int
    num_obs: int
    num_actions: int
    max_episode_length: int
    device: torch.device
    dense_scale: float

    @abc.abstractmethod
    def reset(self) -> torch.Tensor:
        """Reset every environment; observations ``(num_agents * num_envs, num_obs)``."""

    @abc.abstractmethod
    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Advance one control step with ``actions`` ``(num_agents * num_envs, num_actions)`` in [-1, 1].

        Returns ``obs`` ``(num_agents * num_envs, num_obs)``, ``reward`` ``(num_agents * num_envs,)``, ``done``
        ``(num_envs,)`` and ``extras`` with ``win``, ``lose``, ``draw`` (agent 0's outcome) and ``time_outs``, each
        ``(num_envs,)`` bool, and for games of more than two players ``ranks`` ``(num_envs, num_agents)`` (1 = best)
        of the games that just ended. Finished environments are reset before returning: their rows of ``obs``
        start the next episode."""

    @abc.abstractmethod
    def reset_idx(self, env_ids: torch.Tensor) -> None:
        """Start new episodes in the environments ``env_ids`` (int64 indices)."""

    def seed(self, seed: int) -> None:
        """Restart the task's own random stream (spawn positions) at ``seed``: an evaluation that reseeds before
        its games replays the same spawns every time. Tasks without a stream of their own raise."""
        raise NotImplementedError(f"{type(self).__name__} cannot be reseeded")

    def set_reward_weights(self, weights: Mapping[str, torch.Tensor]) -> None:
        """Reward weights per environment, ``weights[field]`` ``(E,)`` (a vectorized population searching them);
        tasks without reward weights raise."""
        raise ValueError(f"{type(self).__name__} has no reward weights to set ({', '.join(weights)})")

    def close(self) -> None:
        """Release the physics (worker processes, compiled steps, a server connection)."""
