"""What the vectorized learners share about the other seats of their games: per environment, which stacked
opponent plays them and whether with its mean actions, both redrawn on the device when the environment's game
ends; the games' outcomes as rows to count; and a lone learner's opponents (:class:`PoolOpponents`)."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import torch

from ...mdp.vec import VecTask
from ...model import ActorCritic
from ...model.stacked import StackedPolicies
from ..selfplay.pool import OpponentPool


def outcome_rows(extras: Mapping[str, torch.Tensor], device: torch.device) -> torch.Tensor:
    """``(E, 3)`` float on ``device``: agent 0's win, draw and loss flags of each environment's step."""
    return torch.stack([extras["win"], extras["draw"], extras["lose"]], dim=1).to(device).float()


class OpponentDraws:
    """A vectorized learner's opponents, one per environment: ``opponent`` ``(E,)`` (a stacked policy's index) and
    ``opponent_mean`` ``(E,)`` bool. A subclass says how an opponent is drawn (:meth:`_draw`).

    Args:
        task: the task (its environments, its device).
        generator: the learner's device stream (draws, actions).
        mean_share: ``rl.opponent.deterministic``, the chance that an opponent plays its mean actions.
    """

    opponent: torch.Tensor
    opponent_mean: torch.Tensor

    def __init__(self, task: VecTask, generator: torch.Generator, mean_share: float) -> None:
        self.task, self.generator, self.device, self.mean_share = task, generator, task.device, mean_share

    def _draw(self) -> torch.Tensor:
        """A stacked opponent per environment ``(E,)``, sampled on the device."""
        raise NotImplementedError

    def _draw_mean(self) -> torch.Tensor:
        """Per environment ``(E,)``: whether its opponent plays mean actions (probability ``mean_share``)."""
        return torch.rand(self.task.num_envs, generator=self.generator, device=self.device) < self.mean_share

    def redraw_finished(self, done: torch.Tensor) -> None:
        """New opponents (and mean-action draws) for the environments whose game ended (``done (E,)``)."""
        self.opponent = torch.where(done, self._draw(), self.opponent)
        self.opponent_mean = torch.where(done, self._draw_mean(), self.opponent_mean)


class PoolOpponents(OpponentDraws):
    """A lone vectorized learner's opponents: its pool's snapshots and, last, the initial policy (the fixed
    opponent of the first ``initial_envs`` environments), stacked for one batched forward.

    Args:
        task, generator, mean_share: see :class:`OpponentDraws`.
        pool: the learner's opponent pool (its chooser's probabilities draw the opponents).
        initial_blob: the initial policy's weights.
        initial_envs: the environments that always play the initial policy.
        template: a network of the learner's architecture.
    """

    def __init__(self, task: VecTask, generator: torch.Generator, mean_share: float, pool: OpponentPool,
                 initial_blob: np.ndarray, initial_envs: int, template: ActorCritic) -> None:
        super().__init__(task, generator, mean_share)
        self.pool, self.initial_blob, self.template = pool, initial_blob, template
        self.initial_lane = torch.arange(task.num_envs, device=self.device) < initial_envs
        self.pool_ids: list[int] = []
        self.stacked: StackedPolicies | None = None
        self.stack()

    def stack(self) -> None:
        """Stack the pool's snapshots and, last, the initial policy. Games in progress keep their opponent if it is
        still in the pool; the others (and every environment at the start) draw one."""
        previous = self.pool_ids if self.stacked is not None else None
        self.pool_ids = list(self.pool.snapshots)
        blobs = [self.pool.snapshots[i].blob for i in self.pool_ids] + [self.initial_blob]
        self.stacked = StackedPolicies(self.template, blobs, self.device)
        probabilities = self.pool.probabilities()
        self.pool_weights = torch.tensor([probabilities[i] for i in self.pool_ids], device=self.device)
        drawn = self._draw()
        if previous is None:
            self.opponent, self.opponent_mean = drawn, self._draw_mean()
            return
        position = {snapshot_id: index for index, snapshot_id in enumerate(self.pool_ids)}
        moved = torch.tensor([position.get(i, -1) for i in previous] + [len(self.pool_ids)], device=self.device)
        kept = moved[self.opponent]
        self.opponent = torch.where(kept >= 0, kept, drawn)

    @property
    def count(self) -> int:
        """The stacked opponents: the snapshots and the initial policy."""
        return len(self.pool_ids) + 1

    def _draw(self) -> torch.Tensor:
        """A pool position per environment ``(E,)`` by the chooser's probabilities (the initial policy's index in
        its fixed lanes); sampled on the device."""
        drawn = torch.multinomial(self.pool_weights, self.task.num_envs, replacement=True, generator=self.generator)
        return torch.where(self.initial_lane, len(self.pool_ids), drawn)

    def act(self, observations: torch.Tensor, width: int | None) -> torch.Tensor:
        """The opponents' actions ``(E × seats, A)`` for their observations (seat-major, as the task orders them);
        ``width``: rows each stacked policy's block is padded to (None: exactly its rows)."""
        assert self.stacked is not None
        seats = self.task.num_agents - 1
        return self.stacked.act(observations, self.opponent.repeat(seats),
                                deterministic=self.opponent_mean.repeat(seats), generator=self.generator, width=width)

    def record(self, outcomes: np.ndarray) -> None:
        """The learner's game counts ``(count, 3)`` against each stacked opponent into the pool."""
        self.pool.record_counts({snapshot_id: outcomes[row] for row, snapshot_id in enumerate(self.pool_ids)})
