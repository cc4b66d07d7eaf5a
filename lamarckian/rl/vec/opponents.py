"""What the vectorized learners share about the other seats of their games: per environment, which stacked
opponent plays them and whether with its mean actions, both redrawn on the device when the environment's game
ends; and the games' outcomes as rows to count."""

from __future__ import annotations

from typing import Mapping

import torch

from ...mdp.vec import VecTask


def outcome_rows(extras: Mapping[str, torch.Tensor], device: torch.device) -> torch.Tensor:
    """``(E, 3)`` float on ``device``: agent 0's win, draw and loss flags of each environment's step."""
    return torch.stack([extras["win"], extras["draw"], extras["lose"]], dim=1).to(device).float()


class OpponentDraws:
    """A vectorized learner's opponents, one per environment: ``opponent`` ``(E,)`` (a stacked policy's index) and
    ``opponent_mean`` ``(E,)`` bool. A subclass says how an opponent is drawn (:meth:`_draw`) and holds ``task``,
    ``generator``, ``device`` and ``mean_share`` (``rl.opponent.deterministic``)."""

    task: VecTask
    generator: torch.Generator
    device: torch.device
    mean_share: float
    opponent: torch.Tensor
    opponent_mean: torch.Tensor

    def _draw(self) -> torch.Tensor:
        """A stacked opponent per environment ``(E,)``, sampled on the device."""
        raise NotImplementedError

    def _draw_mean(self) -> torch.Tensor:
        """Per environment ``(E,)``: whether its opponent plays mean actions (probability ``mean_share``)."""
        return torch.rand(self.task.num_envs, generator=self.generator, device=self.device) < self.mean_share

    def _redraw_finished(self, done: torch.Tensor) -> None:
        """New opponents (and mean-action draws) for the environments whose game ended (``done (E,)``)."""
        self.opponent = torch.where(done, self._draw(), self.opponent)
        self.opponent_mean = torch.where(done, self._draw_mean(), self.opponent_mean)
