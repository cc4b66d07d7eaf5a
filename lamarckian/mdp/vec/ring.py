"""What Ant Sumo and Ant Battle share: ants in a ring on a physics batch, spawning, PD targets, HP, shaping terms.

Everything is torch on the task's device with fixed shapes (finished environments are reset through a mask), so a
step never waits for the host. Per ant the state is ``qpos (15,)`` = root position 3, quaternion 4, 8 hinge angles
and ``qvel (14,)`` = linear 3 and angular 3 velocity, 8 hinge velocities.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, Mapping

import torch

from .base import VecTask
from .physics import create_physics
from .scene import scene_xml

ROOT_Q, ROOT_V, JOINTS = 7, 6, 8  # free joint (qpos / qvel sizes), hinge joints per ant
OWN_STATE = ROOT_Q + ROOT_V + 2 * JOINTS  # 29: own root position, quaternion, velocities, scaled joints


#: ``mdp.vec.reward`` keys → the :class:`RingSettings` fields that weigh rewards (a float, or one per environment)
REFERENCE_SUBSTEPS = 2  # the constants below are per control step at 60 Hz (2 physics steps of 1/120 s)


@dataclasses.dataclass(frozen=True)
class RewardWeights:
    """The ring tasks' rewards (``mdp.vec.reward``; per control step at 60 Hz unless terminal). A weight is a float,
    or a ``(E, 1)`` tensor: one per environment (a vectorized population whose members search them)."""

    win: Any = 2000.0
    lose: Any = -2000.0
    draw: Any = -1000.0
    move: Any = 0.5                  # × speed toward the opponent (m/s)
    push: Any = 20.0                 # × the opponents' outward radial displacement this step (m)
    action_cost: Any = 0.005         # × sum of squared actions
    limit_cost: Any = 0.1            # × joints at the end of their range


REWARD_WEIGHTS = tuple(field.name for field in dataclasses.fields(RewardWeights))   # the names mdp.vec.reward sets


@dataclasses.dataclass(frozen=True)
class RingSettings:
    """Constants shared by the ring tasks (distances in m, rewards per control step unless terminal).

    Per-step constants (the time limit, HP lost per fallen step, speed and cost rewards, Ant Battle's shrink) are
    given for 60 Hz control; at another rate (``substeps``) the task scales them so that they mean the same per
    second of game time.
    """

    ring: float = 3.0
    kp: float = 85.0                 # position servo stiffness (N m/rad)
    kd: float = 2.0                  # position servo damping (N m s/rad)
    armature: float = 1.0            # rotor inertia added to every hinge (kg m²)
    damping: float = 1.0             # passive hinge damping (N m s/rad)
    timestep: float = 1 / 120
    substeps: int = 2                # physics steps per control step: 60 Hz control
    max_episode_length: int = 1000
    hp: float = 100.0
    fallen_height: float = 0.31      # torso below this: fallen, -1 HP per step
    spawn_radius: tuple[float, float] = (1.0, 1.5)
    spawn_yaw: float = 0.0           # each ant's heading deviates from facing the centre by up to this (radians)
    observe_time: bool = False       # append the share of the episode left (1 → 0) to every observation
    egocentric: bool = False         # append positions and velocities in each ant's own heading frame
    reward: RewardWeights = RewardWeights()
    backend: str = "mujoco"          # physics: mujoco (CPU) | mjx
    device: str = "cpu"              # torch device of every tensor (mjx: cpu or cuda)
    workers: int = 1                 # CPU stepping processes, this one included (mujoco backend)


class AntRing(VecTask):
    """``num_envs`` games of ``num_agents`` ants; subclasses judge a step (:meth:`_judge`) and observe
    (:meth:`_observe`)."""

    @classmethod
    @abc.abstractmethod
    def from_vec(cls, num_envs: int, common: dict[str, Any], vec: Mapping[str, Any], seed: int = 0) -> AntRing:
        """The task of the ``mdp.vec`` section ``vec`` with ``num_envs`` environments; ``common``: the
        :class:`RingSettings` fields every ring task takes (backend, device, workers, the rules)."""

    def __init__(self, num_envs: int, num_agents: int, settings: RingSettings, seed: int = 0) -> None:
        self.settings = s = settings
        self.num_envs, self.num_agents = num_envs, num_agents
        self.step_scale = s.substeps / REFERENCE_SUBSTEPS    # seconds per control step, in 60 Hz steps
        self.num_actions, self.max_episode_length = JOINTS, round(s.max_episode_length / self.step_scale)
        self.scene = scene_xml(num_agents, s.ring, s.kp, s.kd, s.timestep, armature=s.armature, damping=s.damping)
        self.physics = create_physics(s.backend, self.scene, num_envs, s.device, s.workers)
        self.device = device = self.physics.device
        model = self.physics.model
        hinges = [j for j in range(model.njnt) if model.jnt_type[j] != 0]
        ranges = torch.as_tensor(model.jnt_range[hinges[:JOINTS]], dtype=torch.float32, device=device)
        self.joint_lo, self.joint_hi = ranges[:, 0], ranges[:, 1]
        self.init_qpos = torch.as_tensor(model.qpos0, dtype=torch.float32, device=device)
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.hp = torch.full((num_envs, num_agents), s.hp, device=device)
        self.progress = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self.previous_radius = torch.zeros(num_envs, num_agents, device=device)
        self.dense_scale = 1.0           # multiplies the dense (shaping) rewards; a learner may anneal it to 0

    def set_reward_weights(self, weights: Mapping[str, torch.Tensor]) -> None:
        """Reward weights per environment: ``weights[name]`` ``(E,)`` for names of :class:`RewardWeights`
        (``win``, ``push``...), e.g. a vectorized population whose members search them."""
        for field, values in weights.items():
            if field not in REWARD_WEIGHTS:
                raise ValueError(f"{field!r} is not a reward weight of {type(self).__name__}")
            if tuple(values.shape) != (self.num_envs,):
                raise ValueError(f"{field}: expected one weight per environment ({self.num_envs},), "
                                 f"got {tuple(values.shape)}")
        per_env: dict[str, Any] = {field: values.to(self.device, torch.float32)[:, None]    # (E, 1) broadcasts
                                   for field, values in weights.items()}
        self.settings = dataclasses.replace(self.settings, reward=dataclasses.replace(self.settings.reward, **per_env))

    def ring_radius(self) -> torch.Tensor:
        """The ring's radius in each environment ``(E,)`` (m); Ant Battle's shrinks."""
        return torch.full((self.num_envs,), self.settings.ring, device=self.device)

    # ---- helpers --------------------------------------------------------------------------------------------
    def split(self, qpos: torch.Tensor, qvel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-ant views: ``(E, nq)``, ``(E, nv)`` → ``(E, A, 15)``, ``(E, A, 14)``."""
        return (qpos.reshape(self.num_envs, self.num_agents, ROOT_Q + JOINTS),
                qvel.reshape(self.num_envs, self.num_agents, ROOT_V + JOINTS))

    def own_state(self, qpos: torch.Tensor, qvel: torch.Tensor) -> torch.Tensor:
        """``(E, A, 29)``: root position, quaternion, linear and angular velocity, joints scaled to [-1, 1],
        joint velocities × 0.2."""
        return torch.cat([qpos[..., :ROOT_Q], qvel[..., :ROOT_V], self.scaled_joints(qpos),
                          0.2 * qvel[..., ROOT_V:]], dim=-1)

    def heading(self, qpos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cosine and sine of each ant's yaw (its torso's heading about the vertical) ``(E, A)`` each."""
        w, x, y, z = qpos[..., 3], qpos[..., 4], qpos[..., 5], qpos[..., 6]
        yaw = torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
        return torch.cos(yaw), torch.sin(yaw)

    @staticmethod
    def to_heading(vectors: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Horizontal ``vectors`` ``(E, A, ..., 2)`` in world axes turned into each ant's heading frame (x ahead,
        y to the left); ``cos``/``sin`` ``(E, A)`` from :meth:`heading`."""
        while cos.dim() < vectors.dim() - 1:
            cos, sin = cos[..., None], sin[..., None]
        x, y = vectors[..., 0], vectors[..., 1]
        return torch.stack([cos * x + sin * y, -sin * x + cos * y], dim=-1)

    def egocentric(self, qpos: torch.Tensor, qvel: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
        """``(E, A, 5 + 6 K)`` (``(E, A, 0)`` unless ``egocentric``): in each ant's heading frame its velocity (2)
        and the way to the ring's centre (2), its distance to the edge (1); per other ant (``others`` ``(E, A, K)``
        seat indices) the offset to it (2), its distance (1), its distance to the edge (1) and its velocity
        relative to one's own (2: is it giving way?) — all in m or m/s."""
        if not self.settings.egocentric:
            return qpos.new_zeros(*qpos.shape[:2], 0)
        cos, sin = self.heading(qpos)
        xy, ring = qpos[..., :2], self.ring_radius()[:, None]
        environments = torch.arange(self.num_envs, device=self.device)[:, None, None]
        other_xy = xy[environments, others]                                                  # (E, A, K, 2)
        offset = other_xy - xy[:, :, None]
        closing = qvel[..., :2][environments, others] - qvel[:, :, None, :2]
        columns = [self.to_heading(qvel[..., :2], cos, sin), self.to_heading(-xy, cos, sin),
                   (ring - xy.norm(dim=-1))[..., None]]
        per_other = torch.cat([self.to_heading(offset, cos, sin), offset.norm(dim=-1, keepdim=True),
                               ring[..., None, None] - other_xy.norm(dim=-1, keepdim=True),
                               self.to_heading(closing, cos, sin)], dim=-1)
        return torch.cat(columns + [per_other.flatten(2)], dim=-1)

    def scaled_joints(self, qpos: torch.Tensor) -> torch.Tensor:
        return 2 * (qpos[..., ROOT_Q:] - self.joint_lo) / (self.joint_hi - self.joint_lo) - 1

    def costs(self, actions: torch.Tensor, qpos: torch.Tensor) -> torch.Tensor:
        """Action and joint-limit costs ``(E, A)`` (positive numbers, subtracted from the reward)."""
        s = self.settings
        return self.step_scale * (s.reward.action_cost * actions.square().sum(-1)
                                  + s.reward.limit_cost * (self.scaled_joints(qpos).abs() > 0.99).float().sum(-1))

    def speed_toward(self, qpos: torch.Tensor, qvel: torch.Tensor, target_xy: torch.Tensor) -> torch.Tensor:
        """Each ant's horizontal speed toward ``target_xy`` ``(E, A, 2)``, in m/s ``(E, A)``."""
        direction = target_xy - qpos[..., :2]
        direction = direction / (direction.norm(dim=-1, keepdim=True) + 1e-8)
        return (qvel[..., :2] * direction).sum(-1)

    def fallen(self, qpos: torch.Tensor) -> torch.Tensor:
        """``(E, A)`` float: 1 where an ant's torso is below ``fallen_height`` (it loses HP)."""
        return (qpos[..., 2] < self.settings.fallen_height).float()

    def move_reward(self, qpos: torch.Tensor, qvel: torch.Tensor, target_xy: torch.Tensor) -> torch.Tensor:
        """``reward.move`` × the speed toward ``target_xy`` per control step (scaled to the control rate)."""
        return self.step_scale * self.settings.reward.move * self.speed_toward(qpos, qvel, target_xy)

    def _spawn(self) -> torch.Tensor:
        """Fresh ``qpos (E, nq)`` for every environment: ants evenly spaced around the centre at a random angle
        (opposite sides for two), radius uniform in ``spawn_radius``, facing the centre, joints mid-range."""
        s, count, agents = self.settings, self.num_envs, self.num_agents
        uniform = lambda *shape: torch.rand(*shape, generator=self.generator, device=self.device)  # noqa: E731
        theta = uniform(count, 1) * 2 * math.pi + torch.arange(agents, device=self.device) * (2 * math.pi / agents)
        lo, hi = s.spawn_radius
        radius = lo + (hi - lo) * uniform(count, agents)
        half_yaw = (theta + math.pi + s.spawn_yaw * (2 * uniform(count, agents) - 1)) / 2
        qpos = self.init_qpos.expand(count, -1).reshape(count, agents, ROOT_Q + JOINTS).clone()
        qpos[..., 0], qpos[..., 1], qpos[..., 2] = radius * torch.cos(theta), radius * torch.sin(theta), 0.75
        qpos[..., 3], qpos[..., 4], qpos[..., 5], qpos[..., 6] = torch.cos(half_yaw), 0.0, 0.0, torch.sin(half_yaw)
        qpos[..., ROOT_Q:] = (self.joint_lo + self.joint_hi) / 2
        return qpos.reshape(count, -1)

    def _restart(self, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """New episodes where ``mask (E,)``: physics state, HP, counters; returns the fresh per-ant state
        ``(E, A, 15)``, ``(E, A, 14)`` (rows outside the mask are the unused fresh draw)."""
        qpos = self._spawn()
        qvel = torch.zeros(self.num_envs, self.physics.model.nv, device=self.device)
        self.physics.set_state(mask, qpos, qvel)
        per_ant_qpos, per_ant_qvel = self.split(qpos, qvel)
        rows = mask[:, None]
        self.hp = torch.where(rows, torch.full_like(self.hp, self.settings.hp), self.hp)
        self.progress = torch.where(mask, torch.zeros_like(self.progress), self.progress)
        self.previous_radius = torch.where(rows, per_ant_qpos[..., :2].norm(dim=-1), self.previous_radius)
        self._restart_rules(mask)
        return per_ant_qpos, per_ant_qvel

    def _restart_rules(self, mask: torch.Tensor) -> None:
        """Subclass hook: reset rule state (alive flags, ranks) where ``mask``."""

    def time_left(self) -> torch.Tensor:
        """``(E, A, 1)``: the share of the episode left (1 at the start, 0 at the time limit), one column per ant
        when ``observe_time`` is set, else ``(E, A, 0)``."""
        columns = 1 if self.settings.observe_time else 0
        left = 1.0 - self.progress.float() / self.max_episode_length
        return left[:, None, None].expand(self.num_envs, self.num_agents, columns)

    # ---- the VecTask interface --------------------------------------------------------------------------------
    def reset(self) -> torch.Tensor:
        qpos, qvel = self._restart(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        return self._observe(qpos, qvel)

    def reset_idx(self, env_ids: torch.Tensor) -> None:
        mask = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        mask[torch.as_tensor(env_ids, dtype=torch.int64, device=self.device)] = True
        self._restart(mask)

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        agents, envs = self.num_agents, self.num_envs
        act = actions.to(self.device, torch.float32).clamp(-1.0, 1.0).reshape(agents, envs, JOINTS).transpose(0, 1)
        targets = self.joint_lo + (act + 1) / 2 * (self.joint_hi - self.joint_lo)          # (E, A, 8)
        self.physics.step(targets.reshape(envs, -1), self.settings.substeps)
        qpos, qvel = self.split(*self.physics.state())
        self.progress = self.progress + 1
        rewards, done, extras = self._judge(qpos, qvel, act)
        # on a GPU the restart is masked (reading ``done`` would synchronize); on the CPU it is skipped when no
        # game ended (a free check there, and a fifth of a CPU step)
        if self.device.type != "cpu" or bool(done.any()):
            fresh_qpos, fresh_qvel = self._restart(done)
            rows = done[:, None, None]
            qpos, qvel = torch.where(rows, fresh_qpos, qpos), torch.where(rows, fresh_qvel, qvel)
        return self._observe(qpos, qvel), rewards.transpose(0, 1).reshape(-1), done, extras

    def _judge(self, qpos: torch.Tensor, qvel: torch.Tensor, actions: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Rules of one control step: rewards ``(E, A)``, done ``(E,)``, extras (each ``(E,)`` or ``(E, A)``)."""
        raise NotImplementedError

    def _observe(self, qpos: torch.Tensor, qvel: torch.Tensor) -> torch.Tensor:
        """Observations ``(A * E, num_obs)``, agent-major."""
        raise NotImplementedError

    def seed(self, seed: int) -> None:
        self.generator.manual_seed(seed)

    def close(self) -> None:
        self.physics.close()
