"""Helpers of the vectorized-task tests: read and edit one ant's state in one environment."""

from __future__ import annotations

import torch

from lamarckian.mdp.vec import AntRing


def ants(task: AntRing) -> torch.Tensor:
    """The physics positions per ant ``(E, A, 15)`` (a copy)."""
    return task.physics.state()[0].clone().reshape(task.num_envs, task.num_agents, 15)


def place(task: AntRing, env: int, agent: int, x: float, y: float, z: float | None = None) -> None:
    """Move ``agent`` of ``env`` to (x, y[, z]) at rest; its previous radius follows (no push reward)."""
    qpos, qvel = (t.clone() for t in task.physics.state())
    base = agent * 15
    qpos[env, base:base + 2] = torch.tensor([x, y])
    if z is not None:
        qpos[env, base + 2] = z
    qvel[env] = 0
    mask = torch.zeros(task.num_envs, dtype=torch.bool)
    mask[env] = True
    task.physics.set_state(mask, qpos, qvel)
    task.previous_radius[env] = qpos[env].reshape(task.num_agents, 15)[:, :2].norm(dim=-1)


def still(task: AntRing) -> torch.Tensor:
    """Neutral actions for every agent row ``(A * E, 8)``."""
    return torch.zeros(task.num_agents * task.num_envs, task.num_actions)
