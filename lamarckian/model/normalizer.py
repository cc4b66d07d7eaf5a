"""Running mean/variance normalization kept in module buffers (so it travels inside the weight blob)."""

from __future__ import annotations

import torch
from torch import nn


class RunningNormalizer(nn.Module):
    """Normalizes ``(..., *shape)`` inputs with running statistics (parallel Welford update), clipped to ±clip.

    Args:
        shape: shape of one sample.
        clip: bound of the normalized value.
        epsilon: added to the variance.
    """

    mean: torch.Tensor    # buffers: ``shape``, ``shape``, ``()``
    var: torch.Tensor
    count: torch.Tensor

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, epsilon: float = 1e-8) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("var", torch.ones(shape))
        self.register_buffer("count", torch.tensor(1e-4))
        self.clip, self.epsilon = clip, epsilon

    @torch.no_grad()
    def update(self, batch: torch.Tensor) -> None:
        """Fold ``batch`` of shape ``(n, *shape)`` into the statistics."""
        batch = batch.reshape(-1, *self.mean.shape).to(self.mean.dtype)
        count = batch.shape[0]
        if count == 0:
            return
        self.update_moments(batch.mean(0), batch.var(0, unbiased=False), count)

    @torch.no_grad()
    def update_moments(self, mean: torch.Tensor, var: torch.Tensor, count: float | torch.Tensor) -> None:
        """Fold a batch given by its mean, population variance (per feature) and count (Chan et al.)."""
        count = float(count)
        delta = mean.to(self.mean.dtype) - self.mean
        total = self.count + count
        self.mean += delta * count / total
        self.var.copy_((self.var * self.count + var * count + delta.square() * self.count * count / total) / total)
        self.count.fill_(total)

    def std(self) -> torch.Tensor:
        """The scale of the normalized units ``shape``: ``sqrt(var + epsilon)``."""
        return torch.sqrt(self.var + self.epsilon)

    def forward(self, value: torch.Tensor) -> torch.Tensor:
        return ((value - self.mean) / self.std()).clamp(-self.clip, self.clip)

    def denormalize(self, value: torch.Tensor) -> torch.Tensor:
        return value * self.std() + self.mean
