"""Ant Battle (after TimeChamber): N ≥ 2 ants in a ring that shrinks every control step; an ant leaving the ring or
losing all HP is out. Ranks follow the elimination order (the last ant standing is 1st; ants out on the same step
share a rank), rewards follow the ranks.

Observation per agent (``32 + 10 (N - 1)``): own state (29: see :meth:`AntRing.own_state`), own fallen flag, the
ring's radius and own distance to its edge (m); then for each other ant, in seat order starting after one's own:
its position (3), quaternion (4), xy relative to own (2) and an alive flag (1); with ``observe_time`` the share of
the episode left (1); with ``egocentric`` 5 + 6 (N - 1) more in the ant's own heading frame
(:meth:`AntRing.egocentric`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import torch

from .ring import OWN_STATE, ROOT_Q, AntRing, RingSettings


@dataclasses.dataclass(frozen=True)
class BattleSettings(RingSettings):
    """Ant Battle's constants beyond :class:`RingSettings`: ``ring`` is the starting radius (m)."""

    ring: float = 4.0
    ants: int = 4
    shrink: float = 0.003            # m of radius lost per control step
    min_ring: float = 1.0            # the ring stops shrinking here (m)
    spawn_radius: tuple[float, float] = (1.5, 2.5)
    play_to_end: bool = False        # False: a game ends when agent 0 is out (training); True: until one is left


