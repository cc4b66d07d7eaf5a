"""Small pieces the off-policy updates share: a clipped optimizer step, Polyak averaging of target networks."""

from __future__ import annotations

import functools
from typing import Any, Iterable

import torch
from torch import nn


def adam(parameters: Iterable[Any], lr: float, eps: float = 1e-8) -> torch.optim.Adam:
    """Adam over ``parameters`` (tensors, or parameter groups as dicts), fused into one kernel where this torch and
    device have it (on a CPU: ~20× less time per step for small networks than the per-parameter loop), else the
    foreach implementation."""
    parameters = list(parameters)
    try:
        return torch.optim.Adam(parameters, lr=lr, eps=eps, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(parameters, lr=lr, eps=eps)


class OwnsAdam:
    """An update rule's :attr:`optimizer` (Adam over :meth:`optimized`, at :attr:`lr`), built on first use: torch's
    optimizers import ``torch._dynamo`` (~1.2 s of CPU) when first called, which a run then pays while its actors
    take their first steps instead of before they start."""

    lr: float
    adam_eps = 1e-8

    def optimized(self) -> Iterable[Any]:
        """What the optimizer steps: parameters, or parameter groups as dicts."""
        raise NotImplementedError

    @functools.cached_property
    def optimizer(self) -> torch.optim.Adam:
        return adam(self.optimized(), lr=self.lr, eps=self.adam_eps)

    def set_lr(self, lr: float) -> None:
        """The learning rate from now on (a schedule may change it at the next update)."""
        self.lr = lr
        if "optimizer" in self.__dict__:
            set_learning_rate([self.optimizer], lr)


def optimizer_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor, parameters: Iterable[nn.Parameter],
                   grad_clip: float | None) -> None:
    """Zero the gradients, back-propagate ``loss`` into ``parameters`` only (gradients of other leaves the loss
    depends on, such as the critics under SAC's policy loss, are neither computed nor kept), clip their global norm
    at ``grad_clip`` (None: no clip), step."""
    parameters = list(parameters)
    optimizer.zero_grad(set_to_none=True)
    loss.backward(inputs=parameters)
    if grad_clip is not None:
        nn.utils.clip_grad_norm_(parameters, grad_clip)
    optimizer.step()


@torch.no_grad()
def polyak(target: nn.Module, source: nn.Module, tau: float) -> None:
    """``target ← (1 − tau) · target + tau · source`` for every parameter (tau 1: a copy)."""
    targets: list[torch.Tensor] = list(target.parameters())
    sources: list[torch.Tensor] = list(source.parameters())
    if tau >= 1.0:
        torch._foreach_copy_(targets, sources)
    else:
        torch._foreach_lerp_(targets, sources, tau)


def set_learning_rate(optimizers: Iterable[torch.optim.Optimizer], lr: float) -> None:
    """Every parameter group of ``optimizers`` steps with ``lr`` from now on."""
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            group["lr"] = lr
