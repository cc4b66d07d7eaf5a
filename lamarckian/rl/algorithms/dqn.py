"""DQN's update (Mnih et al. 2015) with double Q-learning (van Hasselt et al. 2016), dueling heads (in
:class:`~lamarckian.model.offpolicy.QNetwork`), n-step targets and importance-weighted Huber loss for prioritized
replay (Schaul et al. 2016); the target network is copied every ``rl.dqn.target_update`` updates or Polyak-averaged.

Shapes: ``N`` transitions per batch, ``A`` actions.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

import torch
from torch.nn import functional

from ...model.offpolicy import QNetwork
from .dqn_settings import DQNSettings
from .optim import OwnsAdam, optimizer_step, polyak


class DQN(OwnsAdam):
    """Updates ``model`` from replayed n-step transitions.

    Args:
        model: the online network (the actors act with its weights).
        settings: ``rl.dqn``.
        lr, grad_clip: ``train.lr`` and ``train.grad_clip``.
    """

    def __init__(self, model: QNetwork, settings: DQNSettings, lr: float, grad_clip: float | None) -> None:
        self.model, self.settings, self.grad_clip = model, settings, grad_clip
        self.target = copy.deepcopy(model).requires_grad_(False)
        self.lr = lr
        self.updates = 0

    def update(self, batch: Mapping[str, torch.Tensor], weights: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        """One gradient step on ``batch`` (``observations (N, ...)``, ``actions (N,)``, ``returns (N,)``,
        ``next_observations (N, ...)``, ``bootstraps (N,)`` = γ^n or 0 where the episode terminated) weighted by
        ``weights (N,)``. The TD errors ``(N,)`` (new priorities) and the step's loss and mean Q (tensors)."""
        observations, next_observations = batch["observations"], batch["next_observations"]
        count = len(observations)
        if self.settings.double:       # one forward of the online network over both halves
            values = self.model(torch.cat([observations, next_observations]))
            chosen = values[:count].gather(1, batch["actions"].long().unsqueeze(1)).squeeze(1)
            best = values[count:].detach().argmax(-1)
        else:
            chosen = self.model(observations).gather(1, batch["actions"].long().unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            following = self.target(next_observations)
            if not self.settings.double:
                best = following.argmax(-1)
            targets = batch["returns"] + batch["bootstraps"] * following.gather(1, best.unsqueeze(1)).squeeze(1)
        loss = (weights * functional.smooth_l1_loss(chosen, targets, reduction="none")).mean()
        optimizer_step(self.optimizer, loss, self.model.parameters(), self.grad_clip)
        self.updates += 1
        if self.settings.tau < 1.0:
            polyak(self.target, self.model, self.settings.tau)
        elif self.updates % self.settings.target_update == 0:
            polyak(self.target, self.model, 1.0)
        return (chosen - targets).detach(), {"loss": loss.detach(), "q": chosen.detach().mean()}

    def optimized(self) -> Any:
        return self.model.parameters()

    def state_dict(self) -> dict[str, Any]:
        """The target network, optimizer moments, lr, update count."""
        return {"target": self.target.state_dict(), "optimizer": self.optimizer.state_dict(), "lr": self.lr,
                "updates": self.updates}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.set_lr(float(state["lr"]))
        self.updates = int(state["updates"])