class AntBattle(AntRing):
    """``num_envs`` games of ``settings.ants`` ants.

    Extras: ``win`` (agent 0 the last one standing), ``draw`` (agent 0 shares first place: among several
    survivors at the time limit, or out on the same step as the last others), ``lose``, ``time_outs`` — each
    ``(E,)`` and meaningful where ``done``; ``ranks`` ``(E, A)`` (1 = best) of the games that just ended. When a
    game ends at agent 0's elimination (``play_to_end`` false) the ants still standing share rank 1.
    """

    settings: BattleSettings

    def __init__(self, num_envs: int, settings: BattleSettings | None = None, seed: int = 0) -> None:
        settings = settings or BattleSettings()
        if settings.ants < 2:
            raise ValueError(f"mdp.vec.ants={settings.ants}: Ant Battle needs at least 2 ants")
        super().__init__(num_envs, settings.ants, settings, seed)
        agents = self.num_agents
        self.num_obs = (OWN_STATE + 3 + 10 * (agents - 1) + int(settings.observe_time)
                        + (5 + 6 * (agents - 1)) * int(settings.egocentric))
        seats = torch.arange(agents, device=self.device)
        self.others = (seats[:, None] + torch.arange(1, agents, device=self.device)) % agents     # (A, A - 1)
        self.alive = torch.ones(num_envs, agents, dtype=torch.bool, device=self.device)
        self.ranks = torch.ones(num_envs, agents, dtype=torch.int64, device=self.device)

    @classmethod
    def from_vec(cls, num_envs: int, common: dict[str, Any], vec: Mapping[str, Any], seed: int = 0) -> AntBattle:
        """The task of ``mdp.vec``: ``common`` :class:`BattleSettings` fields, ``mdp.vec.ants`` and
        ``mdp.vec.play_to_end``."""
        return cls(num_envs, BattleSettings(ants=int(vec["ants"]), play_to_end=bool(vec["play_to_end"]), **common),
                   seed=seed)

    def ring_radius(self) -> torch.Tensor:
        """The ring's radius in each environment ``(E,)`` after ``progress`` steps (m)."""
        s = self.settings
        return (s.ring - s.shrink * self.step_scale * self.progress.float()).clamp(min=s.min_ring)

    def _restart_rules(self, mask: torch.Tensor) -> None:
        self.alive = self.alive | mask[:, None]
        self.ranks = torch.where(mask[:, None], torch.ones_like(self.ranks), self.ranks)

    def rank_reward(self, rank: torch.Tensor) -> torch.Tensor:
        """Terminal reward of a (sole) rank: ``reward.win`` for 1st down to ``reward.lose`` for last, linearly."""
        s = self.settings
        return s.reward.win + (s.reward.lose - s.reward.win) * (rank.float() - 1) / (self.num_agents - 1)

    def _observe(self, qpos: torch.Tensor, qvel: torch.Tensor) -> torch.Tensor:
        ring = self.ring_radius()[:, None].expand(-1, self.num_agents)
        fallen = self.fallen(qpos)
        others = qpos[:, self.others]                                                    # (E, A, A-1, 15)
        alive = self.alive[:, self.others].float()
        other_rows = torch.cat([others[..., :ROOT_Q], others[..., :2] - qpos[:, :, None, :2], alive[..., None]], -1)
        rows = torch.cat([self.own_state(qpos, qvel), fallen[..., None], ring[..., None],
                          (ring - qpos[..., :2].norm(dim=-1))[..., None], other_rows.flatten(2), self.time_left(),
                          self.egocentric(qpos, qvel, self.others.expand(self.num_envs, -1, -1))], dim=-1)
        return rows.transpose(0, 1).reshape(self.num_agents * self.num_envs, self.num_obs)

    def _judge(self, qpos: torch.Tensor, qvel: torch.Tensor, actions: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        s, alive = self.settings, self.alive
        self.hp = self.hp - self.step_scale * self.fallen(qpos) * alive.float()
        radius = qpos[..., :2].norm(dim=-1)                                                  # (E, A)
        out_now = alive & ((radius > self.ring_radius()[:, None]) | (self.hp <= 0))
        standing = alive & ~out_now
        left = standing.sum(1)                                                               # (E,)
        time_out = self.progress >= self.max_episode_length
        done = (left <= 1) | time_out | (out_now[:, 0] & (not s.play_to_end))
        # ranks: out now with others left → (ants left) + 1; the last ones out together share 1st; survivors 1st
        self.ranks = torch.where(out_now, torch.where(left[:, None] > 0, left[:, None] + 1, 1), self.ranks)
        self.ranks = torch.where(done[:, None] & standing, torch.ones_like(self.ranks), self.ranks)
        shared_first = ((left == 0)[:, None] & out_now) | ((left >= 2) & done)[:, None] & standing
        sole_winner = ((left == 1) & done)[:, None] & standing
        terminal = torch.where(out_now & (left[:, None] > 0), self.rank_reward(self.ranks), 0.0)
        terminal = terminal + s.reward.win * sole_winner.float() + s.reward.draw * shared_first.float()
        rewards = torch.where(alive, self._shaping(qpos, qvel, actions, radius, alive), 0.0) + terminal
        self.previous_radius = radius
        self.alive = standing
        extras = {"win": done & sole_winner[:, 0], "draw": done & shared_first[:, 0],
                  "time_outs": time_out & (left >= 2), "ranks": self.ranks.clone()}
        extras["lose"] = done & ~extras["win"] & ~extras["draw"]
        return rewards, done, extras

    def _shaping(self, qpos: torch.Tensor, qvel: torch.Tensor, actions: torch.Tensor, radius: torch.Tensor,
                 alive: torch.Tensor) -> torch.Tensor:
        """Dense rewards ``(E, A)``: speed toward the nearest ant still in, the others' outward displacement
        (summed over those still in), action and joint-limit costs."""
        s = self.settings
        xy = qpos[..., :2]
        distance = (xy[:, :, None] - xy[:, None]).norm(dim=-1)                                # (E, A, A)
        eye = torch.eye(self.num_agents, dtype=torch.bool, device=self.device)
        distance = distance.masked_fill(eye | ~alive[:, None, :], float("inf"))
        nearest = distance.argmin(-1)                                                        # (E, A)
        target = torch.gather(xy, 1, nearest[..., None].expand(-1, -1, 2))
        moved = (radius - self.previous_radius) * alive.float()                              # (E, A)
        pushed = moved.sum(1, keepdim=True) - moved
        return self.dense_scale * (self.move_reward(qpos, qvel, target) + s.reward.push * pushed
                                   - self.costs(actions, qpos))
