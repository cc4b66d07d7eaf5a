"""A user's own algorithm, outside the package: REINFORCE with a learned baseline (Williams 1992), named in the
config as ``rl.algorithm: tests.plugins.reinforce:Reinforce``. The actors, the network and the learner loop are the
package's; this file is the update rule: discounted returns of each segment (bootstrapped by the critic where the
segment cuts an episode), the log-probability gradient weighted by return − baseline, the baseline regressed on the
returns, each sample in one gradient step."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch

from lamarckian.rl.algorithms import Algorithm


def returns(segment, discount: float) -> np.ndarray:
    """Discounted returns ``[T, L]``: reset where an episode ended, the value of the cut where a time limit or the
    segment's end cut it."""
    steps = segment.rewards.shape[0]
    total = segment.values[-1].astype(np.float64)
    out = np.zeros(segment.rewards.shape)
    for t in reversed(range(steps)):
        total = np.where(segment.dones[t], segment.final_values[t], total)
        total = segment.rewards[t] + discount * total
        out[t] = total
    return out.astype(np.float32)


class ReinforceUpdate:
    """Adam steps on ``−(G − V)·log π + ½ (V − G)² − β·entropy`` over ``minibatches`` parts of each batch, the
    gradient's norm clipped at ``grad_clip``."""

    max_staleness = 0                      # on-policy: only the newest weights' segments

    def __init__(self, model: torch.nn.Module, lr: float, discount: float, entropy: float, minibatches: int,
                 grad_clip: float) -> None:
        self.model, self.lr, self.discount, self.entropy = model, lr, discount, entropy
        self.minibatches, self.grad_clip = minibatches, grad_clip
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def update(self, segments: list, version: int, cost: int) -> dict[str, float]:
        observations = torch.from_numpy(np.concatenate([s.observations.reshape(-1, *s.observations.shape[2:])
                                                        for s in segments]))
        actions = torch.from_numpy(np.concatenate([s.actions.reshape(-1, *s.actions.shape[2:]) for s in segments]))
        targets = torch.from_numpy(np.concatenate([returns(s, self.discount).reshape(-1) for s in segments]))
        losses = []
        for rows in torch.randperm(len(targets)).chunk(self.minibatches):     # every sample once
            distribution, values = self.model.replay({"observations": observations[rows]})
            advantages = (targets[rows] - values).detach()
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            loss = (-(advantages * self.model.log_prob(distribution, actions[rows])).mean()
                    + 0.5 * (values - targets[rows]).square().mean()
                    - self.entropy * self.model.entropy(distribution).mean())
            self.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
            self.optimizer.step()
            losses.append(float(loss.detach()))
        return {"loss": float(np.mean(losses)), "samples": float(len(targets))}

    def set_lr(self, lr: float) -> None:
        self.lr = lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "lr": self.lr}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.set_lr(float(state["lr"]))


class Reinforce(Algorithm):
    """The acting network and the actors are the defaults (an actor-critic sampling its actions). Its own settings
    come from ``rl.kwargs``; ``train.lr`` and ``rl.discount`` are the run's (evolve.py can search them)."""

    name = "reinforce"

    def __init__(self, minibatches: int = 1, entropy: float = 0.01, grad_clip: float = 0.5) -> None:
        self.minibatches, self.entropy, self.grad_clip = minibatches, entropy, grad_clip

    def update_rule(self, model: torch.nn.Module, config: Mapping[str, Any]) -> ReinforceUpdate:
        return ReinforceUpdate(model, config["train"]["lr"], config["rl"]["discount"], self.entropy, self.minibatches,
                               self.grad_clip)
