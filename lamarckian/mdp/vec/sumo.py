"""Ant Sumo (after TimeChamber): two ants in a ring; leaving it or losing all HP loses, 1,000 control steps is a
draw. Runs on the CPU ``mujoco`` backend (:class:`MuJoCoBatch`); every constant is a field of :class:`SumoSettings`.

Per agent and control step (60 Hz: 2 physics steps of 1/120 s), the 40-dim observation is: own root position
(3), orientation quaternion (4), linear (3) and angular (3) velocity; joint positions scaled to [-1, 1] by their
ranges (8) and joint velocities × 0.2 (8); the opponent's position (3) and orientation (4); the opponent's xy
relative to own (2); own and opponent's fallen flags (2).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from .base import VecTask
from .physics import MuJoCoBatch
from .scene import scene_xml

ROOT_Q, ROOT_V, JOINTS = 7, 6, 8  # free joint (qpos / qvel sizes), hinge joints per ant


@dataclasses.dataclass(frozen=True)
class SumoSettings:
    """Constants of the task (distances in m, angles in rad, rewards per control step unless terminal)."""

    ring: float = 3.0
    kp: float = 85.0
    kd: float = 2.0
    timestep: float = 1 / 120
    substeps: int = 2                # physics steps per control step: 60 Hz control
    max_episode_length: int = 1000
    hp: float = 100.0
    fallen_height: float = 0.31      # torso below this: fallen, -1 HP per step
    spawn_radius: tuple[float, float] = (1.0, 1.5)
    win_reward: float = 2000.0
    lose_reward: float = -2000.0
    draw_reward: float = -1000.0
    move_weight: float = 0.5         # × speed toward the opponent (m/s)
    push_weight: float = 20.0        # × the opponent's outward radial displacement this step (m)
    action_cost: float = 0.005       # × sum of squared actions
    limit_cost: float = 0.1          # × joints at the end of their range
    threads: int = 1


class AntSumo(VecTask):
    """``num_envs`` two-ant sumo bouts on the CPU MuJoCo backend; tensors on ``device`` (CPU)."""

    num_agents = 2

    def __init__(self, num_envs: int, settings: SumoSettings | None = None, seed: int = 0,
                 device: str = "cpu") -> None:
        self.settings = s = settings or SumoSettings()
        self.num_envs, self.device = num_envs, torch.device(device)
        self.num_obs, self.num_actions, self.max_episode_length = 40, JOINTS, s.max_episode_length
        self.physics = MuJoCoBatch(scene_xml(self.num_agents, s.ring, s.kp, s.kd, s.timestep), num_envs, s.threads)
        model = self.physics.model
        ranges = model.jnt_range[[j for j in range(model.njnt) if model.jnt_type[j] != 0]]  # hinge joints
        self.joint_lo, self.joint_hi = ranges[:JOINTS, 0].copy(), ranges[:JOINTS, 1].copy()
        self.random = np.random.default_rng(seed)
        self.hp = np.full((num_envs, self.num_agents), s.hp)
        self.progress = np.zeros(num_envs, dtype=np.int64)
        self.init_qpos = self.physics.qpos[0].copy()
        self.previous_radius = np.zeros((num_envs, self.num_agents))

    # ---- state views ---------------------------------------------------------------------------------------
    def _split(self) -> tuple[np.ndarray, np.ndarray]:
        """qpos ``(E, A, 15)`` and qvel ``(E, A, 14)`` per ant."""
        qpos, qvel = self.physics.qpos, self.physics.qvel
        return (qpos.reshape(self.num_envs, self.num_agents, ROOT_Q + JOINTS),
                qvel.reshape(self.num_envs, self.num_agents, ROOT_V + JOINTS))

    def _observe(self, qpos: np.ndarray, qvel: np.ndarray) -> torch.Tensor:
        s = self.settings
        fallen = (qpos[..., 2] < s.fallen_height).astype(np.float64)
        scaled = 2 * (qpos[..., ROOT_Q:] - self.joint_lo) / (self.joint_hi - self.joint_lo) - 1
        rows = []
        for agent in range(self.num_agents):
            other = 1 - agent
            rows.append(np.concatenate([
                qpos[:, agent, :ROOT_Q], qvel[:, agent, :ROOT_V], scaled[:, agent], 0.2 * qvel[:, agent, ROOT_V:],
                qpos[:, other, :ROOT_Q], qpos[:, other, :2] - qpos[:, agent, :2],
                fallen[:, agent, None], fallen[:, other, None]], axis=1))
        return torch.as_tensor(np.concatenate(rows), dtype=torch.float32, device=self.device)

    # ---- episodes ------------------------------------------------------------------------------------------
    def reset(self) -> torch.Tensor:
        self.reset_idx(torch.arange(self.num_envs))
        return self._observe(*self._split())

    def reset_idx(self, env_ids: torch.Tensor) -> None:
        """Random spawn on opposite sides of the centre, facing each other; full HP; step counter 0."""
        ids = np.asarray(env_ids.cpu() if isinstance(env_ids, torch.Tensor) else env_ids, dtype=np.int64)
        if ids.size == 0:
            return
        s = self.settings
        qpos = np.tile(self.init_qpos, (ids.size, 1)).reshape(ids.size, self.num_agents, ROOT_Q + JOINTS)
        angle = self.random.uniform(0, 2 * math.pi, ids.size)
        for agent in range(self.num_agents):
            theta = angle + math.pi * agent
            radius = self.random.uniform(*s.spawn_radius, ids.size)
            yaw = theta + math.pi
            qpos[:, agent, 0], qpos[:, agent, 1] = radius * np.cos(theta), radius * np.sin(theta)
            qpos[:, agent, 2] = 0.75
            qpos[:, agent, 3:7] = np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], axis=1)
            qpos[:, agent, ROOT_Q:] = (self.joint_lo + self.joint_hi) / 2
        self.physics.set_state(ids, qpos.reshape(ids.size, -1), np.zeros((ids.size, self.physics.model.nv)))
        self.hp[ids] = s.hp
        self.progress[ids] = 0
        self.previous_radius[ids] = np.linalg.norm(qpos[:, :, :2], axis=-1)

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        s = self.settings
        act = actions.detach().cpu().numpy().astype(np.float64).reshape(self.num_agents, self.num_envs, JOINTS)
        act = np.clip(act, -1.0, 1.0)
        targets = self.joint_lo + (act + 1) / 2 * (self.joint_hi - self.joint_lo)   # (A, E, 8)
        self.physics.step(targets.transpose(1, 0, 2).reshape(self.num_envs, -1), s.substeps)
        qpos, qvel = self._split()
        self.progress += 1
        fallen = qpos[..., 2] < s.fallen_height
        self.hp -= fallen
        radius = np.linalg.norm(qpos[..., :2], axis=-1)                              # (E, A)
        out = (radius > s.ring) | (self.hp <= 0)
        lose0, lose1 = out[:, 0] & ~out[:, 1], out[:, 1] & ~out[:, 0]
        time_out = (self.progress >= s.max_episode_length) & ~lose0 & ~lose1
        draw = (out[:, 0] & out[:, 1]) | time_out
        done = lose0 | lose1 | draw
        rewards = self._shaping(qpos, qvel, act, radius)
        terminal = np.stack([np.where(lose1, s.win_reward, 0) + np.where(lose0, s.lose_reward, 0),
                             np.where(lose0, s.win_reward, 0) + np.where(lose1, s.lose_reward, 0)], axis=1)
        rewards = rewards + terminal + np.where(draw, s.draw_reward, 0.0)[:, None]
        self.previous_radius = radius
        finished = np.flatnonzero(done)
        self.reset_idx(finished)
        observations = self._observe(*self._split()) if finished.size else self._observe(qpos, qvel)
        as_bool = lambda x: torch.as_tensor(x, dtype=torch.bool, device=self.device)  # noqa: E731
        extras = {"win": as_bool(lose1), "lose": as_bool(lose0), "draw": as_bool(draw), "time_outs": as_bool(time_out)}
        reward = torch.as_tensor(rewards.T.reshape(-1), dtype=torch.float32, device=self.device)
        return observations, reward, as_bool(done), extras

    def _shaping(self, qpos: np.ndarray, qvel: np.ndarray, act: np.ndarray, radius: np.ndarray) -> np.ndarray:
        """Dense rewards ``(E, A)``: speed toward the opponent, pushing it outward, action and joint-limit costs."""
        s = self.settings
        rewards = np.zeros((self.num_envs, self.num_agents))
        scaled = 2 * (qpos[..., ROOT_Q:] - self.joint_lo) / (self.joint_hi - self.joint_lo) - 1
        for agent in range(self.num_agents):
            other = 1 - agent
            direction = qpos[:, other, :2] - qpos[:, agent, :2]
            direction /= np.linalg.norm(direction, axis=1, keepdims=True) + 1e-8
            toward = np.sum(qvel[:, agent, :2] * direction, axis=1)
            pushed = radius[:, other] - self.previous_radius[:, other]
            rewards[:, agent] = (s.move_weight * toward + s.push_weight * pushed
                                 - s.action_cost * np.sum(act[agent] ** 2, axis=1)
                                 - s.limit_cost * np.sum(np.abs(scaled[:, agent]) > 0.99, axis=1))
        return rewards

    def close(self) -> None:
        self.physics.close()
