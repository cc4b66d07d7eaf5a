"""SAC's update (Haarnoja et al. 2018): twin critics (or a REDQ ensemble, Chen et al. 2021) and their Polyak-averaged
targets, the tanh-squashed Gaussian policy, the entropy temperature tuned towards a target entropy.

Shapes: ``N`` transitions per batch, ``A`` action dimensions, ``E`` critics.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

import numpy as np
import torch
from torch import nn

from ...model import ModelSettings
from ...model.offpolicy import CriticEnsemble, SquashedGaussianPolicy
from .optim import OwnsAdam, polyak
from .sac_settings import SACSettings


class SAC(OwnsAdam):
    """Updates ``policy`` and its critics from replayed n-step transitions.

    Args:
        policy: the acting network (the actors act with its weights).
        model: the ``model`` settings the critics are built with (as the policy).
        settings: ``rl.sac``; ``lr``, ``grad_clip``: ``train.lr`` and ``train.grad_clip``.
    """

    def __init__(self, policy: SquashedGaussianPolicy, model: ModelSettings, settings: SACSettings, lr: float,
                 grad_clip: float | None) -> None:
        device = next(policy.parameters()).device
        self.policy, self.settings, self.grad_clip, self.lr = policy, settings, grad_clip, lr
        dimensions = int(np.prod(policy.action_space.shape))
        self.critics = CriticEnsemble(policy.batcher.shape[0], dimensions, model, settings.critics).to(device)
        self.target_critics = copy.deepcopy(self.critics).requires_grad_(False)
        self.log_alpha = torch.tensor(float(np.log(settings.alpha)), device=device, requires_grad=True)
        self.target_entropy = -float(dimensions) if settings.target_entropy is None else settings.target_entropy
        self.groups: list[list[torch.Tensor]] = [list(policy.parameters()), list(self.critics.parameters()),
                                                 [self.log_alpha]]
        self.updates = 0

    def _targets(self, batch: Mapping[str, torch.Tensor], alpha: torch.Tensor) -> torch.Tensor:
        """``(N,)`` soft n-step targets: the minimum over ``target_critics`` target critics (all of them, or a
        random subset as in REDQ) of ``Q(s', a') − α log π(a'|s')``, ``a' ~ π(s')``."""
        with torch.no_grad():
            next_actions, next_log_probs = self.policy.sample(batch["next_observations"])
            values = self.target_critics(batch["next_observations"], next_actions)
            if self.settings.target_critics < self.settings.critics:
                drawn = torch.randperm(self.settings.critics, device=values.device)[:self.settings.target_critics]
                values = values[drawn]
            soft = values.min(0).values - alpha * next_log_probs
            return batch["returns"] + batch["bootstraps"] * soft

    def update(self, batch: Mapping[str, torch.Tensor], weights: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        """One step of the critics, the policy and the temperature on ``batch`` (``observations (N, D)``,
        ``actions (N, A)`` squashed, ``returns (N,)``, ``next_observations (N, D)``, ``bootstraps (N,)``) weighted
        by ``weights (N,)``; the three losses are taken from the same networks and stepped together (as in
        Haarnoja et al.'s algorithm; one optimizer step instead of three). The critics' mean TD errors ``(N,)`` (new
        priorities) and the step's statistics (tensors)."""
        observations = batch["observations"]
        alpha = self.log_alpha.detach().exp()
        targets = self._targets(batch, alpha)
        values = self.critics(observations, batch["actions"])
        critic_loss = 0.5 * (weights * (values - targets).square()).mean(1).sum()
        self.optimizer.zero_grad(set_to_none=True)
        stats = {"loss": critic_loss.detach(), "alpha": alpha, "q": values.detach().mean()}
        if self.updates % self.settings.policy_delay == 0:
            actions, log_probs = self.policy.sample(observations)
            judged = self.critics(observations, actions)
            judged = judged.mean(0) if self.settings.target_critics < self.settings.critics else judged.min(0).values
            policy_loss = (alpha * log_probs - judged).mean()
            policy_loss.backward(inputs=self.groups[0])     # the critics' gradients come from their own loss only
            if self.settings.learn_alpha:
                (-(self.log_alpha * (log_probs.detach() + self.target_entropy)).mean()).backward(inputs=self.groups[2])
            stats.update(policy_loss=policy_loss.detach(), entropy=-log_probs.detach().mean())
        critic_loss.backward(inputs=self.groups[1])
        if self.grad_clip is not None:
            for group in self.groups[:2]:
                nn.utils.clip_grad_norm_(group, self.grad_clip)
        self.optimizer.step()
        polyak(self.target_critics, self.critics, self.settings.tau)
        self.updates += 1
        return values.detach().mean(0) - targets, stats

    def optimized(self) -> list[dict[str, Any]]:
        return [{"params": group} for group in self.groups]       # one fused step for all three

    def state_dict(self) -> dict[str, Any]:
        """Critics, target critics, the temperature, optimizer moments, lr, update count."""
        return {"critics": self.critics.state_dict(), "target_critics": self.target_critics.state_dict(),
                "log_alpha": self.log_alpha.detach().clone(), "optimizer": self.optimizer.state_dict(), "lr": self.lr,
                "updates": self.updates}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.critics.load_state_dict(state["critics"])
        self.target_critics.load_state_dict(state["target_critics"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.set_lr(float(state["lr"]))
        self.updates = int(state["updates"])
