"""Ant Sumo (after TimeChamber): two ants in a ring; leaving it or losing all HP loses, 1,000 control steps is a
draw. Every constant is a field of :class:`SumoSettings` (docs/tasks.md lists them).

Per agent and control step (60 Hz: 2 physics steps of 1/120 s), the 40-dim observation is: own root position
(3), orientation quaternion (4), linear (3) and angular (3) velocity; joint positions scaled to [-1, 1] by their
ranges (8) and joint velocities × 0.2 (8); the opponent's position (3) and orientation (4); the opponent's xy
relative to own (2); own and opponent's fallen flags (2); with ``observe_time`` the share of the episode left (1);
with ``egocentric`` 11 more in the ant's own heading frame (see :meth:`AntRing.egocentric`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import torch

from .ring import ROOT_Q, AntRing, RingSettings


@dataclasses.dataclass(frozen=True)
class SumoSettings(RingSettings):
    """Ant Sumo's constants: those of :class:`RingSettings` (a fixed 3 m ring)."""


class AntSumo(AntRing):
    """``num_envs`` two-ant sumo bouts; extras ``win``/``lose``/``draw`` are agent 0's outcome."""

    def __init__(self, num_envs: int, settings: SumoSettings | None = None, seed: int = 0) -> None:
        super().__init__(num_envs, 2, settings or SumoSettings(), seed)
        self.num_obs = 40 + int(self.settings.observe_time) + 11 * int(self.settings.egocentric)
        self.opponents = torch.tensor([[1], [0]], device=self.device).expand(num_envs, 2, 1)

    @classmethod
    def from_vec(cls, num_envs: int, common: dict[str, Any], vec: Mapping[str, Any], seed: int = 0) -> AntSumo:
        """The task of ``mdp.vec``: ``common`` :class:`SumoSettings` fields (backend, device, the ring's rules)."""
        return cls(num_envs, SumoSettings(**common), seed=seed)

    def _observe(self, qpos: torch.Tensor, qvel: torch.Tensor) -> torch.Tensor:
        fallen = self.fallen(qpos)[..., None]
        other = qpos.flip(1)                      # agent a's opponent is 1 - a
        rows = torch.cat([self.own_state(qpos, qvel), other[..., :ROOT_Q], other[..., :2] - qpos[..., :2],
                          fallen, fallen.flip(1), self.time_left(), self.egocentric(qpos, qvel, self.opponents)],
                         dim=-1)
        return rows.transpose(0, 1).reshape(self.num_agents * self.num_envs, self.num_obs)

    def _judge(self, qpos: torch.Tensor, qvel: torch.Tensor, actions: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        s = self.settings
        self.hp = self.hp - self.step_scale * self.fallen(qpos)
        radius = qpos[..., :2].norm(dim=-1)                                         # (E, 2)
        out = (radius > s.ring) | (self.hp <= 0)
        lose0, lose1 = out[:, 0] & ~out[:, 1], out[:, 1] & ~out[:, 0]
        time_out = (self.progress >= self.max_episode_length) & ~lose0 & ~lose1
        draw = (out[:, 0] & out[:, 1]) | time_out
        done = lose0 | lose1 | draw
        pushed = (radius - self.previous_radius).flip(1)                           # the opponent's outward move
        rewards = self.dense_scale * (self.move_reward(qpos, qvel, qpos.flip(1)[..., :2]) + s.reward.push * pushed
                                      - self.costs(actions, qpos))
        lost = torch.stack([lose0, lose1], dim=1).float()
        rewards = (rewards + s.reward.win * lost.flip(1) + s.reward.lose * lost
                   + s.reward.draw * draw.float()[:, None])
        self.previous_radius = radius
        return rewards, done, {"win": lose1, "lose": lose0, "draw": draw, "time_outs": time_out}
