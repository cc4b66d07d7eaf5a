"""TD3 (Fujimoto et al. 2018) on the actor fleet's replay learner: a deterministic tanh policy acting with Gaussian
noise, twin critics whose minimum makes the target, the target policy smoothed by clipped noise, the policy and the
targets updated every ``policy_delay`` critic updates.

The whole algorithm is this module and its settings (:mod:`.td3_settings`), named by one line of the registry.
Shapes: ``N`` transitions per batch, ``A`` action dimensions.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

import gymnasium
import numpy as np
import torch
from torch import nn

from ...config.sections import TrainSettings
from ...model import ModelSettings
from ...model.network import build_encoder, init_layer
from ...model.offpolicy import CriticEnsemble, continuous_control, to_bounds
from .builtin import ReplayAlgorithm
from .optim import OwnsAdam, polyak
from .td3_settings import TD3Settings


class DeterministicPolicy(nn.Module):
    """``a = tanh(μ(s))`` in ``[-1, 1]^A``; acting adds Gaussian noise of standard deviation ``noise`` (clipped to
    the bounds), evaluation does not. The actors' interface of the other acting networks (``batcher``, ``act``,
    ``env_action``, ``discrete``)."""

    discrete = False

    def __init__(self, observation_space: gymnasium.Space[Any], action_space: gymnasium.Space[Any],
                 settings: ModelSettings, noise: float) -> None:
        super().__init__()
        self.settings, self.noise = settings, noise
        self.batcher, self.action_space = continuous_control(observation_space, action_space, "td3")
        self.encoder, width = build_encoder(self.batcher, settings)
        self.head = init_layer(nn.Linear(width, int(np.prod(self.action_space.shape))), 0.01)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """Actions ``(N, A)`` in ``[-1, 1]``."""
        return torch.tanh(self.head(self.encoder(observation)))

    @torch.no_grad()
    def act(self, observation: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Actions ``(N, A)`` (with the exploration noise unless ``deterministic``), log-probabilities and values 0
        ``(N,)`` (a deterministic policy has no density; the critics are the learner's)."""
        action = self(observation)
        if not deterministic and self.noise > 0:
            noise = torch.randn(action.shape, generator=generator, device=action.device)
            action = (action + self.noise * noise).clamp(-1.0, 1.0)
        zeros = torch.zeros(len(action), device=action.device)
        return action, zeros, zeros

    def env_action(self, action: np.ndarray) -> np.ndarray:
        """An action scaled from ``[-1, 1]`` to the action space's bounds."""
        return to_bounds(action, self.action_space)


class TD3(OwnsAdam):
    """Updates ``policy`` and its twin critics from replayed n-step transitions.

    Args:
        policy: the acting network (the actors act with its weights).
        model: the ``model`` settings the critics are built with (as the policy).
        settings: ``rl.td3``; ``lr``, ``grad_clip``: ``train.lr`` and ``train.grad_clip``.
    """

    def __init__(self, policy: DeterministicPolicy, model: ModelSettings, settings: TD3Settings, lr: float,
                 grad_clip: float | None) -> None:
        device = next(policy.parameters()).device
        self.policy, self.settings, self.grad_clip, self.lr = policy, settings, grad_clip, lr
        self.critics = CriticEnsemble(policy.batcher.shape[0], int(np.prod(policy.action_space.shape)), model,
                                      2).to(device)
        self.target_critics = copy.deepcopy(self.critics).requires_grad_(False)
        self.target_policy = copy.deepcopy(policy).requires_grad_(False)
        self.groups: list[list[torch.Tensor]] = [list(policy.parameters()), list(self.critics.parameters())]
        self.updates = 0

    def targets(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """``(N,)`` n-step targets: ``returns + bootstraps · min_i Q'_i(s', clip(π'(s') + clip(ε, ±c), −1, 1))``."""
        with torch.no_grad():
            following = batch["next_observations"]
            action = self.target_policy(following)
            noise = (torch.randn_like(action) * self.settings.target_noise).clamp(-self.settings.noise_clip,
                                                                                  self.settings.noise_clip)
            values = self.target_critics(following, (action + noise).clamp(-1.0, 1.0))
            return batch["returns"] + batch["bootstraps"] * values.min(0).values

    def update(self, batch: Mapping[str, torch.Tensor], weights: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        """One step of the critics on ``batch`` (``observations (N, D)``, ``actions (N, A)`` in ``[-1, 1]``,
        ``returns (N,)``, ``next_observations (N, D)``, ``bootstraps (N,)``) weighted by ``weights (N,)``, and every
        ``policy_delay``-th one of the policy (up the first critic) and of the targets. The critics' mean TD errors
        ``(N,)`` (new priorities) and the step's statistics (tensors)."""
        observations = batch["observations"]
        targets = self.targets(batch)
        values = self.critics(observations, batch["actions"])
        critic_loss = 0.5 * (weights * (values - targets).square()).mean(1).sum()
        self.optimizer.zero_grad(set_to_none=True)
        stats = {"loss": critic_loss.detach(), "q": values.detach().mean()}
        delayed = self.updates % self.settings.policy_delay == 0
        if delayed:
            policy_loss = -self.critics(observations, self.policy(observations))[0].mean()
            policy_loss.backward(inputs=self.groups[0])     # the critics' gradients come from their own loss only
            stats["policy_loss"] = policy_loss.detach()
        critic_loss.backward(inputs=self.groups[1])
        if self.grad_clip is not None:
            for group in self.groups:
                nn.utils.clip_grad_norm_(group, self.grad_clip)
        self.optimizer.step()
        if delayed:
            polyak(self.target_critics, self.critics, self.settings.tau)
            polyak(self.target_policy, self.policy, self.settings.tau)
        self.updates += 1
        return values.detach().mean(0) - targets, stats

    def optimized(self) -> list[dict[str, Any]]:
        return [{"params": group} for group in self.groups]

    def state_dict(self) -> dict[str, Any]:
        """Critics, target critics and policy, optimizer moments, lr, update count."""
        return {"critics": self.critics.state_dict(), "target_critics": self.target_critics.state_dict(),
                "target_policy": self.target_policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "lr": self.lr, "updates": self.updates}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.critics.load_state_dict(state["critics"])
        self.target_critics.load_state_dict(state["target_critics"])
        self.target_policy.load_state_dict(state["target_policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.set_lr(float(state["lr"]))
        self.updates = int(state["updates"])


class TD3Algorithm(ReplayAlgorithm):
    """TD3 (Fujimoto et al. 2018): twin critics, delayed policy updates, target policy smoothing."""

    name = "td3"

    def replay_network(self, observation: Any, action: Any, settings: ModelSettings, config: Mapping[str, Any]
                       ) -> torch.nn.Module:
        return DeterministicPolicy(observation, action, settings, TD3Settings.from_config(config).noise)

    def replay_update(self, model: torch.nn.Module, config: Mapping[str, Any]) -> TD3:
        train = TrainSettings.from_config(config)
        if not isinstance(model, DeterministicPolicy):
            raise TypeError(f"rl.algorithm=td3 learns a DeterministicPolicy, not a {type(model).__name__}")
        return TD3(model, ModelSettings.from_config(config), TD3Settings.from_config(config), train.lr,
                   train.grad_clip)
